/**
 * Registering this world with a shared bridge through an invite code (docs/protocol.md,
 * Registration): the GM has no terminal on the bridge's machine, so the module asks the bridge
 * for the world's token itself. One WebSocket per try: `register` is its first and only frame,
 * the bridge answers once and closes.
 *
 * - `registered`: the token, handed to `onToken` once; nothing more is sent.
 * - `registration_pending`: the host approves each request by hand; `onWaiting` is told, and the
 *   same `register` (same `request_secret`: only the browser holding it collects the token) goes
 *   again after the bridge's `retry_seconds`, until approved or denied.
 * - `error`: `rate_limited` is tried again after LIMITS.RATE_RETRY_MS; any other refusal (a bad,
 *   revoked, expired or used-up code; a world the bridge knows) goes to `onRefused` and stops.
 * - a socket closed before any answer (bridge down, wrong address): tried again after a backoff
 *   (LIMITS.BACKOFF_MIN_MS, doubled, at most LIMITS.BACKOFF_MAX_MS), `onUnreachable` told once.
 *
 * No Foundry globals: the WebSocket class, the timers and the random source are injected.
 */

/** Message tags of the registration, both directions. */
export const REGISTER_MSG = Object.freeze({
  REGISTER: "register",
  REGISTERED: "registered",
  PENDING: "registration_pending",
  ERROR: "error",
});

/** Limits, with their reasons. */
export const LIMITS = Object.freeze({
  /** No answer: the bridge is down or the address is wrong; the GM may fix it meanwhile. */
  BACKOFF_MIN_MS: 2_000,
  BACKOFF_MAX_MS: 60_000,
  /** The bridge's registration rate is a few a minute per address: ask again in a minute. */
  RATE_RETRY_MS: 60_000,
});

/** Bytes of a request secret: 256 bits, well over the bridge's 128-bit minimum. */
const SECRET_BYTES = 32;

/**
 * A fresh request secret: 32 random bytes as base64url text (43 characters).
 *
 * @param {(bytes: Uint8Array) => Uint8Array} randomValues crypto.getRandomValues
 * @returns {string}
 */
export function newRequestSecret(randomValues) {
  const bytes = randomValues(new Uint8Array(SECRET_BYTES));
  let binary = "";
  for (const byte of bytes) binary += String.fromCharCode(byte);
  return btoa(binary).replaceAll("+", "-").replaceAll("/", "_").replace(/=+$/, "");
}

/**
 * The `register` message (wire protocol v1).
 *
 * @param {{worldId: string, inviteCode: string, requestSecret: string, client: object}} p
 * @returns {object}
 */
export function registerMessage({ worldId, inviteCode, requestSecret, client }) {
  return { type: REGISTER_MSG.REGISTER, v: 1, world_id: worldId, invite_code: inviteCode.trim(), request_secret: requestSecret, client };
}

/**
 * Start registering; tries until the bridge gives the token or refuses, or `stop()`.
 *
 * @param {object} options
 * @param {string} options.url the bridge's ws:// or wss:// address
 * @param {() => object} options.message builds the `register` message (registerMessage)
 * @param {new (url: string) => WebSocket} options.WebSocket
 * @param {{setTimeout: Function, clearTimeout: Function}} options.timers
 * @param {(token: string) => void} options.onToken the world's token (once)
 * @param {(retrySeconds: number) => void} [options.onWaiting] each `registration_pending`
 * @param {(refusal: {code: string, message: string}) => void} [options.onRefused] a refusal; stopped
 * @param {() => void} [options.onUnreachable] the first try that got no answer
 * @returns {{stop: () => void}} stops trying (idempotent; a socket open is closed)
 */
export function startRegistration({ url, message, WebSocket, timers, onToken, onWaiting = () => {}, onRefused = () => {}, onUnreachable = () => {} }) {
  let stopped = false;
  let socket = null;
  let timer = null;
  let backoff = LIMITS.BACKOFF_MIN_MS;
  let toldUnreachable = false;

  const later = (ms) => {
    timer = timers.setTimeout(() => {
      timer = null;
      attempt();
    }, ms);
  };

  function answered(reply) {
    backoff = LIMITS.BACKOFF_MIN_MS;
    if (reply.type === REGISTER_MSG.REGISTERED && typeof reply.token === "string" && reply.token) {
      stopped = true;
      onToken(reply.token);
    } else if (reply.type === REGISTER_MSG.PENDING) {
      onWaiting(reply.retry_seconds);
      later(Math.max(1, Number(reply.retry_seconds) || 30) * 1000);
    } else if (reply.type === REGISTER_MSG.ERROR && reply.code === "rate_limited") {
      later(LIMITS.RATE_RETRY_MS);
    } else {
      stopped = true;
      onRefused({ code: String(reply.code ?? "bad_message"), message: String(reply.message ?? "") });
    }
  }

  function attempt() {
    if (stopped) return;
    let replied = false;
    const ws = (socket = new WebSocket(url));
    ws.onopen = () => ws.send(JSON.stringify(message()));
    ws.onmessage = (event) => {
      if (replied || stopped) return;
      replied = true;
      let reply;
      try {
        reply = JSON.parse(event.data);
      } catch {
        reply = { type: REGISTER_MSG.ERROR, code: "bad_message", message: "the bridge's answer is not JSON" };
      }
      answered(reply);
    };
    ws.onerror = () => {};
    ws.onclose = () => {
      if (socket === ws) socket = null;
      if (replied || stopped) return;
      if (!toldUnreachable) {
        toldUnreachable = true;
        onUnreachable();
      }
      later(backoff);
      backoff = Math.min(backoff * 2, LIMITS.BACKOFF_MAX_MS);
    };
  }

  attempt();
  return {
    stop() {
      stopped = true;
      if (timer !== null) timers.clearTimeout(timer);
      timer = null;
      socket?.close(1000, "registration stopped");
      socket = null;
    },
  };
}
