/**
 * Unsolicited bridge frames (those answering no pending request, e.g. a ruleset's notice such as
 * a future `reshuffle`, or a reply that came after its request timed out), routed by `type` to
 * the listeners that asked for it. The connection hands them over through its `onUnsolicited`.
 */

/**
 * @param {object} deps
 * @param {(error: unknown, type: string) => void} deps.onError a listener threw; the others still run
 * @returns {{on(type: string, listener: (message: object) => void): void, dispatch(message: unknown): void}}
 *   `on` adds a listener for frames of that `type` (TypeError for an empty type or a listener
 *   that is not a function); `dispatch` calls, in registration order, every listener of the
 *   frame's `type` and ignores frames without one
 */
export function createBridgeRouter({ onError }) {
  /** @type {Map<string, Array<(message: object) => void>>} */
  const listeners = new Map();
  return {
    on(type, listener) {
      if (typeof type !== "string" || !type) throw new TypeError(`a bridge message type is a non-empty string, got ${JSON.stringify(type)}`);
      if (typeof listener !== "function") throw new TypeError(`the listener for bridge message ${type} is not a function`);
      if (!listeners.has(type)) listeners.set(type, []);
      listeners.get(type).push(listener);
    },
    dispatch(message) {
      if (!message || typeof message !== "object" || typeof message.type !== "string") return;
      for (const listener of listeners.get(message.type) ?? []) {
        try {
          listener(message);
        } catch (error) {
          onError(error, message.type);
        }
      }
    },
  };
}
