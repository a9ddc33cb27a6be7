/**
 * Sealed relay replies: a relayed answer that must not be read by every browser on the
 * module socket (Foundry's server hands a module socket payload to every connected client) travels
 * encrypted to the one browser that asked.
 *
 * The requester makes a fresh ECDH P-256 key pair per request and sends only its public key
 * (`reply_key`, in the request); the link holder makes a fresh key pair of its own per reply,
 * derives the shared secret (ECDH), a 256-bit AES-GCM key from it (HKDF-SHA-256, `SEAL_INFO`),
 * and encrypts the reply under a random 96-bit IV, authenticating the recipient's user id and the
 * request id as additional data. Nothing is stored: the requester's private key is
 * non-extractable, lives in memory until the request settles, and is then dropped. Who sent a
 * sealed reply is still Foundry's sender id, as for every relay payload (logic/relay.js): the
 * seal gives secrecy, not authenticity (any client could seal to a public key it saw).
 *
 * WebCrypto (`SubtleCrypto`) is injected: browsers offer it in a secure context only (HTTPS or
 * localhost); Node 20 as `globalThis.crypto.subtle`. No Foundry globals.
 */

/**
 * HKDF `info` of a relay reply's key; a new wire format gets a new one. Another use of the same
 * seal passes its own `info` (logic/token-pairing.js), so a seal made for one use never opens as
 * the other.
 */
export const SEAL_INFO = "fate-bridge relay reply v1";

/** Length in characters of a P-256 public key in the wire's form (65 raw bytes, base64url). */
export const REPLY_KEY_LENGTH = 87;

const CURVE = { name: "ECDH", namedCurve: "P-256" };
const IV_BYTES = 12;
const utf8 = new TextEncoder();

/** @param {Uint8Array} bytes @returns {string} base64url, no padding */
function toBase64Url(bytes) {
  let text = "";
  for (const byte of bytes) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

/**
 * @param {unknown} text base64url
 * @param {string} field the wire field, named in the error
 * @returns {Uint8Array}
 * @throws {TypeError} naming `field` when `text` is not base64url
 */
function fromBase64Url(text, field) {
  if (typeof text !== "string" || !/^[A-Za-z0-9_-]*$/.test(text)) throw new TypeError(`${field} is not base64url text`);
  const binary = atob(text.replace(/-/g, "+").replace(/_/g, "/") + "=".repeat((4 - (text.length % 4)) % 4));
  return Uint8Array.from(binary, (char) => char.charCodeAt(0));
}

/**
 * @param {unknown} value a request's `reply_key`
 * @returns {boolean} true for text shaped like a P-256 public key in the wire's form (the curve
 *   point itself is checked when it is imported)
 */
export function isReplyKey(value) {
  return typeof value === "string" && value.length === REPLY_KEY_LENGTH && /^[A-Za-z0-9_-]+$/.test(value);
}

/** The AES-GCM key shared by `privateKey` and `publicKey` (ECDH, then HKDF-SHA-256 with `info`). */
async function sharedKey(subtle, privateKey, publicKey, usage, info) {
  const secret = await subtle.deriveBits({ name: "ECDH", public: publicKey }, privateKey, 256);
  const hkdf = await subtle.importKey("raw", secret, "HKDF", false, ["deriveKey"]);
  return subtle.deriveKey(
    { name: "HKDF", hash: "SHA-256", salt: new Uint8Array(0), info: utf8.encode(info) },
    hkdf,
    { name: "AES-GCM", length: 256 },
    false,
    [usage],
  );
}

/** What the seal authenticates besides the content: who it is for and which request it answers. */
const additionalData = ({ to, requestId }) => utf8.encode(`${to}\n${requestId}`);

/**
 * The requester's side: a fresh key pair for one request.
 *
 * @param {SubtleCrypto} subtle WebCrypto
 * @param {string} [info] the HKDF `info` of this use (SEAL_INFO: a relay reply)
 * @returns {Promise<{replyKey: string, open(sealed: unknown, context: {to: string, requestId: string}): Promise<unknown>}>}
 *   `replyKey` goes in the request (base64url of the raw public key); `open` decrypts a sealed
 *   reply made for it and returns the JSON value sealed, and rejects (TypeError naming the field,
 *   or WebCrypto's OperationError) when `sealed` is malformed, made for another key, recipient or
 *   request, or altered
 */
export async function createReplyKey(subtle, info = SEAL_INFO) {
  const pair = await subtle.generateKey(CURVE, false, ["deriveBits"]);
  const replyKey = toBase64Url(new Uint8Array(await subtle.exportKey("raw", pair.publicKey)));
  return {
    replyKey,
    async open(sealed, context) {
      if (!sealed || typeof sealed !== "object") throw new TypeError("sealed is not an object");
      const senderKey = await subtle.importKey("raw", fromBase64Url(sealed.key, "sealed.key"), CURVE, false, []);
      const key = await sharedKey(subtle, pair.privateKey, senderKey, "decrypt", info);
      const iv = fromBase64Url(sealed.iv, "sealed.iv");
      if (iv.length !== IV_BYTES) throw new TypeError(`sealed.iv is not ${IV_BYTES} bytes`);
      const plain = await subtle.decrypt({ name: "AES-GCM", iv, additionalData: additionalData(context) }, key, fromBase64Url(sealed.data, "sealed.data"));
      return JSON.parse(new TextDecoder().decode(plain));
    },
  };
}

/**
 * The link holder's side: seal `value` for the requester's `replyKey`.
 *
 * @param {SubtleCrypto} subtle WebCrypto
 * @param {string} replyKey the request's `reply_key`
 * @param {unknown} value a JSON value (the `done`'s `{ok, result | error}`)
 * @param {{to: string, requestId: string}} context the recipient's user id and the request id
 * @param {(bytes: Uint8Array) => Uint8Array} randomValues fills the IV (crypto.getRandomValues)
 * @param {string} [info] the HKDF `info` of this use, as the recipient's `createReplyKey` was given
 * @returns {Promise<{key: string, iv: string, data: string}>} base64url: this reply's public key,
 *   the IV, and the ciphertext with its 128-bit tag
 * @throws {TypeError} when `replyKey` is not a key in the wire's form; WebCrypto's error when it
 *   is not a point on P-256
 */
export async function sealReply(subtle, replyKey, value, context, randomValues, info = SEAL_INFO) {
  if (!isReplyKey(replyKey)) throw new TypeError("reply_key is not a P-256 public key (87 base64url characters)");
  const recipient = await subtle.importKey("raw", fromBase64Url(replyKey, "reply_key"), CURVE, false, []);
  const pair = await subtle.generateKey(CURVE, false, ["deriveBits"]);
  const key = await sharedKey(subtle, pair.privateKey, recipient, "encrypt", info);
  const iv = randomValues(new Uint8Array(IV_BYTES));
  const data = await subtle.encrypt({ name: "AES-GCM", iv, additionalData: additionalData(context) }, key, utf8.encode(JSON.stringify(value)));
  return {
    key: toBase64Url(new Uint8Array(await subtle.exportKey("raw", pair.publicKey))),
    iv: toBase64Url(iv),
    data: toBase64Url(new Uint8Array(data)),
  };
}
