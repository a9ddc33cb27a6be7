/**
 * The audit window's content as DOM: filters, a status line, the table, "Load older". Pure DOM
 * work on a given Document (like card-ui.js); every outside string goes in through
 * `textContent` or `value`, never as HTML. Listeners call the callbacks the window passes.
 */

import { AUDIT_OUTCOMES, AUDIT_STATUS } from "./audit.js";

/** Class of the window's root element and prefix of its parts. */
export const AUDIT_CLASS = "fate-bridge-audit";

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
 * @param {(key: string, data?: object) => string} t localize
 * @param {object} handlers
 * @param {(form: {actorId: string, outcome: string, since: string, until: string}) => void} handlers.onSearch
 * @param {() => void} handlers.onOlder
 * @param {(messageId: string) => void} handlers.onShowMessage
 * @returns {HTMLElement} the content root (`div.fate-bridge-audit-body`)
 */
export function renderAudit(doc, { state, rows, form, actors }, t, { onSearch, onOlder, onShowMessage }) {
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
