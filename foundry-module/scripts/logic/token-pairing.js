/**
 * A GM's browser without the bridge token gets it from the browser that holds the bridge link.
 * The token lives in the browser a GM entered it in (a `client`-scope setting: that
 * browser's localStorage, never sent to Foundry's server), so nothing Foundry's server hands to a
 * player's browser can carry it. Another GM's browser is paired over the module socket, which
 * reaches every connected browser, players' included; so the token travels sealed.
 *
 * Exchange (payloads on `module.fate-bridge`, types in PAIRING_TYPES):
 * 1. asker -> all: `token_ask {to, request_id, reply_key}`: `to` is the link holder's user id,
 *    `reply_key` a fresh P-256 public key of this ask (logic/sealed-reply.js, info TOKEN_SEAL_INFO);
 * 2. the holder's browser, when Foundry says the sender is a GM (`isGMUser(senderId)`: Foundry's
 *    own user record, with the sender id Foundry's server appends, never an id from the payload),
 *    answers once its link is welcomed (an ask that comes earlier waits for the welcome, the
 *    latest per GM): `token_give {to, request_id, sealed}`, `{token}` sealed to `reply_key` for
 *    that user and request. An ask from a player is ignored.
 * 3. the asker takes a `token_give` only for its own open ask, only from the GM it asked (Foundry's
 *    sender id, a GM by Foundry's users), and only when the seal opens; then `onToken(token, from)`.
 * A player who reads every payload sees a public key and ciphertext; one who sends a forged
 * `token_give` is not the GM asked. The asker's private key is non-extractable and dropped with
 * the ask. The holder answers automatically: every GM of the world may hold the link anyway.
 *
 * No Foundry globals: the socket, the users, WebCrypto and the token are injected.
 */

import { createReplyKey, isReplyKey, sealReply } from "./sealed-reply.js";
import { isRequestId } from "./relay.js";

/** Socket payload types of the pairing. */
export const PAIRING_TYPES = Object.freeze({ ASK: "token_ask", GIVE: "token_give" });

/** HKDF `info` of a sealed token: a relay reply's seal never opens as one (logic/sealed-reply.js). */
export const TOKEN_SEAL_INFO = "fate-bridge token pairing v1";

/** The longest token taken from a seal (the bridge's are 43 characters). */
const MAX_TOKEN_LENGTH = 512;

/**
 * @param {object} deps
 * @param {() => string} deps.selfId this browser's user id
 * @param {(userId: string) => boolean} deps.isGMUser that user is a GM (Foundry's users)
 * @param {() => string|null} deps.tokenToGive the token this browser gives: non-null only while it
 *   holds a welcomed bridge link (the bridge took the token)
 * @param {(payload: object) => void} deps.send emit on the module socket to the other browsers
 * @param {{subtle: SubtleCrypto|null, randomValues: (bytes: Uint8Array) => Uint8Array}} deps.crypto
 *   WebCrypto (`subtle` null outside a secure context: this browser can neither ask nor give)
 * @param {() => string} deps.newId a fresh request id
 * @param {(token: string, fromId: string) => void} deps.onToken the token a GM's browser gave this
 *   one, and that GM's user id (once per ask)
 * @param {(error: unknown) => void} [deps.onError] a seal that could not be made or opened
 * @returns {{
 *   ask(holderId: string): boolean,
 *   receive(payload: unknown, senderId: string): boolean,
 *   answer(): void,
 *   cancel(): void,
 *   idle(): Promise<void>,
 *   dispose(): void,
 * }} `ask` sends an ask to the link holder `holderId` (nothing when one to that GM is open) and
 *   returns false when this browser has no WebCrypto; `receive` takes a module-socket payload
 *   with Foundry's sender id and returns true when it was part of the pairing (the caller passes
 *   it on otherwise); `answer` gives the token to the asks waiting for this browser's link
 *   (call after each `welcome`); `cancel` forgets the open ask (this browser has a token now);
 *   `idle` resolves once the WebCrypto work under way (making a key and sending the ask, sealing
 *   and sending the token, opening it) is over (tests: WebCrypto settles outside the microtask queue);
 *   `dispose` forgets every ask and sends nothing more, even for seals still being made (the module stops)
 */
export function createTokenPairing({ selfId, isGMUser, tokenToGive, send, crypto, newId, onToken, onError = () => {} }) {
  /** This browser's open ask: to whom, its request id, and its key (a promise until made). */
  let open = null;
  /** Asks waiting for this browser's link to be welcomed, by the asking GM's user id (latest only). */
  const waiting = new Map();
  let disposed = false;
  /** WebCrypto work under way (see `idle`). */
  const work = new Set();
  const track = (promise) => {
    work.add(promise);
    const forget = () => work.delete(promise);
    promise.then(forget, forget);
  };

  function give(askerId, { requestId, replyKey }) {
    const token = tokenToGive();
    if (!token) return false;
    track(sealReply(crypto.subtle, replyKey, { token }, { to: askerId, requestId }, crypto.randomValues, TOKEN_SEAL_INFO).then(
      (sealed) => {
        if (!disposed) send({ type: PAIRING_TYPES.GIVE, to: askerId, request_id: requestId, sealed });
      },
      onError,
    ));
    return true;
  }

  function onAsk(payload, senderId) {
    if (payload.to !== selfId() || senderId === selfId() || !isGMUser(senderId)) return;
    if (!isRequestId(payload.request_id) || !isReplyKey(payload.reply_key) || !crypto.subtle) return;
    const ask = { requestId: payload.request_id, replyKey: payload.reply_key };
    if (!give(senderId, ask)) waiting.set(senderId, ask);
  }

  function onGive(payload, senderId) {
    const mine = open;
    if (!mine || payload.to !== selfId() || payload.request_id !== mine.requestId) return;
    if (senderId !== mine.to || !isGMUser(senderId)) return;
    track(mine.key
      .then((key) => key.open(payload.sealed, { to: selfId(), requestId: mine.requestId }))
      .then((value) => {
        if (open !== mine) return;
        const token = value?.token;
        if (typeof token !== "string" || !token || token.length > MAX_TOKEN_LENGTH) throw new TypeError("sealed.token is not a token");
        open = null;
        onToken(token, senderId);
      })
      .catch(onError));
  }

  return {
    ask(holderId) {
      if (!crypto.subtle) return false;
      if (disposed) return true;
      if (open?.to === holderId) return true;
      const mine = { to: holderId, requestId: newId(), key: createReplyKey(crypto.subtle, TOKEN_SEAL_INFO) };
      open = mine;
      track(mine.key.then(
        (key) => {
          if (open === mine) send({ type: PAIRING_TYPES.ASK, to: holderId, request_id: mine.requestId, reply_key: key.replyKey });
        },
        (error) => {
          if (open === mine) open = null;
          onError(error);
        },
      ));
      return true;
    },
    receive(payload, senderId) {
      if (!payload || typeof payload !== "object") return false;
      if (payload.type === PAIRING_TYPES.ASK) onAsk(payload, senderId);
      else if (payload.type === PAIRING_TYPES.GIVE) onGive(payload, senderId);
      else return false;
      return true;
    },
    answer() {
      for (const [askerId, ask] of [...waiting]) if (give(askerId, ask)) waiting.delete(askerId);
    },
    cancel() {
      open = null;
    },
    async idle() {
      while (work.size > 0) await Promise.all([...work]);
    },
    dispose() {
      disposed = true;
      open = null;
      waiting.clear();
    },
  };
}
