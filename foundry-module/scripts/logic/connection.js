/**
 * The bridge client: one WebSocket to the bridge, owned by the active GM's client.
 *
 * Call order: `new BridgeConnection(options)`, `start()`, then `request(message)` as often as
 * needed, `stop()` once. Guarantees:
 * - `hello` is the first frame on every socket; nothing else is sent before `welcome`.
 * - a request is a message with `event_id` (or, for `audit_query`, `query_id`); its promise
 *   settles exactly once: with the bridge's reply carrying that `event_id` (or `ref`, or
 *   `query_id`), or rejected with a BridgeError (the bridge's `error`, or `timeout`,
 *   `queue_full`, `closed`, `unauthorized`, `superseded`).
 * - requests made while the link is down wait in a queue (at most MAX_QUEUED; beyond that a
 *   request is rejected `queue_full` and reported through `onRefused`) and are sent once, in the
 *   order they were made, after the next `welcome`; requests in flight when the link drops go back
 *   to the queue and are sent again with the same `event_id` (the bridge answers a repeated
 *   `event_id` with its stored reply and does nothing twice).
 * - a request's timeout (REQUEST_TIMEOUT_MS) runs only while it is sent on a live link: it starts
 *   when the request is sent and stops when the link drops, so an outage of any length times
 *   nothing out; waiting in the queue is not waiting for an answer.
 * - a request whose JSON is larger than the bridge's frame limit (`welcome.max_frame_bytes`, the
 *   last one heard) is rejected `too_large` and reported through `onRefused`, never sent: the
 *   bridge would close the link (1009) and a resend would loop. Should the bridge close with 1009
 *   anyway (a bridge that does not tell its limit), the largest request in flight is rejected
 *   `too_large` so it is not sent again.
 * - a request the bridge answers `rate_limited` (not handled) is sent again, with the same
 *   `event_id`, after RATE_RETRY_MS, doubled per retry, at most RATE_RETRIES times; then (or at
 *   the request timeout, whichever comes first) it is rejected with `rate_limited` / `timeout`.
 * - a request the bridge answers `unavailable` (its storage is down: nothing was applied) waits as in
 *   an outage, its timeout stopped, and is sent again with the same `event_id` after the reply's
 *   `retry_after_ms` (bounded to UNAVAILABLE_RETRY_MAX_MS; UNAVAILABLE_RETRY_MS without one), as
 *   often as it takes: the click stays queued until the bridge can store it, never shown as failed.
 * - error replies are matched by `ref` against pending `event_id`s and `query_id`s alike.
 * - close code 1012 (service restart: the bridge process is draining, its load balancer sends the
 *   next connection to another process) on a link that had its `welcome` reconnects at once, after
 *   a random 0..RESTART_JITTER_MS, not after the backoff; any other close, or a 1012 before
 *   `welcome`, waits the backoff.
 * - close code 4001 (bad token) and 4003 (superseded: another browser holds the world's link)
 *   stop reconnecting for good; pending and later requests are rejected with `unauthorized` /
 *   `superseded`. Only a new BridgeConnection (new role or settings) connects again. A 4001 on an
 *   open link says why in its close reason (the token was changed, the world removed:
 *   bridge/link_guard.py); the status carries it as `said`.
 * No Foundry globals: the WebSocket constructor and the timer functions are injected.
 */

import { BridgeError } from "./errors.js";

/** BridgeError lives in logic/errors.js; re-exported for existing importers. */
export { BridgeError };

/** Close code the bridge uses for a bad or missing token. */
export const CLOSE_UNAUTHORIZED = 4001;
/**
 * Close code the bridge uses when another connection for the same world took over; its close
 * reason is "superseded by NAME (Foundry VERSION)". Reconnecting would take the link back and the
 * two browsers would fight, so this client stops.
 */
export const CLOSE_SUPERSEDED = 4003;
/** Close code we use when we drop a silent link ourselves (application range). */
export const CLOSE_NO_PONG = 4000;
/**
 * Close code (RFC 6455 registry: Service Restart) of a bridge process draining on SIGTERM:
 * every decision in flight was answered; reconnect now, and the load balancer (or the
 * kernel, with --reuse-port) hands the link to another process.
 */
export const CLOSE_SERVICE_RESTART = 1012;

/** Limits, with their reasons. */
export const LIMITS = Object.freeze({
  /** protocol.md: the module sends one `ping` every 20 s. */
  HEARTBEAT_MS: 20_000,
  /** A `pong` later than this means the link is dead even if TCP has not noticed. */
  PONG_TIMEOUT_MS: 10_000,
  /** The bridge closes with 4002 when `hello` is late; we give `welcome` as long. */
  WELCOME_TIMEOUT_MS: 10_000,
  /** Reconnect backoff: 1 s, doubled each failure, capped at 30 s. */
  BACKOFF_MIN_MS: 1_000,
  BACKOFF_MAX_MS: 30_000,
  /**
   * After 1012 (a draining process): reconnect after a random 0..500 ms, so the few hundred links
   * of one process reach the others spread over half a second, not in one burst; still well
   * inside the failover target: 2 s from the close to the next decision.
   */
  RESTART_JITTER_MS: 500,
  /** A request sent on a live link gives up after this (time in the queue does not count). */
  REQUEST_TIMEOUT_MS: 15_000,
  /**
   * Requests held while down: a 30 s outage at a busy table is a few dozen tests and clicks; a
   * burst beyond this is refused (and reported to the GM), not hoarded.
   */
  MAX_QUEUED: 100,
  /**
   * `rate_limited`: first retry after 0.5 s, doubled per retry. The bridge refills 20 frames a
   * second, so half a second frees room for ten; four retries (7.5 s in all) fit in the request
   * timeout.
   */
  RATE_RETRY_MS: 500,
  RATE_RETRIES: 4,
  /**
   * `unavailable` (the bridge's storage is down): sent again after the reply's
   * `retry_after_ms` (the bridge says 500 ms: it probes its storage every 250 ms, so service
   * returns within a second of storage), or after this when the reply has none; never sooner than
   * UNAVAILABLE_RETRY_MIN_MS nor later than UNAVAILABLE_RETRY_MAX_MS, whatever the reply says.
   */
  UNAVAILABLE_RETRY_MS: 1_000,
  UNAVAILABLE_RETRY_MIN_MS: 100,
  UNAVAILABLE_RETRY_MAX_MS: 30_000,
});

/** Connection states shown to the GM. */
export const STATE = Object.freeze({ CONNECTING: "connecting", CONNECTED: "connected", DOWN: "down" });

/** Reasons a link is down (status `reason`), also BridgeError codes of the module's own making. */
export const DOWN_REASONS = Object.freeze({
  UNAUTHORIZED: "unauthorized",
  SUPERSEDED: "superseded",
  CLOSED: "closed",
  NO_PONG: "no_pong",
  NO_WELCOME: "no_welcome",
  /** The socket closed before it ever opened: nothing answered at the URL (or the browser refused it). */
  UNREACHABLE: "unreachable",
  ERROR: "socket_error",
  STOPPED: "stopped",
});

/** WebSocket close code for a frame larger than the peer accepts (RFC 6455). */
export const CLOSE_TOO_BIG = 1009;

/** BridgeError codes of requests this client refuses itself (reported through `onRefused`). */
export const REFUSED = Object.freeze({ QUEUE_FULL: "queue_full", TOO_LARGE: "too_large" });

export class BridgeConnection {
  /**
   * @param {object} options
   * @param {string} options.url ws:// or wss:// address of the bridge
   * @param {() => object} options.hello builds the `hello` message (called per connection)
   * @param {() => object} options.ping builds a `ping` message
   * @param {new (url: string) => WebSocket} options.WebSocket a WHATWG-style WebSocket class
   *   (`onopen`, `onmessage`, `onclose`, `onerror`, `send`, `close`, `readyState`)
   * @param {{setTimeout: Function, clearTimeout: Function}} options.timers
   * @param {(status: ConnectionStatus) => void} [options.onStatus] after every state change
   * @param {(welcome: object) => void} [options.onWelcome] after each `welcome`
   * @param {(message: object) => void} [options.onUnsolicited] bridge messages answering no pending request
   * @param {(refusal: {code: string, type: string, bytes: number|null, limit: number|null}) => void} [options.onRefused]
   *   a request this client refused itself: `queue_full` (`limit` = MAX_QUEUED) or `too_large`
   *   (`bytes` its JSON size in UTF-8 bytes, `limit` the bridge's frame limit, null when the
   *   bridge never told it and closed with 1009); `type` is the request's message type
   * @param {Partial<typeof LIMITS>} [options.limits] overrides (tests)
   * @param {() => number} [options.random] a number in [0, 1) for the reconnect jitter after 1012
   *   (default Math.random; tests fix it)
   */
  constructor({ url, hello, ping, WebSocket, timers, onStatus = () => {}, onWelcome = () => {}, onUnsolicited = () => {}, onRefused = () => {}, limits = {}, random = Math.random }) {
    this.url = url;
    this.makeHello = hello;
    this.makePing = ping;
    this.WebSocket = WebSocket;
    this.timers = timers;
    this.onStatus = onStatus;
    this.onWelcome = onWelcome;
    this.onUnsolicited = onUnsolicited;
    this.onRefused = onRefused;
    this.random = random;
    /** The bridge's frame limit from the last `welcome` (bytes); null until one told it. */
    this.maxFrameBytes = null;
    this.limits = { ...LIMITS, ...limits };
    /**
     * In the order the requests were made (a Map keeps insertion order): the queue is sent in it.
     * `timer` (the request timeout) is set only while the request is sent on a live link.
     * @type {Map<string, {message: object, text: string, bytes: number, resolve: Function, reject: Function,
     *   timer: any, sent: boolean, retries: number, retryTimer: any}>}
     */
    this.pending = new Map();
    this.socket = null;
    this.welcomed = false;
    this.stopped = true;
    this.failures = 0;
    this.reconnectTimer = null;
    this.heartbeatTimer = null;
    this.pongTimer = null;
    this.welcomeTimer = null;
    /** @type {ConnectionStatus} */
    this.status = { state: STATE.DOWN, reason: DOWN_REASONS.STOPPED, retryInMs: null, holder: null, said: null };
  }

  /** Open the link (idempotent while running). */
  start() {
    if (!this.stopped) return;
    this.stopped = false;
    this.failures = 0;
    this.#connect();
  }

  /** Close the link for good and reject every pending request with `closed`. Idempotent. */
  stop() {
    this.stopped = true;
    this.#clearTimer("reconnectTimer");
    this.#drop(1000, "module stopped");
    this.#rejectAll(DOWN_REASONS.CLOSED, "the bridge connection was stopped");
    this.#setStatus(STATE.DOWN, DOWN_REASONS.STOPPED, null);
  }

  /** @returns {boolean} true when `welcome` has arrived and the link is up */
  isReady() {
    return this.welcomed;
  }

  /**
   * @returns {boolean} true once the link is stopped for good (`stop()`, token refused,
   *   superseded): requests are refused then. While it is merely down (reconnecting) this is
   *   false and requests wait in the queue.
   */
  isStopped() {
    return this.stopped;
  }

  /**
   * Send a message that carries `event_id` (or `query_id`: `audit_query`) and wait for its reply.
   *
   * @param {{event_id?: string, query_id?: string}} message
   * @returns {Promise<object>} the reply whose `event_id`, `ref` or `query_id` equals the message's
   * @throws {BridgeError} (as a rejection) on the bridge's `error`, `timeout` (no answer within
   *   REQUEST_TIMEOUT_MS of being sent), `queue_full`, `too_large`, `rate_limited` (still limited
   *   after RATE_RETRIES), or, once the link stopped for good, `closed`, `unauthorized` or
   *   `superseded`
   */
  request(message) {
    const id = requestKey(message);
    if (!id) return Promise.reject(new TypeError("a request needs an event_id or a query_id"));
    if (this.pending.has(id)) return Promise.reject(new TypeError(`event_id ${id} is already pending`));
    if (this.stopped) return Promise.reject(this.#stoppedError());
    const text = JSON.stringify(message);
    const bytes = utf8Length(text);
    if (this.maxFrameBytes !== null && bytes > this.maxFrameBytes) return Promise.reject(this.#refuse(REFUSED.TOO_LARGE, message.type, bytes));
    const queued = [...this.pending.values()].filter((entry) => !entry.sent).length;
    if (!this.welcomed && queued >= this.limits.MAX_QUEUED) return Promise.reject(this.#refuse(REFUSED.QUEUE_FULL, message.type, bytes));
    return new Promise((resolve, reject) => {
      const entry = { message, text, bytes, resolve, reject, timer: null, sent: false, retries: 0, retryTimer: null };
      this.pending.set(id, entry);
      if (this.welcomed) this.#sendEntry(id, entry);
    });
  }

  /** A request refused here: report it, and return its BridgeError. */
  #refuse(code, type, bytes) {
    const limit = code === REFUSED.TOO_LARGE ? this.maxFrameBytes : this.limits.MAX_QUEUED;
    this.onRefused({ code, type, bytes: code === REFUSED.TOO_LARGE ? bytes : null, limit });
    return code === REFUSED.TOO_LARGE
      ? new BridgeError(code, `${type} is ${bytes} bytes; the bridge accepts frames of at most ${limit} bytes, so it was not sent`)
      : new BridgeError(code, `${limit} requests already wait for the bridge; this ${type} was not kept`);
  }

  #connect() {
    this.welcomed = false;
    this.#setStatus(STATE.CONNECTING, null, null);
    let socket;
    try {
      socket = new this.WebSocket(this.url);
    } catch {
      this.#lost(DOWN_REASONS.ERROR);
      return;
    }
    this.socket = socket;
    let opened = false;
    socket.onopen = () => {
      opened = true;
      this.#send(this.makeHello());
      this.welcomeTimer = this.timers.setTimeout(() => this.#drop(CLOSE_NO_PONG, "no welcome", DOWN_REASONS.NO_WELCOME), this.limits.WELCOME_TIMEOUT_MS);
    };
    socket.onmessage = (event) => this.#receive(event.data);
    socket.onerror = () => {};
    socket.onclose = (event) => {
      if (this.socket !== socket) return;
      this.socket = null;
      if (event.code === CLOSE_UNAUTHORIZED) this.#lost(DOWN_REASONS.UNAUTHORIZED, null, false, refusedBecause(event.reason));
      else if (event.code === CLOSE_SUPERSEDED) this.#lost(DOWN_REASONS.SUPERSEDED, supersededBy(event.reason));
      else {
        if (event.code === CLOSE_TOO_BIG) this.#dropLargestInFlight();
        // a welcomed link only: a process refusing links as it drains cannot loop us without backoff
        const restart = event.code === CLOSE_SERVICE_RESTART && this.welcomed;
        this.#lost(opened ? DOWN_REASONS.CLOSED : DOWN_REASONS.UNREACHABLE, null, restart);
      }
    };
  }

  #receive(data) {
    let message;
    try {
      message = JSON.parse(typeof data === "string" ? data : String(data));
    } catch {
      return;
    }
    if (!message || typeof message !== "object") return;
    if (message.type === "welcome") {
      this.#clearTimer("welcomeTimer");
      this.welcomed = true;
      this.failures = 0;
      if (Number.isSafeInteger(message.max_frame_bytes) && message.max_frame_bytes > 0) this.maxFrameBytes = message.max_frame_bytes;
      this.#setStatus(STATE.CONNECTED, null, null);
      this.onWelcome(message);
      for (const [id, entry] of [...this.pending]) if (!entry.sent && entry.retryTimer === null) this.#sendEntry(id, entry);
      this.#scheduleHeartbeat();
      return;
    }
    if (message.type === "pong") {
      this.#clearTimer("pongTimer");
      return;
    }
    const key = requestKey(message) ?? message.ref;
    const entry = key ? this.pending.get(key) : undefined;
    if (!entry) {
      this.onUnsolicited(message);
      return;
    }
    if (message.type === "error" && message.code === RATE_LIMITED && entry.retries < this.limits.RATE_RETRIES) {
      this.#retryLater(entry);
      return;
    }
    if (message.type === "error" && message.code === UNAVAILABLE) {
      this.#waitForStorage(entry, message.retry_after_ms);
      return;
    }
    this.#settle(key);
    if (message.type === "error") entry.reject(new BridgeError(message.code, message.message, message));
    else entry.resolve(message);
  }

  /** The bridge did not handle the request (rate limit): send it again, same `event_id`, after a backoff. */
  #retryLater(entry) {
    const delay = this.limits.RATE_RETRY_MS * 2 ** entry.retries;
    entry.retries += 1;
    entry.sent = false;
    entry.retryTimer = this.timers.setTimeout(() => {
      entry.retryTimer = null;
      if (this.welcomed) this.#sendEntry(requestKey(entry.message), entry);
    }, delay);
  }

  /**
   * The bridge could not store the request (`unavailable`): nothing was applied. It waits as in an
   * outage (its timeout stopped: waiting for storage is not waiting for an answer) and is sent
   * again, same `event_id`, after `hint` ms (the reply's `retry_after_ms`, bounded).
   */
  #waitForStorage(entry, hint) {
    const { UNAVAILABLE_RETRY_MS, UNAVAILABLE_RETRY_MIN_MS, UNAVAILABLE_RETRY_MAX_MS } = this.limits;
    const delay = Number.isSafeInteger(hint) ? Math.min(UNAVAILABLE_RETRY_MAX_MS, Math.max(UNAVAILABLE_RETRY_MIN_MS, hint)) : UNAVAILABLE_RETRY_MS;
    entry.sent = false;
    if (entry.timer !== null) this.timers.clearTimeout(entry.timer);
    entry.timer = null;
    entry.retryTimer = this.timers.setTimeout(() => {
      entry.retryTimer = null;
      if (this.welcomed) this.#sendEntry(requestKey(entry.message), entry);
    }, delay);
  }

  /** Forget a pending request and its timers (it is about to be resolved or rejected). */
  #settle(id) {
    const entry = this.pending.get(id);
    this.pending.delete(id);
    if (entry.timer !== null) this.timers.clearTimeout(entry.timer);
    if (entry.retryTimer !== null) this.timers.clearTimeout(entry.retryTimer);
  }

  #scheduleHeartbeat() {
    this.#clearTimer("heartbeatTimer");
    this.heartbeatTimer = this.timers.setTimeout(() => {
      this.heartbeatTimer = null;
      if (!this.welcomed) return;
      this.#send(this.makePing());
      this.pongTimer = this.timers.setTimeout(() => this.#drop(CLOSE_NO_PONG, "no pong", DOWN_REASONS.NO_PONG), this.limits.PONG_TIMEOUT_MS);
      this.#scheduleHeartbeat();
    }, this.limits.HEARTBEAT_MS);
  }

  /**
   * Send a pending request, refusing it when it exceeds the frame limit heard in `welcome`; its
   * timeout starts with its first send on this link (a rate-limit retry keeps the running one).
   */
  #sendEntry(id, entry) {
    if (entry.retryTimer !== null) this.timers.clearTimeout(entry.retryTimer);
    entry.retryTimer = null;
    if (this.maxFrameBytes !== null && entry.bytes > this.maxFrameBytes) {
      this.#settle(id);
      entry.reject(this.#refuse(REFUSED.TOO_LARGE, entry.message.type, entry.bytes));
      return;
    }
    entry.sent = this.#sendText(entry.text);
    if (entry.sent && entry.timer === null) {
      entry.timer = this.timers.setTimeout(() => {
        this.#settle(id);
        entry.reject(new BridgeError("timeout", `no answer to ${entry.message.type} ${id} within ${this.limits.REQUEST_TIMEOUT_MS} ms of sending it`));
      }, this.limits.REQUEST_TIMEOUT_MS);
    }
  }

  /** The bridge closed with 1009: the largest request in flight caused it; it is not sent again. */
  #dropLargestInFlight() {
    let largest = null;
    for (const [id, entry] of this.pending) if (entry.sent && (!largest || entry.bytes > largest[1].bytes)) largest = [id, entry];
    if (!largest) return;
    const [id, entry] = largest;
    this.#settle(id);
    this.onRefused({ code: REFUSED.TOO_LARGE, type: entry.message.type, bytes: entry.bytes, limit: this.maxFrameBytes });
    entry.reject(new BridgeError(REFUSED.TOO_LARGE, `the bridge closed the link (1009, frame too big) after ${entry.message.type} of ${entry.bytes} bytes; it was not sent again`));
  }

  #send(message) {
    return this.#sendText(JSON.stringify(message));
  }

  #sendText(text) {
    if (!this.socket || this.socket.readyState !== 1) return false;
    this.socket.send(text);
    return true;
  }

  /** Close the current socket ourselves; when `reason` is given, reconnect as after a loss. */
  #drop(code, text, reason = null) {
    const socket = this.socket;
    this.socket = null;
    if (socket) {
      socket.onopen = socket.onmessage = socket.onclose = socket.onerror = null;
      try {
        socket.close(code, text);
      } catch {
        // a socket that is still CONNECTING may refuse close(); it is abandoned either way
      }
    }
    if (reason) this.#lost(reason);
    else this.#resetLink();
  }

  #resetLink() {
    this.welcomed = false;
    for (const name of ["heartbeatTimer", "pongTimer", "welcomeTimer"]) this.#clearTimer(name);
    // Back to the queue: the timeout stops until the request is sent on the next link.
    for (const entry of this.pending.values()) {
      entry.sent = false;
      if (entry.timer !== null) this.timers.clearTimeout(entry.timer);
      entry.timer = null;
    }
  }

  /**
   * The link is gone: stop for good (4001, 4003) or reconnect after the backoff; `restart` (a 1012
   * on a welcomed link) reconnects after the jitter alone, counting no failure.
   */
  #lost(reason, holder = null, restart = false, said = null) {
    this.#resetLink();
    if (this.stopped) return;
    if (reason === DOWN_REASONS.UNAUTHORIZED || reason === DOWN_REASONS.SUPERSEDED) {
      this.stopped = true;
      this.#setStatus(STATE.DOWN, reason, null, holder, said);
      const error = this.#stoppedError();
      this.#rejectAll(error.code, error.message);
      return;
    }
    const delay = restart
      ? Math.floor(this.random() * this.limits.RESTART_JITTER_MS)
      : Math.min(this.limits.BACKOFF_MAX_MS, this.limits.BACKOFF_MIN_MS * 2 ** this.failures);
    if (!restart) this.failures += 1;
    this.#setStatus(STATE.DOWN, reason, delay);
    this.reconnectTimer = this.timers.setTimeout(() => {
      this.reconnectTimer = null;
      if (!this.stopped) this.#connect();
    }, delay);
  }

  #rejectAll(code, text) {
    for (const [id, entry] of [...this.pending]) {
      this.#settle(id);
      entry.reject(new BridgeError(code, text, { ref: id }));
    }
  }

  /** Why a stopped connection takes no request. */
  #stoppedError() {
    if (this.status.reason === DOWN_REASONS.UNAUTHORIZED) {
      return new BridgeError(DOWN_REASONS.UNAUTHORIZED, this.status.said ? `the bridge closed the link: ${this.status.said}` : "the bridge refused the token");
    }
    if (this.status.reason === DOWN_REASONS.SUPERSEDED) {
      return new BridgeError(DOWN_REASONS.SUPERSEDED, `another browser holds the bridge link${this.status.holder ? `: ${this.status.holder}` : ""}`);
    }
    return new BridgeError(DOWN_REASONS.CLOSED, "the bridge connection was stopped");
  }

  #clearTimer(name) {
    if (this[name] !== null) this.timers.clearTimeout(this[name]);
    this[name] = null;
  }

  #setStatus(state, reason, retryInMs, holder = null, said = null) {
    this.status = { state, reason, retryInMs, holder, said };
    this.onStatus({ ...this.status });
  }
}

/**
 * @typedef {object} ConnectionStatus
 * @property {"connecting"|"connected"|"down"} state
 * @property {string|null} reason a DOWN_REASONS value while down
 * @property {number|null} retryInMs the next attempt's delay; null when none is planned
 * @property {string|null} holder after `superseded`: who holds the link ("NAME (Foundry VERSION)"),
 *   when the bridge said so
 * @property {string|null} said after `unauthorized`: why the bridge closed an open link (its
 *   words, in the world's language), when it said so
 */

/** The bridge's error code for a frame it did not handle because of its rate limit. */
const RATE_LIMITED = "rate_limited";
/** The bridge's error code for a request it could not store (its storage is down); nothing was applied. */
const UNAVAILABLE = "unavailable";

/** The close reason of the bridge's plain 4001 (a hello refused): a code, not words for the GM. */
const PLAIN_REFUSAL = "unauthorized";

/**
 * @param {unknown} reason the close reason of a 4001
 * @returns {string|null} the bridge's words when it closed an open link (a token changed, the
 *   world removed: "the world's token was changed (world rotate-token): paste the new token into
 *   the module settings"), or null for the plain refusal of a hello
 */
export function refusedBecause(reason) {
  const text = typeof reason === "string" ? reason.trim() : "";
  return text && text !== PLAIN_REFUSAL ? text : null;
}

/**
 * @param {unknown} reason the close reason of a 4003 ("superseded by NAME (Foundry VERSION)")
 * @returns {string|null} "NAME (Foundry VERSION)", or null when the reason names nobody
 */
export function supersededBy(reason) {
  const match = typeof reason === "string" ? /^superseded by\s+(\S[\s\S]*)$/.exec(reason.trim()) : null;
  return match ? match[1] : null;
}

/**
 * The key a request and its reply share: `event_id`, or `query_id` for `audit_query` /
 * `audit_page` (read-only queries carry no event id).
 *
 * @param {{event_id?: unknown, query_id?: unknown}} message
 * @returns {string|undefined}
 */
function requestKey(message) {
  if (typeof message.event_id === "string" && message.event_id) return message.event_id;
  if (typeof message.query_id === "string" && message.query_id) return message.query_id;
  return undefined;
}

/**
 * @param {string} text
 * @returns {number} its length in UTF-8 bytes (what the bridge counts against its frame limit)
 */
export function utf8Length(text) {
  return new TextEncoder().encode(text).length;
}

/**
 * Host names that stay on this machine: `localhost` and `*.localhost`, 127.0.0.0/8, [::1] (the URL
 * parser has already written any other spelling of these addresses this way). Browsers treat
 * them as potentially trustworthy, so plain ws:// to them from an https:// page is not mixed
 * content (W3C Secure Contexts, "Is url potentially trustworthy?"; Chrome, and Firefox since 55
 * for 127.0.0.1 and since 84 for localhost / *.localhost: MDN browser-compat-data
 * http.mixed-content.allow_loopback_url / allow_localhost_url; Safari allows neither).
 */
const LOOPBACK_HOST = /^(?:(?:[a-z0-9-]+\.)*localhost\.?|127(?:\.\d{1,3}){3}|\[::1\])$/i;

/**
 * @param {string} url a bridge address
 * @returns {boolean} true when its host is this machine (LOOPBACK_HOST); false for another host
 *   or an address that does not parse
 */
export function isLoopbackUrl(url) {
  try {
    return LOOPBACK_HOST.test(new URL(url).hostname);
  } catch {
    return false;
  }
}

/**
 * @param {string} url the configured bridge address
 * @returns {boolean} true when the address is plain `ws://` to a host other than this machine
 *   (the token would cross the network unencrypted); false for wss:// and loopback
 */
export function isInsecureRemote(url) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return false;
  }
  return parsed.protocol === "ws:" && !isLoopbackUrl(url);
}
