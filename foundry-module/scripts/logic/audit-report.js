/**
 * The audit window's "Report": the bridge draws the same self-contained HTML page as
 * `fate-bridge audit report` (bridge/report.py) and answers `audit_report_page {query_id, html}`
 * over the live link; the window downloads it as a file (docs/protocol.md, Audit). Pure: no
 * Foundry, no DOM.
 */

import { PROTOCOL_VERSION } from "./messages.js";

/** Message tags of the report exchange. */
export const REPORT_MSG = Object.freeze({ QUERY: "audit_report", PAGE: "audit_report_page" });

/**
 * @param {string} queryId
 * @param {{since?: string}} [filters] the audit window's filters (from parseFilters): the report
 *   starts at `since` when set
 * @returns {object} an `audit_report`
 */
export function buildReportQuery(queryId, filters = {}) {
  const message = { type: REPORT_MSG.QUERY, v: PROTOCOL_VERSION, query_id: queryId };
  if (typeof filters.since === "string" && filters.since) message.since = filters.since;
  return message;
}

/**
 * @param {object} reply what the bridge answered
 * @param {string} queryId the query's id
 * @returns {string|null} the page's HTML, or null when `reply` is not its `audit_report_page`
 */
export function reportHtml(reply, queryId) {
  if (reply?.type !== REPORT_MSG.PAGE || reply.query_id !== queryId || typeof reply.html !== "string") return null;
  return reply.html;
}

/**
 * @param {string} worldId
 * @returns {string} the downloaded file's name
 */
export function reportFilename(worldId) {
  return `fate-bridge-report-${worldId}.html`;
}
