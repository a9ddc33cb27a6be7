/**
 * Receipts (docs/protocol.md, Receipts): each decision's reply may carry a `receipt`
 * (the world's audit record number and chain hash, signed by the bridge). The GM's client keeps
 * it on the ChatMessage it posts for that reply (`flags["fate-bridge"].receipt`), so Foundry's own
 * database holds a copy the bridge cannot edit. The audit window collects them from the chat log
 * and asks the bridge (`receipts_check`) whether its trail still holds each record unchanged, or
 * exports them as the JSON file `fate-bridge audit verify --receipts FILE` reads. The card keeps
 * the decision's `event_id` too (`flags["fate-bridge"].decision`), by which a GM override names
 * the decision a card shows (logic/dice-trust.js).
 * Pure: no Foundry, no DOM.
 */

import { PROTOCOL_VERSION } from "./messages.js";
import { failedState } from "./request-failure.js";

/** This module's flag key holding a message's receipt. */
export const RECEIPT_FLAG = "receipt";
/** This module's flag key holding the event id of the decision a card shows. */
export const DECISION_FLAG = "decision";

/** Message tags of the receipts exchange. */
export const RECEIPTS_MSG = Object.freeze({ CHECK: "receipts_check", CHECKED: "receipts_checked" });

/** Receipts per `receipts_check`: the bridge's bound (bridge/wire/audit.py MAX_RECEIPTS_PER_CHECK). */
export const MAX_RECEIPTS_PER_CHECK = 100;

/** What the checker shows. */
export const RECEIPTS_STATUS = Object.freeze({
  IDLE: "idle",
  LOADING: "loading",
  READY: "ready",
  /** No bridge link from this browser: nothing was asked. */
  DOWN: "down",
  /** The bridge refused or did not answer (`error` holds the code). */
  ERROR: "error",
});

/** Receipts under one signature at most: the bridge's bound (bridge/wire/audit.py MAX_RECEIPT_BATCH). */
export const MAX_RECEIPT_BATCH = 32;
/** Hashes in a receipt's audit path at most (bridge/wire/audit.py MAX_RECEIPT_PATH). */
export const MAX_RECEIPT_PATH = 5;
const RECEIPT_FIELDS = Object.freeze(["world_id", "seq", "record_hash", "key_id", "sig"]);
/** A v2 receipt's place in the batch its signature covers (all three, or none: a v1 receipt). */
const BATCH_FIELDS = Object.freeze(["batch_size", "batch_index", "path"]);
/** The length of a SHA-256 hash as base64url without padding (the bridge's bound on a path's hashes). */
const B64_HASH_LENGTH = 43;

/**
 * Whether `receipt`'s batch fields are well formed (docs/protocol.md, Receipts): none of them
 * (v1), or all three within the bridge's bounds (a size of 1..MAX_RECEIPT_BATCH, an index below
 * MAX_RECEIPT_BATCH, a path of at most MAX_RECEIPT_PATH non-empty strings of at most 43
 * characters), so one edited receipt never gets the whole `receipts_check` refused: the bridge
 * answers it `changed`.
 *
 * @param {object} receipt
 * @returns {boolean}
 */
function batchFieldsOk(receipt) {
  const present = BATCH_FIELDS.filter((key) => receipt[key] != null);
  if (present.length === 0) return true;
  if (present.length !== BATCH_FIELDS.length) return false;
  const { batch_size: size, batch_index: index, path } = receipt;
  return Number.isInteger(size) && size >= 1 && size <= MAX_RECEIPT_BATCH
    && Number.isInteger(index) && index >= 0 && index < MAX_RECEIPT_BATCH
    && Array.isArray(path) && path.length <= MAX_RECEIPT_PATH
    && path.every((hash) => typeof hash === "string" && hash.length >= 1 && hash.length <= B64_HASH_LENGTH);
}

/**
 * The receipt a bridge reply carries, as plain data, or null when it has none (or a malformed
 * one). A v2 receipt (signed with its batch) keeps `batch_size`, `batch_index` and `path` too;
 * the bridge checks the signature (`receipts_check`), never the module.
 *
 * @param {object|null|undefined} reply a decoded bridge reply
 * @returns {{world_id: string, seq: number, record_hash: string, key_id: string, sig: string,
 *   batch_size?: number, batch_index?: number, path?: string[]}|null}
 */
export function receiptOf(reply) {
  const receipt = reply?.receipt;
  if (!receipt || typeof receipt !== "object") return null;
  if (!Number.isInteger(receipt.seq) || receipt.seq < 1) return null;
  if (!RECEIPT_FIELDS.every((key) => key === "seq" || (typeof receipt[key] === "string" && receipt[key]))) return null;
  if (!batchFieldsOk(receipt)) return null;
  const kept = Object.fromEntries(RECEIPT_FIELDS.map((key) => [key, receipt[key]]));
  if (receipt.path == null) return kept;
  return { ...kept, batch_size: receipt.batch_size, batch_index: receipt.batch_index, path: [...receipt.path] };
}

/**
 * This module's flags for the ChatMessage posted for `reply`: `flags` plus the decision's
 * `event_id` (under DECISION_FLAG) when the reply names one, and the reply's receipt (under
 * RECEIPT_FLAG) when it carries one.
 *
 * @param {object|null|undefined} reply
 * @param {object} [flags]
 * @returns {object} a new object
 */
export function withRecord(reply, flags = {}) {
  const receipt = receiptOf(reply);
  const eventId = typeof reply?.event_id === "string" && reply.event_id ? reply.event_id : null;
  return { ...flags, ...(eventId ? { [DECISION_FLAG]: eventId } : {}), ...(receipt ? { [RECEIPT_FLAG]: receipt } : {}) };
}

/**
 * @typedef {object} CollectedReceipt
 * @property {string} messageId the ChatMessage holding it
 * @property {object} receipt as receiptOf returns it
 */

/**
 * Every receipt of this world in the chat log, by record number (a message's copy of a receipt
 * another message holds too is listed once).
 *
 * @param {Array<{id: string, flags: Record<string, any>}>} messages the chat log; `flags` = this module's
 * @param {string} worldId `game.world.id`
 * @returns {CollectedReceipt[]} sorted by `seq`
 */
export function collectReceipts(messages, worldId) {
  const seen = new Map();
  for (const message of messages) {
    const receipt = receiptOf({ receipt: message.flags?.[RECEIPT_FLAG] });
    if (!receipt || receipt.world_id !== worldId) continue;
    const key = `${receipt.seq}\n${receipt.record_hash}\n${receipt.sig}`;
    if (!seen.has(key)) seen.set(key, { messageId: message.id, receipt });
  }
  return [...seen.values()].sort((a, b) => a.receipt.seq - b.receipt.seq || (a.messageId < b.messageId ? -1 : a.messageId > b.messageId ? 1 : 0));
}

/**
 * The export file `fate-bridge audit verify --receipts FILE` reads.
 *
 * @param {string} worldId
 * @param {CollectedReceipt[]} collected
 * @returns {{world_id: string, receipts: object[]}}
 */
export function receiptsExport(worldId, collected) {
  return { world_id: worldId, receipts: collected.map((c) => ({ ...c.receipt })) };
}

/**
 * @param {string} queryId
 * @param {object[]} receipts at most MAX_RECEIPTS_PER_CHECK
 * @returns {object} a `receipts_check`
 * @throws {RangeError} for more than MAX_RECEIPTS_PER_CHECK receipts
 */
export function buildReceiptsCheck(queryId, receipts) {
  if (receipts.length > MAX_RECEIPTS_PER_CHECK) throw new RangeError(`at most ${MAX_RECEIPTS_PER_CHECK} receipts per receipts_check`);
  return { type: RECEIPTS_MSG.CHECK, v: PROTOCOL_VERSION, query_id: queryId, receipts: receipts.map((r) => ({ ...r })) };
}

/**
 * @typedef {object} ReceiptsState what the audit window shows; read-only for callers
 * @property {string} status one of RECEIPTS_STATUS
 * @property {string|null} error the BridgeError code when `status` is `error`
 * @property {Array<{seq: number, status: "ok"|"missing"|"changed", messageId: string}>} results
 * @property {{ok: number, missing: number, changed: number}} counts
 */

/**
 * The "Check receipts" action: sends the collected receipts in batches of
 * MAX_RECEIPTS_PER_CHECK, one after another, and gathers each one's answer.
 *
 * @param {object} deps
 * @param {(query: object) => Promise<object>} deps.send resolves to the `receipts_checked` with the
 *   same `query_id`, rejects with a BridgeError (`code`)
 * @param {() => boolean} deps.isReady
 * @param {() => string} deps.newId
 * @returns {{state: ReceiptsState, check(collected: CollectedReceipt[]): Promise<ReceiptsState>}} `check`
 *   never rejects
 */
export function createReceiptsChecker({ send, isReady, newId }) {
  const state = { status: RECEIPTS_STATUS.IDLE, error: null, results: [], counts: { ok: 0, missing: 0, changed: 0 } };
  let run = 0;

  return {
    state,
    async check(collected) {
      run += 1;
      const mine = run;
      if (!isReady()) {
        Object.assign(state, { status: RECEIPTS_STATUS.DOWN, error: null, results: [] });
        return state;
      }
      Object.assign(state, { status: RECEIPTS_STATUS.LOADING, error: null, results: [], counts: { ok: 0, missing: 0, changed: 0 } });
      const results = [];
      for (let start = 0; start < collected.length; start += MAX_RECEIPTS_PER_CHECK) {
        const batch = collected.slice(start, start + MAX_RECEIPTS_PER_CHECK);
        const queryId = newId();
        let reply;
        try {
          reply = await send(buildReceiptsCheck(queryId, batch.map((c) => c.receipt)));
        } catch (error) {
          if (mine !== run) return state;
          Object.assign(state, failedState(error, RECEIPTS_STATUS));
          return state;
        }
        if (mine !== run) return state;
        const answers = reply?.type === RECEIPTS_MSG.CHECKED && reply.query_id === queryId && Array.isArray(reply.results) ? reply.results : null;
        if (!answers || answers.length !== batch.length || !answers.every((a, i) => a?.seq === batch[i].receipt.seq && ["ok", "missing", "changed"].includes(a.status))) {
          Object.assign(state, { status: RECEIPTS_STATUS.ERROR, error: "internal" });
          return state;
        }
        answers.forEach((answer, i) => results.push({ seq: answer.seq, status: answer.status, messageId: batch[i].messageId }));
      }
      const counts = { ok: 0, missing: 0, changed: 0 };
      for (const result of results) counts[result.status] += 1;
      Object.assign(state, { status: RECEIPTS_STATUS.READY, results, counts });
      return state;
    },
  };
}

/**
 * Which card came from which decision, for a ruleset's `api.postCard(reply.card)`: `note(reply)`
 * remembers the event id and receipt (withRecord) of every reply `api.request` resolves with,
 * keyed by its `card` object (held weakly); `flags(card, flags)` adds them to the flags of the
 * ChatMessage posted for the card. A card built by the module gets none.
 *
 * @returns {{note(reply: object): object, flags(card: object, flags?: object): object}} `note`
 *   returns `reply` itself
 */
export function createCardRecords() {
  const byCard = new WeakMap();
  return {
    note(reply) {
      if (reply?.card && typeof reply.card === "object") byCard.set(reply.card, withRecord(reply));
      return reply;
    },
    flags(card, flags = {}) {
      const record = card && typeof card === "object" ? byCard.get(card) : undefined;
      return { ...flags, ...record };
    },
  };
}
