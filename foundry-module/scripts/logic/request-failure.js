/**
 * What a GM window (the audit pager, the receipts checker) shows after a request to the bridge
 * failed: the link is gone (`down`: nothing more to ask until it is back) or the bridge refused
 * or did not answer (`error`, with the code).
 */

/** BridgeError codes meaning the link is gone rather than the request refused. */
const DOWN_CODES = Object.freeze(["closed", "unauthorized", "bridge_down"]);

/**
 * @param {unknown} error what the request rejected with (a BridgeError carries `code`)
 * @param {{DOWN: string, ERROR: string}} statuses the window's status values
 * @returns {{status: string, error: string}} the state's new `status` and `error` (the code;
 *   "internal" when the failure carries none)
 */
export function failedState(error, statuses) {
  const code = typeof error?.code === "string" ? error.code : "internal";
  return { status: DOWN_CODES.includes(code) ? statuses.DOWN : statuses.ERROR, error: code };
}
