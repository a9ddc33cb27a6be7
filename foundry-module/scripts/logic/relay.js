/**
 * A player's clicks relayed to the active GM's browser over the module socket, and the deadlines
 * on them. The GM's browser may be closed or hung; the player must not wait forever, and "nothing
 * was spent" must stay true once the player has been told so.
 *
 * Exchange (payloads on `module.fate-bridge`, see main.js SOCKET_TYPES):
 * 1. player -> all: `spend` / `choice` with a fresh `request_id`;
 * 2. active GM -> player: `ack {to, request_id}` as soon as the click arrives; the GM holds the
 *    click and does nothing with it yet;
 * 3. player -> all: `go {request_id}`, only if the ack came before the player's deadline;
 * 4. active GM: on `go` from the same sender, runs the click; then `done {to, request_id, ok}`
 *    (`ok: false` after a refusal and its notice). A held click with no `go` is dropped.
 * A GM browser that wakes up after the player's deadline acks, gets no `go`, and drops the click:
 * nothing reaches the bridge.
 *
 * Guarantees (player side): each tracked click ends exactly once, through `onNoAnswer` (no ack in
 * time), `onUnfinished` (acked, no `done` in time), `release` after `done {ok: false}`, or
 * quietly after `done {ok: true}` (the card re-renders without the button). Unknown or late ids
 * are ignored. No Foundry globals: timers and ids are injected.
 */

/** Deadlines, with their reasons. */
export const RELAY_LIMITS = Object.freeze({
  /** The GM's browser acks before doing anything; 20 s covers a slow network and a busy tab. */
  ACK_TIMEOUT_MS: 20_000,
  /**
   * After the ack: re-grade (request timeout 15 s) + spend (15 s) + Dice So Nice's animation,
   * with margin. Past this the player may click again; the bridge still refuses a second Fate.
   */
  DONE_TIMEOUT_MS: 60_000,
  /**
   * The GM holds an acked click this long for its `go`. The player sends `go` as soon as the ack
   * arrives (one socket round trip), so this only bounds clicks whose player gave up.
   */
  GO_TIMEOUT_MS: 20_000,
  /** Clicks the GM holds at once; a burst beyond this drops the oldest. */
  MAX_HELD: 200,
});

/**
 * The player's side: start a deadline per relayed click.
 *
 * @param {object} deps
 * @param {{setTimeout: Function, clearTimeout: Function}} deps.timers
 * @param {() => string} deps.newId a fresh request id
 * @param {Partial<typeof RELAY_LIMITS>} [deps.limits] overrides (tests)
 * @returns {{
 *   start(handlers: {onNoAnswer: (requestId: string) => void, onUnfinished: () => void, release: () => void}): string,
 *   ack(requestId: unknown): boolean,
 *   done(requestId: unknown, ok: boolean): boolean,
 *   pending(): number,
 *   clear(): void,
 * }} `start` returns the request id to send; `ack` returns true when the id was waiting for
 *   its ack (the caller then sends `go`), false for an unknown, late or repeated ack (send
 *   nothing); `done` returns true when the id was pending; `clear` drops every deadline without
 *   calling anything (module shutdown)
 */
export function createRelayTracker({ timers, newId, limits = {} }) {
  const limit = { ...RELAY_LIMITS, ...limits };
  /** @type {Map<string, {handlers: object, timer: any, acked: boolean}>} */
  const open = new Map();

  function finish(requestId) {
    const entry = open.get(requestId);
    if (!entry) return null;
    timers.clearTimeout(entry.timer);
    open.delete(requestId);
    return entry;
  }

  return {
    start(handlers) {
      const requestId = newId();
      const timer = timers.setTimeout(() => {
        if (finish(requestId)) {
          handlers.onNoAnswer(requestId);
          handlers.release();
        }
      }, limit.ACK_TIMEOUT_MS);
      open.set(requestId, { handlers, timer, acked: false });
      return requestId;
    },
    ack(requestId) {
      const entry = open.get(requestId);
      if (!entry || entry.acked) return false;
      timers.clearTimeout(entry.timer);
      entry.acked = true;
      entry.timer = timers.setTimeout(() => {
        if (finish(requestId)) {
          entry.handlers.onUnfinished();
          entry.handlers.release();
        }
      }, limit.DONE_TIMEOUT_MS);
      return true;
    },
    done(requestId, ok) {
      const entry = finish(requestId);
      if (!entry) return false;
      if (!ok) entry.handlers.release();
      return true;
    },
    pending: () => open.size,
    clear() {
      for (const entry of open.values()) timers.clearTimeout(entry.timer);
      open.clear();
    },
  };
}

/**
 * The GM's side: clicks acked and waiting for their `go`.
 *
 * @param {object} deps
 * @param {{setTimeout: Function, clearTimeout: Function}} deps.timers
 * @param {Partial<typeof RELAY_LIMITS>} [deps.limits] overrides (tests)
 * @returns {{hold(key: string, run: () => void): void, go(key: string): boolean, clear(): void}}
 *   `hold` keeps `run` for GO_TIMEOUT_MS (then drops it silently; a repeated key replaces the
 *   older click); `go` runs and forgets it, false when nothing is held under `key` (expired or
 *   never acked); at most MAX_HELD clicks are held, the oldest dropped first
 */
export function createRelayInbox({ timers, limits = {} }) {
  const limit = { ...RELAY_LIMITS, ...limits };
  /** @type {Map<string, {run: () => void, timer: any}>} */
  const held = new Map();
  const drop = (key) => {
    const entry = held.get(key);
    if (entry) timers.clearTimeout(entry.timer);
    held.delete(key);
    return entry;
  };
  return {
    hold(key, run) {
      drop(key);
      held.set(key, { run, timer: timers.setTimeout(() => held.delete(key), limit.GO_TIMEOUT_MS) });
      while (held.size > limit.MAX_HELD) drop(held.keys().next().value);
    },
    go(key) {
      const entry = drop(key);
      if (!entry) return false;
      entry.run();
      return true;
    },
    clear() {
      for (const key of [...held.keys()]) drop(key);
    },
  };
}

/** Longest request id accepted from the socket (ours are 16 characters). */
export const MAX_REQUEST_ID_LENGTH = 64;

/**
 * @param {unknown} value a socket payload's `request_id`
 * @returns {boolean} true for a usable id
 */
export function isRequestId(value) {
  return typeof value === "string" && value.length > 0 && value.length <= MAX_REQUEST_ID_LENGTH;
}
