/**
 * The audit window's logic, without Foundry and without a DOM: the filter form -> `audit_query`
 * (docs/protocol.md, Audit; bridge/wire/audit.py AuditQuery), an `audit_page` -> row view-models, and
 * the paging state ("Load older" continues from `next_before`). The window (scripts/audit-window.js)
 * only renders what this module decides.
 */

import { PROTOCOL_VERSION } from "./messages.js";
import { failedState } from "./request-failure.js";

/** Message tags of the audit exchange. */
export const AUDIT_MSG = Object.freeze({ QUERY: "audit_query", PAGE: "audit_page" });

/** Limits, with their reasons. */
export const AUDIT_LIMITS = Object.freeze({
  /** Rows per page: a screenful or two; the bridge accepts 1..200 (AuditQuery.limit). */
  PAGE_SIZE: 50,
  /** The bridge's own bound on `limit`. */
  MAX_PAGE_SIZE: 200,
  /** AuditQuery.actor_id is an Id: 1..128 characters. */
  MAX_ID_LENGTH: 128,
});

/**
 * Outcomes the outcome filter offers: the Fate outcomes, `graded` (test_rolled), `settings`, and
 * the refusal codes a decision can record (bridge/audit.py summarize: an error's code).
 */
export const AUDIT_OUTCOMES = Object.freeze([
  "lost",
  "kept",
  "spent",
  "choice",
  "graded",
  "settings",
  "not_eligible",
  "already_fated",
  "no_charges",
  "forbidden",
  "not_found",
  "rate_limited",
  "internal",
]);

/** Pager states the window shows. */
export const AUDIT_STATUS = Object.freeze({
  IDLE: "idle",
  LOADING: "loading",
  READY: "ready",
  /** No bridge link from this browser: nothing was asked. */
  DOWN: "down",
  /** The filters cannot be sent (`field` names the input). */
  INVALID: "invalid",
  /** The bridge refused or did not answer (`error` holds the code). */
  ERROR: "error",
});


/** Placeholder shown for an empty cell. */
export const EMPTY_CELL = "—";

const DATE_INPUT = /^(\d{4})-(\d{2})-(\d{2})$/;

/**
 * The UTC instant at which a local calendar day starts, in the bridge's `ts` format
 * (`YYYY-MM-DDTHH:MM:SS.mmmZ`, which sorts as text).
 *
 * @param {string} dateText an `<input type="date">` value, `YYYY-MM-DD`
 * @param {number} [plusDays] days to add first (1: the start of the next day)
 * @returns {string|null} null when `dateText` is not a real date
 */
export function localDayStartIso(dateText, plusDays = 0) {
  const match = DATE_INPUT.exec(dateText);
  if (!match) return null;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const date = new Date(year, month - 1, day);
  if (date.getFullYear() !== year || date.getMonth() !== month - 1 || date.getDate() !== day) return null;
  date.setDate(date.getDate() + plusDays);
  return date.toISOString();
}

/**
 * Turn the filter form's raw values into `audit_query` filters.
 *
 * @param {{actorId?: string, outcome?: string, since?: string, until?: string}} form input
 *   values; empty strings mean "any"
 * @returns {{ok: true, filters: {actor_id?: string, outcome?: string, since?: string, until?: string}}
 *   | {ok: false, field: "actorId"|"outcome"|"since"|"until"}} `since` is the start of that local
 *   day (inclusive); `until` is the start of the day AFTER it (the bridge's `until` is exclusive,
 *   so the day picked is included); `until` before `since` is refused
 */
export function parseFilters({ actorId = "", outcome = "", since = "", until = "" } = {}) {
  const filters = {};
  if (actorId) {
    if (actorId.length > AUDIT_LIMITS.MAX_ID_LENGTH) return { ok: false, field: "actorId" };
    filters.actor_id = actorId;
  }
  if (outcome) {
    if (!AUDIT_OUTCOMES.includes(outcome)) return { ok: false, field: "outcome" };
    filters.outcome = outcome;
  }
  if (since) {
    const start = localDayStartIso(since);
    if (!start) return { ok: false, field: "since" };
    filters.since = start;
  }
  if (until) {
    const end = localDayStartIso(until, 1);
    if (!end) return { ok: false, field: "until" };
    if (filters.since && end <= filters.since) return { ok: false, field: "until" };
    filters.until = end;
  }
  return { ok: true, filters };
}

/**
 * Build an `audit_query`.
 *
 * @param {object} args
 * @param {string} args.queryId correlates the `audit_page` reply
 * @param {{actor_id?: string, ruleset?: string, outcome?: string, since?: string, until?: string}} [args.filters]
 *   from parseFilters (only the keys present are sent)
 * @param {number|null} [args.beforeSeq] a previous page's `next_before` (older records)
 * @param {number} [args.limit] 1..200
 * @returns {object} the message, ready for JSON.stringify
 * @throws {RangeError} for a limit outside 1..200 or a before_seq below 1
 */
export function buildAuditQuery({ queryId, filters = {}, beforeSeq = null, limit = AUDIT_LIMITS.PAGE_SIZE }) {
  if (!Number.isInteger(limit) || limit < 1 || limit > AUDIT_LIMITS.MAX_PAGE_SIZE) {
    throw new RangeError(`limit ${limit} is not an integer in 1..${AUDIT_LIMITS.MAX_PAGE_SIZE}`);
  }
  const message = { type: AUDIT_MSG.QUERY, v: PROTOCOL_VERSION, query_id: queryId };
  for (const key of ["actor_id", "ruleset", "outcome", "since", "until"]) {
    if (typeof filters[key] === "string" && filters[key]) message[key] = filters[key];
  }
  if (beforeSeq !== null && beforeSeq !== undefined) {
    if (!Number.isInteger(beforeSeq) || beforeSeq < 1) throw new RangeError(`before_seq ${beforeSeq} is not an integer >= 1`);
    message.before_seq = beforeSeq;
  }
  message.limit = limit;
  return message;
}

const pad = (n, width = 2) => String(n).padStart(width, "0");

/**
 * @param {string} ts the bridge's UTC timestamp
 * @returns {string} `YYYY-MM-DD HH:MM:SS` in this browser's time zone; `ts` itself when unreadable
 */
export function formatTime(ts) {
  const date = new Date(ts);
  if (typeof ts !== "string" || Number.isNaN(date.getTime())) return String(ts ?? EMPTY_CELL);
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}:${pad(date.getSeconds())}`;
}

/** A level as its label, or its number when the label is missing; null when neither. */
function levelText(label, level) {
  if (typeof label === "string" && label) return label;
  return Number.isInteger(level) ? String(level) : null;
}

/**
 * @typedef {object} AuditRow one table row; every field is plain text for `textContent`
 * @property {number} seq
 * @property {string} time local time
 * @property {string} ts the bridge's UTC timestamp (tooltip)
 * @property {string} actor
 * @property {string} test
 * @property {string} levels `before -> after` labels, or the one level a grading has
 * @property {string} fateRoll
 * @property {string} point
 * @property {string} outcome localized outcome
 * @property {string} outcomeCode the raw outcome (CSS hook)
 * @property {string} user the user's name when Foundry knows the id, else the id
 * @property {string|null} messageId the ChatMessage to link to, or null
 */

/**
 * Turn audit records into table rows.
 *
 * @param {object[]} records `audit_page.records` (AuditSummary), newest first
 * @param {object} deps
 * @param {(userId: string) => string|null} deps.userName the Foundry user's name, null if unknown
 * @param {(key: string, data?: object) => string} deps.t localize (`format` with data)
 * @returns {AuditRow[]} in the same order
 */
export function auditRows(records, { userName, t }) {
  return records.map((record) => {
    const before = levelText(record.label_before, record.level_before);
    const after = levelText(record.label_after, record.level_after);
    const outcomeKey = `FATE_BRIDGE.Audit.Outcome.${record.outcome}`;
    const outcome = AUDIT_OUTCOMES.includes(record.outcome) ? t(outcomeKey) : String(record.outcome ?? EMPTY_CELL);
    return {
      seq: record.seq,
      time: formatTime(record.ts),
      ts: String(record.ts ?? ""),
      actor: record.actor_name || record.actor_id || EMPTY_CELL,
      test: record.test_name || EMPTY_CELL,
      levels: before && after ? t("FATE_BRIDGE.Audit.LevelChange", { before, after }) : before ?? EMPTY_CELL,
      fateRoll: Number.isInteger(record.fate_roll) ? String(record.fate_roll) : EMPTY_CELL,
      point: record.point_name || EMPTY_CELL,
      outcome,
      outcomeCode: String(record.outcome ?? ""),
      user: record.user_id ? userName(record.user_id) ?? record.user_id : EMPTY_CELL,
      messageId: typeof record.message_id === "string" && record.message_id ? record.message_id : null,
    };
  });
}

/**
 * @typedef {object} AuditState what the window shows; read-only for callers
 * @property {string} status one of AUDIT_STATUS
 * @property {string|null} error the BridgeError code when `status` is `error`
 * @property {string|null} field the refused form field when `status` is `invalid`
 * @property {object} filters the filters of the records shown
 * @property {object[]} records every record loaded so far, newest first
 * @property {number|null} nextBefore `before_seq` for "Load older"; null at the end
 */

/**
 * The paging state of one audit window.
 *
 * Call order: `search(form)` (first page), then `loadOlder()` as long as `state.nextBefore` is
 * not null. A `search` while a query is out makes the older query's answer stale: it is
 * dropped when it arrives. Both methods resolve (never reject) once `state` is settled.
 *
 * @param {object} deps
 * @param {(query: object) => Promise<object>} deps.send sends an `audit_query`, resolves to the
 *   `audit_page` with the same `query_id`, rejects with a BridgeError (`code`)
 * @param {() => boolean} deps.isReady true when the bridge link is up on this browser
 * @param {() => string} deps.newId a fresh query id
 * @param {number} [deps.limit] page size
 * @returns {{state: AuditState, search(form: object): Promise<AuditState>, loadOlder(): Promise<AuditState>}}
 */
export function createAuditPager({ send, isReady, newId, limit = AUDIT_LIMITS.PAGE_SIZE }) {
  const state = { status: AUDIT_STATUS.IDLE, error: null, field: null, filters: {}, records: [], nextBefore: null };
  let currentQuery = null;

  async function load(beforeSeq) {
    if (!isReady()) {
      currentQuery = null;
      Object.assign(state, { status: AUDIT_STATUS.DOWN, error: null, field: null });
      return state;
    }
    const queryId = newId();
    currentQuery = queryId;
    Object.assign(state, { status: AUDIT_STATUS.LOADING, error: null, field: null });
    let page;
    try {
      page = await send(buildAuditQuery({ queryId, filters: state.filters, beforeSeq, limit }));
    } catch (error) {
      if (currentQuery !== queryId) return state;
      Object.assign(state, failedState(error, AUDIT_STATUS));
      return state;
    }
    if (currentQuery !== queryId) return state;
    if (page?.type !== AUDIT_MSG.PAGE || page.query_id !== queryId || !Array.isArray(page.records)) {
      Object.assign(state, { status: AUDIT_STATUS.ERROR, error: "internal" });
      return state;
    }
    state.records = beforeSeq === null ? [...page.records] : [...state.records, ...page.records];
    state.nextBefore = Number.isInteger(page.next_before) ? page.next_before : null;
    state.status = AUDIT_STATUS.READY;
    return state;
  }

  return {
    state,
    async search(form) {
      const parsed = parseFilters(form);
      if (!parsed.ok) {
        currentQuery = null;
        Object.assign(state, { status: AUDIT_STATUS.INVALID, field: parsed.field, error: null });
        return state;
      }
      Object.assign(state, { filters: parsed.filters, records: [], nextBefore: null });
      return load(null);
    },
    async loadOlder() {
      if (state.nextBefore === null || state.status === AUDIT_STATUS.LOADING) return state;
      return load(state.nextBefore);
    },
  };
}
