/**
 * Requests from any client run on the browser of the GM who holds the bridge link (logic/link-holder.js,
 * "the link holder" below) over the module socket, with deadlines.
 * SoHL's Spend Fate / choice clicks and every ruleset's actions share this one mechanism
 * (`createRelayHub`). The GM's browser may be closed or hung; the requester must not wait forever,
 * and "nothing was done" must stay true once the requester has been told so.
 *
 * Exchange (payloads on `module.fate-bridge`, types in RELAY_TYPES):
 * 1. requester -> all: `request {request_id, ruleset, action, data}` with a fresh `request_id`;
 * 2. link holder -> requester: `ack {to, request_id}` as soon as the request arrives; the GM holds
 *    it and does nothing with it yet (a request no handler takes is answered `done` at once);
 *    the requester takes an ack only from the GM it sees as the link holder;
 * 3. requester -> all: `go {request_id, to}` (`to`: the GM that acked), only if the ack came before
 *    the requester's deadline; only that GM runs it;
 * 4. link holder: on `go` from the same sender, runs the handler with Foundry's sender id (never an
 *    id from the payload) and `isGM` looked up from Foundry's users; then
 *    `done {to, request_id, ok, result | error: {code, message, field}}`. A held request with no
 *    `go` is dropped; a `go` for a request no longer held gets `done` with `relay_expired`.
 * A GM browser that wakes up after the requester's deadline acks, gets no `go`, and drops the
 * request: its handler never runs. When the link holder changes (it left, or withdrew) before a
 * request was acked, the requester sends that request again, same `request_id`, to the new holder
 * (`holderChanged`): the old one never acked it, so it never ran there. An acked request is not sent
 * again (the old holder may have run it); its `go` goes to the GM that acked it only.
 *
 * Sealed replies: the module socket reaches every browser, so the answer of an action
 * registered `sealed` (e.g. the pool ledger: GM-only entries) must not travel in clear. The
 * requester puts a fresh public key in its request (`reply_key`, logic/sealed-reply.js); the link
 * holder answers such a request with `done {to, request_id, sealed}`, its `{ok, result | error}`
 * encrypted to that key, and a request without a key (a browser without WebCrypto: Foundry not
 * opened over HTTPS or localhost) gets `needs_secure_context` when the action is sealed for that
 * sender, without running it. A requester that sent a key takes a success only sealed; `done`s
 * that carry no answer (`relay_expired`, `no_handler`) stay in clear.
 *
 * Guarantees (requester side): each request's promise settles exactly once: with the handler's
 * result, or rejected with a BridgeError whose code is the handler's (e.g. the bridge's refusal)
 * or one of RELAY_ERRORS. Unknown or late ids are ignored. No Foundry globals: the socket, the
 * user lookups, timers and ids are injected.
 */

import { BridgeError } from "./connection.js";
import { createReplyKey, isReplyKey, sealReply } from "./sealed-reply.js";

/** Deadlines and bounds, with their reasons. */
export const RELAY_LIMITS = Object.freeze({
  /** The GM's browser acks before doing anything; 20 s covers a slow network and a busy tab. */
  ACK_TIMEOUT_MS: 20_000,
  /**
   * After the ack: re-grade (request timeout 15 s) + spend (15 s) + Dice So Nice's animation,
   * with margin. Past this the requester may try again; the bridge still refuses a second Fate.
   */
  DONE_TIMEOUT_MS: 60_000,
  /**
   * The GM holds an acked request this long for its `go`. The requester sends `go` as soon as the
   * ack arrives (one socket round trip), so this only bounds requests whose sender gave up.
   */
  GO_TIMEOUT_MS: 20_000,
  /** Requests the GM holds at once; a burst beyond this drops the oldest. */
  MAX_HELD: 200,
  /** An error message carried in `done` is cut to this length (it is shown, never parsed). */
  MAX_ERROR_MESSAGE: 500,
});

/** Socket payload types of the exchange. */
export const RELAY_TYPES = Object.freeze({ REQUEST: "request", ACK: "ack", GO: "go", DONE: "done" });

/** BridgeError codes of the relay's own making (lang/en.json has `FATE_BRIDGE.Error.<code>`). */
export const RELAY_ERRORS = Object.freeze({
  /** No GM with the bridge token is logged in (no link holder). */
  NO_GM: "no_gm",
  /** No `ack` within ACK_TIMEOUT_MS: the handler never ran. */
  NO_ANSWER: "gm_no_answer",
  /** Acked, but no `done` within DONE_TIMEOUT_MS: the handler may have run. */
  UNFINISHED: "gm_unfinished",
  /** The `go` came after the GM dropped the request: the handler never ran. */
  EXPIRED: "relay_expired",
  /** The GM's browser has no handler for that ruleset and action. */
  NO_HANDLER: "no_handler",
  /** A handler failed without a code of its own. */
  INTERNAL: "internal",
  /**
   * The action's answer is sealed for this sender, and the request carried no key to seal it to
   * (the requester's browser has no WebCrypto: not a secure context). The handler never ran.
   */
  NEEDS_SEAL: "needs_secure_context",
});

/** Longest request id accepted from the socket (ours are 16 characters). */
export const MAX_REQUEST_ID_LENGTH = 64;

/** Ruleset ids, action names and error codes: short lower-case words. */
const NAME = /^[a-z][a-z0-9_-]{0,63}$/;

/**
 * @param {unknown} value a socket payload's `request_id`
 * @returns {boolean} true for a usable id
 */
export function isRequestId(value) {
  return typeof value === "string" && value.length > 0 && value.length <= MAX_REQUEST_ID_LENGTH;
}

/**
 * @param {unknown} value a ruleset id, action name or error code
 * @returns {boolean} true for a lower-case word of at most 64 characters (`[a-z][a-z0-9_-]*`)
 */
export function isRelayName(value) {
  return typeof value === "string" && NAME.test(value);
}

/** A Foundry document id as the server reports a sender: letters and digits (`randomID(16)`). */
const SENDER_ID = /^[A-Za-z0-9]{1,64}$/;

/**
 * What the module socket handler may accept: exactly the two arguments of a well-formed
 * delivery, the payload the sender emitted and the sender's user id, which the Foundry server
 * appends after whatever the sender emitted (so a module's handler reads `(data, userId)`, as e.g.
 * bekriebel/fvtt-module-avclient-livekit src/utils/hooks.ts does on `module.<id>`). A client
 * that emits extra arguments (`emit(name, payload, "gmUserId")`) makes its delivery
 * `(payload, "gmUserId", itsRealId)`: reading the second argument would take the forged id, so
 * any delivery with more (or fewer) than two arguments is refused whole.
 *
 * Why not v13's `CONFIG.queries` / `User#query`: its handler is called `(queryData, {timeout})`
 * and is not told who asked (League-of-Foundry-Developers/foundry-vtt-types
 * src/foundry/client/config.d.mts `CONFIG.Queries.QueryHandler`, documents/user.d.mts
 * `User#query`), so the GM could only trust an id inside `queryData`: forgeable by any player.
 *
 * @param {unknown[]} args the socket handler's arguments, as Foundry called it
 * @returns {{payload: object, senderId: string} | null} null for anything but `(object, id)`
 */
export function socketDelivery(args) {
  if (!Array.isArray(args) || args.length !== 2) return null;
  const [payload, senderId] = args;
  if (!payload || typeof payload !== "object" || Array.isArray(payload)) return null;
  if (typeof senderId !== "string" || !SENDER_ID.test(senderId)) return null;
  return { payload, senderId };
}

/**
 * The `error` part of a `done` for a failed handler.
 *
 * @param {unknown} error what the handler threw or rejected with
 * @returns {{code: string, message: string, field: string|null}} its `code` when that is a
 *   usable name (a BridgeError's code passes through), else `internal`
 */
export function relayErrorPayload(error) {
  const code = isRelayName(error?.code) ? error.code : RELAY_ERRORS.INTERNAL;
  return {
    code,
    message: String(error?.message ?? error).slice(0, RELAY_LIMITS.MAX_ERROR_MESSAGE),
    field: typeof error?.field === "string" ? error.field : null,
  };
}

/**
 * The requester's side: a deadline and a promise per relayed request.
 *
 * @param {object} deps
 * @param {{setTimeout: Function, clearTimeout: Function}} deps.timers
 * @param {() => string} deps.newId a fresh request id
 * @param {Partial<typeof RELAY_LIMITS>} [deps.limits] overrides (tests)
 * @returns {{
 *   start(build?: (requestId: string) => object): {requestId: string, settled: Promise<unknown>, payload: object|null},
 *   unacked(): object[],
 *   ack(requestId: unknown): boolean,
 *   done(requestId: unknown, reply: {ok?: unknown, result?: unknown, error?: unknown}): boolean,
 *   pending(): number,
 *   clear(): void,
 * }} `start` returns the id to send and the promise of its outcome: resolved with `reply.result`
 *   on `done {ok: true}`, rejected with BridgeError `gm_no_answer` (no ack in time),
 *   `gm_unfinished` (acked, no done in time) or the `done`'s error code (`internal` when it has
 *   none usable); `build`, when given, makes the payload to send for the new id (kept, and
 *   returned as `payload`); `unacked` lists, oldest first, the kept payloads of the requests still
 *   waiting for their ack (to send again to a new link holder); `ack` returns true when the id was waiting for its ack (the caller then sends
 *   `go`), false for an unknown, late or repeated ack (send nothing); `done` returns true when
 *   the id was pending; `clear` drops every deadline and leaves the promises unsettled (module
 *   shutdown)
 */
export function createRelayTracker({ timers, newId, limits = {} }) {
  const limit = { ...RELAY_LIMITS, ...limits };
  /** @type {Map<string, {resolve: Function, reject: Function, timer: any, acked: boolean, payload: object|null}>} */
  const open = new Map();

  function finish(requestId) {
    const entry = open.get(requestId);
    if (!entry) return null;
    timers.clearTimeout(entry.timer);
    open.delete(requestId);
    return entry;
  }

  function expire(requestId, code, text) {
    finish(requestId)?.reject(new BridgeError(code, text, { ref: requestId }));
  }

  return {
    start(build) {
      const requestId = newId();
      const payload = typeof build === "function" ? build(requestId) : null;
      const settled = new Promise((resolve, reject) => {
        const timer = timers.setTimeout(
          () => expire(requestId, RELAY_ERRORS.NO_ANSWER, `the GM's browser did not acknowledge within ${limit.ACK_TIMEOUT_MS} ms; nothing was done`),
          limit.ACK_TIMEOUT_MS,
        );
        open.set(requestId, { resolve, reject, timer, acked: false, payload });
      });
      return { requestId, settled, payload };
    },
    unacked: () => [...open.values()].filter((entry) => !entry.acked && entry.payload).map((entry) => entry.payload),
    ack(requestId) {
      const entry = open.get(requestId);
      if (!entry || entry.acked) return false;
      timers.clearTimeout(entry.timer);
      entry.acked = true;
      entry.timer = timers.setTimeout(
        () => expire(requestId, RELAY_ERRORS.UNFINISHED, `the GM's browser took the request but did not finish it within ${limit.DONE_TIMEOUT_MS} ms`),
        limit.DONE_TIMEOUT_MS,
      );
      return true;
    },
    done(requestId, reply) {
      const entry = finish(requestId);
      if (!entry) return false;
      if (reply?.ok === true) {
        entry.resolve(reply.result);
      } else {
        const error = relayErrorPayload(reply?.error ?? { message: "the GM's browser reported a failure without details" });
        entry.reject(new BridgeError(error.code, error.message, { field: error.field, ref: requestId }));
      }
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
 * The GM's side: requests acked and waiting for their `go`.
 *
 * @param {object} deps
 * @param {{setTimeout: Function, clearTimeout: Function}} deps.timers
 * @param {Partial<typeof RELAY_LIMITS>} [deps.limits] overrides (tests)
 * @returns {{hold(key: string, run: () => void): void, go(key: string): boolean, clear(): void}}
 *   `hold` keeps `run` for GO_TIMEOUT_MS (then drops it silently; a repeated key replaces the
 *   older request); `go` runs and forgets it, false when nothing is held under `key` (expired or
 *   never acked); at most MAX_HELD requests are held, the oldest dropped first
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

/**
 * @typedef {object} RelayPort what the hub needs from Foundry (scripts/foundry.js in the module)
 * @property {(payload: object) => void} send emit on the module socket to the other clients
 * @property {() => boolean} isLinkHolder this client holds the bridge link (logic/link-holder.js)
 * @property {() => string|null} linkHolderId the user id of the GM that holds the link, null when
 *   no GM with the bridge token is logged in
 * @property {() => {id: string, isGM: boolean}} currentUser this client's user
 * @property {(userId: string) => boolean} isGMUser that user is a GM (Foundry's user list)
 */

/**
 * @typedef {boolean | ((sender: {userId: string, isGM: boolean}) => boolean)} RelaySealed
 *   whether an action's answer is private for `sender` and so travels only sealed to the requester
 *   (true: for every sender)
 */

/**
 * @typedef {(data: unknown, sender: {userId: string, isGM: boolean}) => unknown} RelayHandler
 *   runs on the link holder's client; may return a Promise. Its (awaited) result goes back to the
 *   requester (as a JSON copy when relayed); a throw or rejection goes back as a BridgeError with
 *   the error's `code` (`internal` when it has none).
 */

/**
 * Both sides of the relay in one object, for every ruleset (SoHL included).
 *
 * @param {object} deps
 * @param {{setTimeout: Function, clearTimeout: Function}} deps.timers
 * @param {() => string} deps.newId a fresh request id
 * @param {RelayPort} deps.port
 * @param {{subtle: SubtleCrypto|null, randomValues: (bytes: Uint8Array) => Uint8Array}|null} [deps.crypto]
 *   WebCrypto for sealed replies (scripts/foundry.js `webCrypto`); `subtle` is null in a browser
 *   outside a secure context: its requests then carry no key, and a sealed action answers it
 *   `needs_secure_context`; as the link holder it cannot seal, and answers keyed requests `internal`
 * @param {(error: unknown) => void} [deps.onHandlerBug] a handler failed without a code (a bug):
 *   the GM's browser logs it
 * @param {Partial<typeof RELAY_LIMITS>} [deps.limits] overrides (tests)
 * @returns {{
 *   on(ruleset: string, action: string, handler: RelayHandler, options?: {sealed?: RelaySealed}): void,
 *   request(ruleset: string, action: string, data: unknown): Promise<unknown>,
 *   receive(payload: unknown, senderId: string): void,
 *   holderChanged(): void,
 *   idle(): Promise<void>,
 *   clear(): void,
 * }}
 *   `on` registers the GM-side handler (TypeError for a bad name or a second handler for the same
 *   pair), every client registers the same (so a requester knows which actions are sealed);
 *   `request` runs the handler directly on the link holder's own client (sender: this user),
 *   elsewhere relays it (rejects `no_gm` when no GM with the token is online; see
 *   createRelayTracker for the rest); `receive` takes every module-socket payload with Foundry's
 *   sender id and ignores what is not part of the exchange; `holderChanged` (call when the link
 *   holder changed) sends the requests not acked yet again, same ids, to the new holder; `idle`
 *   resolves once the sealing work under way (making a key and sending its request, sealing and
 *   sending a `done`, opening one) is over (tests: WebCrypto settles outside the microtask queue);
 *   `clear` drops every deadline and held request (shutdown)
 */
export function createRelayHub({ timers, newId, port, crypto = null, onHandlerBug = () => {}, limits = {} }) {
  const tracker = createRelayTracker({ timers, newId, limits });
  const inbox = createRelayInbox({ timers, limits });
  /**
   * `seals`: requests for it carry a reply key when this browser can make one; `sealed`: its
   * answer to that sender never travels in clear.
   * @type {Map<string, {handler: RelayHandler, seals: boolean, sealed: (sender: {userId: string, isGM: boolean}) => boolean}>} keyed `ruleset/action`
   */
  const handlers = new Map();
  const keyOf = (ruleset, action) => `${ruleset}/${action}`;
  /** Requester side: the reply key of each sealed request still open, by request id. */
  const replyKeys = new Map();
  /** Sealing work under way (see `idle`). */
  const work = new Set();
  const track = (promise) => {
    work.add(promise);
    const forget = () => work.delete(promise);
    promise.then(forget, forget);
    return promise;
  };

  /** Run a handler; a synchronous throw becomes a rejection. */
  function run(handler, data, sender) {
    return new Promise((resolve) => resolve(handler(data, sender))).catch((error) => {
      if (!isRelayName(error?.code)) onHandlerBug(error);
      throw error;
    });
  }

  function request(ruleset, action, data) {
    if (!isRelayName(ruleset) || !isRelayName(action)) {
      return Promise.reject(new TypeError(`relay needs a ruleset id and an action name ([a-z][a-z0-9_-]*), got ${JSON.stringify([ruleset, action])}`));
    }
    if (port.isLinkHolder()) {
      const entry = handlers.get(keyOf(ruleset, action));
      if (!entry) return Promise.reject(new BridgeError(RELAY_ERRORS.NO_HANDLER, `no handler for ${ruleset} ${action}`));
      const user = port.currentUser();
      return run(entry.handler, data, { userId: user.id, isGM: user.isGM });
    }
    if (port.linkHolderId() === null) return Promise.reject(new BridgeError(RELAY_ERRORS.NO_GM, "no GM with the bridge token is online to run this request"));
    const request = { type: RELAY_TYPES.REQUEST, ruleset, action, data: data ?? null };
    // A key for every action sealed for anyone: sealing what could travel in clear costs little.
    if (!handlers.get(keyOf(ruleset, action))?.seals || !crypto?.subtle) return send(request, null);
    // The outcome is wrapped: a promise returned from `then` would be adopted, and `track` waits
    // for the send only.
    const sent = createReplyKey(crypto.subtle).then(
      (key) => ({ settled: send({ ...request, reply_key: key.replyKey }, key) }),
      (error) => Promise.reject(new BridgeError(RELAY_ERRORS.INTERNAL, `this browser could not make a key for a sealed answer: ${error?.message ?? error}`)),
    );
    track(sent.then(() => {}, () => {}));
    return sent.then(({ settled }) => settled);
  }

  /** Start tracking `request` under a fresh id and send it; `key` (a sealed request's) is kept until it settles. */
  function send(request, key) {
    const { requestId, settled, payload } = tracker.start((id) => ({ ...request, request_id: id }));
    if (key) {
      replyKeys.set(requestId, key);
      const forget = () => replyKeys.delete(requestId);
      settled.then(forget, forget);
    }
    port.send(payload);
    return settled;
  }

  /** The GM's side of a request: ack and hold it until the sender's `go`. */
  function onRequest(payload, senderId) {
    if (!isRequestId(payload.request_id) || !isRelayName(payload.ruleset) || !isRelayName(payload.action)) return;
    const requestId = payload.request_id;
    const reply = (extra) => port.send({ to: senderId, request_id: requestId, ...extra });
    const entry = handlers.get(keyOf(payload.ruleset, payload.action));
    if (!entry) {
      reply({ type: RELAY_TYPES.DONE, ok: false, error: relayErrorPayload(new BridgeError(RELAY_ERRORS.NO_HANDLER, `no handler for ${payload.ruleset} ${payload.action}`)) });
      return;
    }
    const sender = { userId: senderId, isGM: port.isGMUser(senderId) };
    const replyKey = isReplyKey(payload.reply_key) ? payload.reply_key : null;
    if (replyKey === null && entry.sealed(sender)) {
      reply({
        type: RELAY_TYPES.DONE,
        ok: false,
        error: relayErrorPayload(new BridgeError(RELAY_ERRORS.NEEDS_SEAL, "this answer is private and your browser cannot receive it sealed (WebCrypto needs Foundry opened over HTTPS or on localhost); nothing was done")),
      });
      return;
    }
    /** The `done`: sealed to the request's key when it has one, else in clear. */
    const answer = (outcome) => {
      if (replyKey === null) {
        reply({ type: RELAY_TYPES.DONE, ...outcome });
        return;
      }
      track(
        Promise.resolve()
          .then(() => sealReply(crypto?.subtle, replyKey, outcome, { to: senderId, requestId }, crypto.randomValues))
          .then(
            (sealed) => reply({ type: RELAY_TYPES.DONE, sealed }),
            (error) => reply({
              type: RELAY_TYPES.DONE,
              ok: false,
              error: relayErrorPayload(new BridgeError(RELAY_ERRORS.INTERNAL, `the GM's browser could not seal its answer (${error?.message ?? error}); it is not sent in clear`)),
            }),
          ),
      );
    };
    // Held requests are keyed by sender: every client sees every request id.
    inbox.hold(`${senderId}:${requestId}`, () => {
      run(entry.handler, payload.data, sender).then(
        (result) => answer({ ok: true, result: result ?? null }),
        (error) => answer({ ok: false, error: relayErrorPayload(error) }),
      );
    });
    reply({ type: RELAY_TYPES.ACK });
  }

  /**
   * The sender's go for a held request; a go for a request no longer held is answered as expired.
   * A go addressed to another GM (the one that acked) is not ours.
   */
  function onGo(payload, senderId) {
    if (payload.to !== undefined && payload.to !== port.currentUser().id) return;
    if (!isRequestId(payload.request_id) || inbox.go(`${senderId}:${payload.request_id}`)) return;
    port.send({
      type: RELAY_TYPES.DONE,
      to: senderId,
      request_id: payload.request_id,
      ok: false,
      error: relayErrorPayload(new BridgeError(RELAY_ERRORS.EXPIRED, "the request reached the GM's browser too late and was dropped; nothing was done")),
    });
  }

  /** Acks and dones addressed to this client, accepted from GMs only (acks from the link holder only). */
  function onReplyToMe(payload, senderId) {
    if (payload.to !== port.currentUser().id || !port.isGMUser(senderId)) return;
    if (payload.type === RELAY_TYPES.ACK) {
      // Only a request still waiting gets its go, and only from the holder: after the deadline the
      // GM never hears back, and a GM that no longer holds the link must not run it.
      if (senderId === port.linkHolderId() && tracker.ack(payload.request_id)) {
        port.send({ type: RELAY_TYPES.GO, request_id: payload.request_id, to: senderId });
      }
    } else {
      onDone(payload);
    }
  }

  /** A `done` for this client: a sealed request takes its answer only sealed (errors may come in clear). */
  function onDone(payload) {
    const requestId = payload.request_id;
    const key = replyKeys.get(requestId);
    if (!key) {
      tracker.done(requestId, payload);
    } else if (payload.sealed !== undefined) {
      const refused = { ok: false, error: { code: RELAY_ERRORS.INTERNAL, message: "the GM's sealed answer could not be opened" } };
      track(key.open(payload.sealed, { to: port.currentUser().id, requestId }).then(
        (outcome) => tracker.done(requestId, outcome && typeof outcome === "object" ? outcome : refused),
        () => tracker.done(requestId, refused),
      ));
    } else if (payload.ok === true) {
      tracker.done(requestId, { ok: false, error: { code: RELAY_ERRORS.INTERNAL, message: "the GM's browser answered a sealed request in clear" } });
    } else {
      tracker.done(requestId, payload);
    }
  }

  return {
    on(ruleset, action, handler, { sealed = false } = {}) {
      if (!isRelayName(ruleset) || !isRelayName(action)) {
        throw new TypeError(`relay handler names must be [a-z][a-z0-9_-]*, got ${JSON.stringify([ruleset, action])}`);
      }
      if (typeof handler !== "function") throw new TypeError(`the relay handler for ${ruleset} ${action} is not a function`);
      if (handlers.has(keyOf(ruleset, action))) throw new TypeError(`${ruleset} ${action} already has a relay handler`);
      if (typeof sealed !== "boolean" && typeof sealed !== "function") throw new TypeError(`the relay option sealed of ${ruleset} ${action} is not a boolean or a function`);
      handlers.set(keyOf(ruleset, action), {
        handler,
        seals: sealed !== false,
        sealed: typeof sealed === "function" ? (who) => sealed(who) === true : () => sealed,
      });
    },
    request,
    receive(payload, senderId) {
      if (!payload || typeof payload !== "object") return;
      if (payload.type === RELAY_TYPES.ACK || payload.type === RELAY_TYPES.DONE) onReplyToMe(payload, senderId);
      else if (!port.isLinkHolder()) return;
      else if (payload.type === RELAY_TYPES.REQUEST) onRequest(payload, senderId);
      else if (payload.type === RELAY_TYPES.GO) onGo(payload, senderId);
    },
    async idle() {
      while (work.size > 0) await Promise.all([...work]);
    },
    holderChanged() {
      if (port.isLinkHolder() || port.linkHolderId() === null) return;
      for (const payload of tracker.unacked()) port.send(payload);
    },
    clear() {
      tracker.clear();
      inbox.clear();
      replyKeys.clear();
    },
  };
}
