/**
 * The module's one error type: a refusal or failure with a code, shared by the bridge link
 * (logic/connection.js), the relay (logic/relay.js), the ruleset api and every ruleset.
 */

/**
 * A bridge `error` reply, a relay refusal or a module failure, named by its code.
 *
 * Codes: the contract's error codes (docs/protocol.md: `not_eligible`, `already_fated`, `forbidden`,
 * ...) and the module's own (`timeout`, `queue_full`, `closed`, `bridge_down`, `not_active_gm`,
 * the relay's `no_gm`, `gm_no_answer`, ...).
 */
export class BridgeError extends Error {
  /**
   * @param {string} code contract error code or a module code (`timeout`, `queue_full`, `closed`)
   * @param {string} message human-readable detail (English, for logs)
   * @param {{field?: string|null, ref?: string|null}} [extra]
   */
  constructor(code, message, { field = null, ref = null } = {}) {
    super(message);
    this.name = "BridgeError";
    this.code = code;
    this.field = field;
    this.ref = ref;
  }
}
