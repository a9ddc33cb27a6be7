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

    #pager;
    #form = { ...NO_FILTERS };
    /** The promise of the query and re-render in progress (tests and callers may await it). */
    #busy = Promise.resolve();

    /** @param {object} [options] ApplicationV2 options */
    constructor(options = {}) {
      super(options);
      this.#pager = createAuditPager({
        send: (message) => {
          const link = bridgeLink();
          return link ? link.request(message) : Promise.reject(Object.assign(new Error("no bridge link"), { code: "bridge_down" }));
        },
        isReady: () => Boolean(bridgeLink()?.isReady()),
        newId: fvtt.randomId,
      });
    }

    /** @returns {import("./logic/audit.js").AuditState} the pager's state (read-only) */
    get auditState() {
      return this.#pager.state;
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
        },
        fvtt.localize,
        {
          onSearch: (form) => this.search(form),
          onOlder: () => this.loadOlder(),
          onShowMessage: (messageId) => showMessage(messageId),
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
