/**
 * The audit window's content as DOM: filters, a status line, the table, "Load older". Pure DOM
 * work on a given Document (like card-ui.js); every outside string goes in through
 * `textContent` or `value`, never as HTML. Listeners call the callbacks the window passes.
 */

import { AUDIT_OUTCOMES, AUDIT_STATUS } from "./audit.js";
import { RECEIPTS_STATUS } from "./receipts.js";

/** Class of the window's root element and prefix of its parts. */
export const AUDIT_CLASS = "fate-bridge-audit";

/** The tools' states before their first use. */
const NOT_CHECKED = Object.freeze({ status: RECEIPTS_STATUS.IDLE, error: null, results: [], counts: { ok: 0, missing: 0, changed: 0 } });
const NO_REPORT = Object.freeze({ status: "idle", error: null });

/** Table columns, in order: [row field, header key]. */
const COLUMNS = Object.freeze([
  ["time", "FATE_BRIDGE.Audit.Column.Time"],
  ["actor", "FATE_BRIDGE.Audit.Column.Actor"],
  ["test", "FATE_BRIDGE.Audit.Column.Test"],
  ["levels", "FATE_BRIDGE.Audit.Column.Levels"],
  ["fateRoll", "FATE_BRIDGE.Audit.Column.FateRoll"],
  ["point", "FATE_BRIDGE.Audit.Column.Point"],
  ["outcome", "FATE_BRIDGE.Audit.Column.Outcome"],
  ["user", "FATE_BRIDGE.Audit.Column.User"],
]);

/**
 * Build the window's content.
 *
 * @param {Document} doc
 * @param {object} model
 * @param {import("./audit.js").AuditState} model.state the pager's state
 * @param {import("./audit.js").AuditRow[]} model.rows `auditRows(state.records)`
 * @param {{actorId: string, outcome: string, since: string, until: string}} model.form the
 *   filter inputs' current values
 * @param {Array<{id: string, name: string}>} model.actors the world's actors for the actor filter
 * @param {import("./receipts.js").ReceiptsState} [model.receipts] the receipts check's state
 *   (default: not checked yet)
 * @param {{status: string, error: string|null}} [model.report] the report download's state
 *   (`idle`, `loading`, `ready`, `down`, `error`; default idle)
 * @param {(key: string, data?: object) => string} t localize
 * @param {object} handlers
 * @param {(form: {actorId: string, outcome: string, since: string, until: string}) => void} handlers.onSearch
 * @param {() => void} handlers.onOlder
 * @param {(messageId: string) => void} handlers.onShowMessage
 * @param {() => void} handlers.onCheckReceipts
 * @param {() => void} handlers.onExportReceipts
 * @param {() => void} handlers.onReport
 * @returns {HTMLElement} the content root (`div.fate-bridge-audit-body`)
 */
export function renderAudit(doc, { state, rows, form, actors, receipts = NOT_CHECKED, report = NO_REPORT }, t, handlers) {
  const { onSearch, onOlder, onShowMessage } = handlers;
  const el = (tag, className, text) => {
    const node = doc.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const root = el("div", `${AUDIT_CLASS}-body`);

  // Filters.
  const filters = el("form", `${AUDIT_CLASS}-filters`);
  const actorSelect = select(doc, "actorId", [["", t("FATE_BRIDGE.Audit.AnyActor")], ...actors.map((a) => [a.id, a.name])], form.actorId);
  const outcomeSelect = select(
    doc,
    "outcome",
    [["", t("FATE_BRIDGE.Audit.AnyOutcome")], ...AUDIT_OUTCOMES.map((code) => [code, t(`FATE_BRIDGE.Audit.Outcome.${code}`)])],
    form.outcome,
  );
  const since = dateInput(doc, "since", form.since);
  const until = dateInput(doc, "until", form.until);
  const search = el("button", `${AUDIT_CLASS}-search`, t("FATE_BRIDGE.Audit.Search"));
  search.type = "submit";
  filters.append(
    labelled(doc, t("FATE_BRIDGE.Audit.Filter.Actor"), actorSelect),
    labelled(doc, t("FATE_BRIDGE.Audit.Filter.Outcome"), outcomeSelect),
    labelled(doc, t("FATE_BRIDGE.Audit.Filter.Since"), since),
    labelled(doc, t("FATE_BRIDGE.Audit.Filter.Until"), until),
    search,
  );
  filters.addEventListener("submit", (event) => {
    event.preventDefault();
    onSearch({ actorId: actorSelect.value, outcome: outcomeSelect.value, since: since.value, until: until.value });
  });
  root.append(filters);
  root.append(renderTools(doc, { receipts, report }, t, handlers));

  // Status line: down, loading, refused, invalid filters, or nothing found.
  const statusText = statusLine(state, rows.length, t);
  if (statusText) {
    const status = el("p", `${AUDIT_CLASS}-status ${AUDIT_CLASS}-status-${state.status}`, statusText);
    status.setAttribute("role", "status");
    root.append(status);
  }

  // Table.
  if (rows.length > 0) {
    const table = el("table", `${AUDIT_CLASS}-table`);
    const headRow = el("tr");
    for (const [, key] of COLUMNS) headRow.append(el("th", null, t(key)));
    headRow.append(el("th", null, t("FATE_BRIDGE.Audit.Column.Message")));
    const thead = el("thead");
    thead.append(headRow);
    const tbody = el("tbody");
    for (const row of rows) {
      const tr = el("tr", `${AUDIT_CLASS}-row ${AUDIT_CLASS}-outcome-${row.outcomeCode.replace(/[^a-z_]/g, "")}`);
      tr.dataset.seq = String(row.seq);
      for (const [field] of COLUMNS) {
        const td = el("td", `${AUDIT_CLASS}-${field}`, row[field]);
        if (field === "time") td.title = row.ts;
        tr.append(td);
      }
      const link = el("td", `${AUDIT_CLASS}-message`);
      if (row.messageId) {
        const button = el("button", `${AUDIT_CLASS}-show`, t("FATE_BRIDGE.Audit.ShowMessage"));
        button.type = "button";
        button.dataset.messageId = row.messageId;
        button.addEventListener("click", (event) => {
          event.preventDefault();
          onShowMessage(row.messageId);
        });
        link.append(button);
      }
      tr.append(link);
      tbody.append(tr);
    }
    table.append(thead, tbody);
    root.append(table);
  }

  // Load older.
  if (state.nextBefore !== null) {
    const older = el("button", `${AUDIT_CLASS}-older`, t("FATE_BRIDGE.Audit.LoadOlder"));
    older.type = "button";
    older.disabled = state.status === AUDIT_STATUS.LOADING || state.status === AUDIT_STATUS.DOWN;
    older.addEventListener("click", (event) => {
      event.preventDefault();
      onOlder();
    });
    root.append(older);
  }
  return root;
}

/**
 * The trail's tools: "Check receipts" (and what it found), "Export receipts", "Report".
 *
 * @param {Document} doc
 * @param {{receipts: import("./receipts.js").ReceiptsState, report: {status: string, error: string|null}}} model
 * @param {(key: string, data?: object) => string} t
 * @param {{onCheckReceipts(): void, onExportReceipts(): void, onReport(): void, onShowMessage(id: string): void}} handlers
 * @returns {HTMLElement} `div.fate-bridge-audit-tools`
 */
function renderTools(doc, { receipts, report }, t, { onCheckReceipts, onExportReceipts, onReport, onShowMessage }) {
  const el = (tag, className, text) => {
    const node = doc.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined) node.textContent = text;
    return node;
  };
  const button = (className, key, onClick, disabled = false) => {
    const node = el("button", `${AUDIT_CLASS}-${className}`, t(key));
    node.type = "button";
    node.disabled = disabled;
    node.addEventListener("click", (event) => {
      event.preventDefault();
      onClick();
    });
    return node;
  };
  const tools = el("div", `${AUDIT_CLASS}-tools`);
  const bar = el("div", `${AUDIT_CLASS}-toolbar`);
  bar.append(
    button("check-receipts", "FATE_BRIDGE.Audit.Receipts.Check", onCheckReceipts, receipts.status === RECEIPTS_STATUS.LOADING),
    button("export-receipts", "FATE_BRIDGE.Audit.Receipts.Export", onExportReceipts),
    button("report", "FATE_BRIDGE.Audit.Report.Download", onReport, report.status === "loading"),
  );
  tools.append(bar);
  const reportText = {
    loading: t("FATE_BRIDGE.Audit.Report.Loading"),
    ready: t("FATE_BRIDGE.Audit.Report.Ready"),
    down: t("FATE_BRIDGE.Audit.Down"),
    error: t("FATE_BRIDGE.Audit.Report.Failed", { code: String(report.error) }),
  }[report.status];
  if (reportText) tools.append(el("p", `${AUDIT_CLASS}-report-status`, reportText));

  const line = receiptsLine(receipts, t);
  if (line) {
    const status = el("p", `${AUDIT_CLASS}-receipts-status ${AUDIT_CLASS}-receipts-${receipts.status}`, line);
    status.setAttribute("role", "status");
    tools.append(status);
  }
  const problems = receipts.status === RECEIPTS_STATUS.READY ? receipts.results.filter((r) => r.status !== "ok") : [];
  if (problems.length > 0) {
    const list = el("ul", `${AUDIT_CLASS}-receipts-problems`);
    for (const problem of problems) {
      const item = el("li", `${AUDIT_CLASS}-receipt-${problem.status}`);
      item.dataset.seq = String(problem.seq);
      item.append(el("span", null, t(`FATE_BRIDGE.Audit.Receipts.${problem.status}`, { seq: problem.seq })));
      const show = button("show", "FATE_BRIDGE.Audit.ShowMessage", () => onShowMessage(problem.messageId));
      show.dataset.messageId = problem.messageId;
      item.append(show);
      list.append(item);
    }
    tools.append(list);
  }
  return tools;
}

/**
 * @param {import("./receipts.js").ReceiptsState} receipts
 * @param {(key: string, data?: object) => string} t
 * @returns {string|null} what the receipts check says, or null before the first check
 */
export function receiptsLine(receipts, t) {
  switch (receipts.status) {
    case RECEIPTS_STATUS.LOADING:
      return t("FATE_BRIDGE.Audit.Receipts.Loading");
    case RECEIPTS_STATUS.DOWN:
      return t("FATE_BRIDGE.Audit.Down");
    case RECEIPTS_STATUS.ERROR:
      return t("FATE_BRIDGE.Audit.Receipts.Failed", { code: String(receipts.error) });
    case RECEIPTS_STATUS.READY: {
      const total = receipts.results.length;
      if (total === 0) return t("FATE_BRIDGE.Audit.Receipts.None");
      const { ok, missing, changed } = receipts.counts;
      const key = ok === total ? "FATE_BRIDGE.Audit.Receipts.AllOk" : "FATE_BRIDGE.Audit.Receipts.Problems";
      return t(key, { total, ok, missing, changed });
    }
    default:
      return null;
  }
}

/**
 * @param {import("./audit.js").AuditState} state
 * @param {number} rowCount
 * @param {(key: string, data?: object) => string} t
 * @returns {string|null} the status line's text, or null when the table says it all
 */
export function statusLine(state, rowCount, t) {
  switch (state.status) {
    case AUDIT_STATUS.DOWN:
      return t("FATE_BRIDGE.Audit.Down");
    case AUDIT_STATUS.LOADING:
      return t("FATE_BRIDGE.Audit.Loading");
    case AUDIT_STATUS.INVALID:
      return t(`FATE_BRIDGE.Audit.Invalid.${state.field}`);
    case AUDIT_STATUS.ERROR:
      return t("FATE_BRIDGE.Audit.Failed", { code: String(state.error) });
    case AUDIT_STATUS.READY:
      return rowCount === 0 ? t("FATE_BRIDGE.Audit.Empty") : null;
    default:
      return null;
  }
}

function select(doc, name, options, value) {
  const node = doc.createElement("select");
  node.name = name;
  for (const [optionValue, text] of options) {
    const option = doc.createElement("option");
    option.value = optionValue;
    option.textContent = text;
    node.append(option);
  }
  node.value = options.some(([optionValue]) => optionValue === value) ? value : "";
  return node;
}

function dateInput(doc, name, value) {
  const node = doc.createElement("input");
  node.type = "date";
  node.name = name;
  node.value = value ?? "";
  return node;
}

function labelled(doc, text, control) {
  const label = doc.createElement("label");
  const span = doc.createElement("span");
  span.textContent = text;
  label.append(span, control);
  return label;
}
