/**
 * The GM-only "Fate audit" window: a thin ApplicationV2 (Foundry v13+) around the pure pager in
 * logic/audit.js and the DOM builder in logic/audit-view.js. Only main.js imports this file;
 * every Foundry global is reached through foundry.js.
 *
 * ApplicationV2 contract used (v13/v14): `_canRender` may throw to refuse with a warning,
 * `_renderHTML(context, options)` returns what `_replaceHTML(result, content, options)` puts in
 * the window, `_onFirstRender` runs after the first render. Foundry's settings menu opens the
 * class with `new WindowClass().render(true)`, so the constructor takes no dependencies: they
 * come from `defineAuditWindow`.
 */

import * as fvtt from "./foundry.js";
import { auditRows, createAuditPager } from "./logic/audit.js";
import { AUDIT_CLASS, renderAudit } from "./logic/audit-view.js";
import { collectReceipts, createReceiptsChecker, receiptsExport } from "./logic/receipts.js";
import { buildReportQuery, reportFilename, reportHtml } from "./logic/audit-report.js";

/** Empty filter form. */
const NO_FILTERS = Object.freeze({ actorId: "", outcome: "", since: "", until: "" });

/**
 * Make the window class.
 *
 * @param {() => ({isReady(): boolean, request(message: object): Promise<object>} | null)} bridgeLink
 *   the live bridge connection of this browser, or null (not the active GM, or stopped)
 * @returns {Function} an ApplicationV2 subclass; `new FateAuditWindow().render(true)` opens it
 */
export function defineAuditWindow(bridgeLink) {
  const Base = fvtt.applicationV2Base();

  return class FateAuditWindow extends Base {
    static DEFAULT_OPTIONS = {
      id: "fate-bridge-audit-{id}",
      classes: [AUDIT_CLASS],
      window: { title: "FATE_BRIDGE.Audit.Title", icon: "fa-solid fa-scroll", resizable: true },
      position: { width: 900, height: 600 },
    };

    /** The bridge link the pager, the receipts check and the report share. */
    #link;
    #pager;
    #receipts;
    #report = { status: "idle", error: null };
    #form = { ...NO_FILTERS };
    /** The promise of the query and re-render in progress (tests and callers may await it). */
    #busy = Promise.resolve();

    /** @param {object} [options] ApplicationV2 options */
    constructor(options = {}) {
      super(options);
      const link = {
        send: (message) => {
          const live = bridgeLink();
          return live ? live.request(message) : Promise.reject(Object.assign(new Error("no bridge link"), { code: "bridge_down" }));
        },
        isReady: () => Boolean(bridgeLink()?.isReady()),
        newId: fvtt.randomId,
      };
      this.#link = link;
      this.#pager = createAuditPager(link);
      this.#receipts = createReceiptsChecker(link);
    }

    /** @returns {import("./logic/audit.js").AuditState} the pager's state (read-only) */
    get auditState() {
      return this.#pager.state;
    }

    /** @returns {import("./logic/receipts.js").ReceiptsState} the receipts check's state (read-only) */
    get receiptsState() {
      return this.#receipts.state;
    }

    /** @returns {Promise<void>} resolves when the current query has been answered and shown */
    settled() {
      return this.#busy;
    }

    /** Non-GMs never see this window, however it is opened. */
    _canRender(options) {
      if (!fvtt.currentUserIsGM()) throw new Error(fvtt.localize("FATE_BRIDGE.Audit.GmOnly"));
      return super._canRender?.(options);
    }

    async _renderHTML() {
      const state = this.#pager.state;
      return renderAudit(
        fvtt.htmlDocument(),
        {
          state,
          rows: auditRows(state.records, { userName: fvtt.userName, t: fvtt.localize }),
          form: this.#form,
          actors: fvtt.worldActors(),
          receipts: this.#receipts.state,
          report: this.#report,
        },
        fvtt.localize,
        {
          onSearch: (form) => this.search(form),
          onOlder: () => this.loadOlder(),
          onShowMessage: (messageId) => showMessage(messageId),
          onCheckReceipts: () => this.checkReceipts(),
          onExportReceipts: () => this.exportReceipts(),
          onReport: () => this.downloadReport(),
        },
      );
    }

    _replaceHTML(result, content) {
      content.replaceChildren(result);
    }

    _onFirstRender(context, options) {
      super._onFirstRender?.(context, options);
      this.search(NO_FILTERS);
    }

    /**
     * Ask for the newest page matching `form`.
     *
     * @param {{actorId: string, outcome: string, since: string, until: string}} form
     * @returns {Promise<void>}
     */
    search(form) {
      this.#form = { ...NO_FILTERS, ...form };
      return this.#run(this.#pager.search(this.#form));
    }

    /** @returns {Promise<void>} the next older page, appended */
    loadOlder() {
      return this.#run(this.#pager.loadOlder());
    }

    /**
     * "Check receipts": every receipt of this world in the chat log, checked by the bridge.
     *
     * @returns {Promise<void>}
     */
    checkReceipts() {
      const collected = collectReceipts(fvtt.chatMessageFlags(), fvtt.worldId());
      return this.#run(this.#receipts.check(collected));
    }

    /**
     * "Export receipts": download `{world_id, receipts}` for `fate-bridge audit verify --receipts`.
     *
     * @returns {{count: number, filename: string}}
     */
    exportReceipts() {
      const worldId = fvtt.worldId();
      const file = receiptsExport(worldId, collectReceipts(fvtt.chatMessageFlags(), worldId));
      const filename = `fate-bridge-receipts-${worldId}.json`;
      fvtt.saveTextFile(`${JSON.stringify(file, null, 2)}\n`, "application/json", filename);
      fvtt.notify("info", "FATE_BRIDGE.Audit.Receipts.Exported", { count: file.receipts.length, filename });
      return { count: file.receipts.length, filename };
    }

    /**
     * "Report": the bridge draws the same HTML page as `fate-bridge audit report` (from the
     * "since" filter on) and this browser downloads it.
     *
     * @returns {Promise<void>}
     */
    downloadReport() {
      if (!this.#link.isReady()) {
        this.#report = { status: "down", error: null };
        return this.#run(Promise.resolve());
      }
      const queryId = this.#link.newId();
      this.#report = { status: "loading", error: null };
      const asked = this.#link.send(buildReportQuery(queryId, this.#pager.state.filters)).then(
        (reply) => {
          const html = reportHtml(reply, queryId);
          if (html === null) {
            this.#report = { status: "error", error: "internal" };
            return;
          }
          fvtt.saveTextFile(html, "text/html", reportFilename(fvtt.worldId()));
          this.#report = { status: "ready", error: null };
        },
        (error) => {
          this.#report = { status: "error", error: typeof error?.code === "string" ? error.code : "internal" };
        },
      );
      return this.#run(asked);
    }

    /** Show "loading" now, the answer when it comes. */
    #run(query) {
      this.render();
      this.#busy = query.then(() => this.render()).then(() => undefined);
      return this.#busy;
    }
  };
}

/** Scroll to / pop out a record's ChatMessage; say so when it no longer exists. */
function showMessage(messageId) {
  const result = fvtt.revealChatMessage(messageId);
  if (result === "gone") fvtt.notify("warn", "FATE_BRIDGE.Audit.MessageGone");
  else if (result === "hidden") fvtt.notify("warn", "FATE_BRIDGE.Audit.MessageHidden");
}
