/**
 * The active GM's side of Fate: grade SoHL cards through the bridge, relay spend and choice
 * requests, apply what the bridge decided. Everything Foundry is reached through the injected
 * `foundry` helper object (scripts/foundry.js in the module, a fake in tests).
 *
 * Flags written on ChatMessages (scope `fate-bridge`):
 * - `graded` on a test card: {level, label, eligible, reasons, fate_ml, points: [{point_id, name, charges}]}
 * - `fated` on a test card: written by the bridge's `flag_message` effect
 * - `pending_choice_card` on a test card: id of the choice card waiting for spend/keep (null after)
 * - `card_for` on our own cards: the test card's id; `choice_by` on a pending choice card
 * - `fated_outside` on a test card: the evidence (`raised_level`/`fate_card`) that SoHL fated the
 *   test outside the bridge, recorded by the bridge; `fated_outside_pending` on every message of a
 *   test whose report never got the bridge's answer (the link was lost): `{evidence, message_id,
 *   card_message_id}`, the report to send again at the next link-up (`resendOutside`), null once
 *   answered; `sohl_fate_actor` on a test card that shows
 *   SoHL's own Fate button: its actor's UUID
 * - `test_key`, `test_of`, `test_item` on a test card: the test's identity (card.js testKey), the
 *   id of the test's first message, and the tested item's id. A card naming its item is a fresh
 *   test (`test_of` its own id, even when an earlier test rolled the same); a repost (SoHL names
 *   no item on it) is the test of the latest earlier card with the same key
 *
 * Once fated, always fated (S11): the `fated` flag the bridge writes on one message of a test
 * is copied to every message of that test, now and when a later repost is graded; a spend from any
 * of them is refused `already_fated` before it reaches the bridge. The bridge agrees: a repost's
 * `test_rolled` names its test's first message (`test_of`), and the bridge refuses a second Fate
 * on any message of the test (docs/protocol.md), whichever GM's browser asks.
 *
 * Fated outside the bridge (S11): SoHL's own Fate, run where this module does not close it,
 * shows in what SoHL posts: the test reposted with its level raised on the same die, and SoHL's
 * Fate card (card.js readSohlFateCard). The active GM's flow reports either to the bridge
 * (`fated_outside`), which records it and fates the test; then `fated_outside` (the evidence) is
 * set on every message of the test, which shows "already fated" and refuses a spend
 * `already_fated` before it reaches the bridge. SoHL's Fate card names no test: it counts against
 * the latest test card of its actor posted before it on which SoHL offered its own Fate
 * (`sohl_fate_actor`), our ruling (docs/rules.md, S11).
 *
 * Who sees what: the test's `visibility` is its chat message's own whisper/blind
 * (logic/cards.js visibilityOfMessage); its Fate card, the Critical Success choice and the Fate
 * Test's die (a Roll on the Fate card, thrown once by Dice So Nice) reach the users who read the
 * test (cardAudience `sameAs`). A player may spend or choose only on a test whose content Foundry
 * shows them (logic/cards.js contentVisibleTo): a blind test that carries rolls is the GMs' alone;
 * a SoHL test card carries none, so on Foundry v13 its roller reads it, blind or not.
 */

import { readSohlCard, readSohlFateCard, buildTest } from "./card.js";
import { EVIDENCE, firstGradingEventId } from "./messages.js";
import { buildActor, ITEM_RUNTIME, MODULE_FLAG_SCOPE, SPEND_SEQ_FLAG } from "./actor.js";
import { cardAudience, contentVisibleTo, postCard, visibilityOfMessage } from "../../logic/cards.js";
import { RECEIPT_FLAG, receiptOf, withRecord } from "../../logic/receipts.js";
import { BridgeError } from "../../logic/errors.js";

/** Flag keys of this module. */
export const FLAGS = Object.freeze({
  GRADED: "graded",
  FATED: "fated",
  PENDING_CHOICE_CARD: "pending_choice_card",
  CARD_FOR: "card_for",
  CHOICE_BY: "choice_by",
  TEST_KEY: "test_key",
  TEST_OF: "test_of",
  TEST_ITEM: "test_item",
  FATED_OUTSIDE: "fated_outside",
  OUTSIDE_PENDING: "fated_outside_pending",
  SOHL_FATE_ACTOR: "sohl_fate_actor",
});

/**
 * Codes of a request that never got the bridge's answer (the link stopped or was given up, the
 * request timed out or was not kept): what it asked is asked again at the next link-up. Any other
 * code is the bridge's (or this browser's) answer.
 */
export const NOT_ANSWERED = Object.freeze(["closed", "superseded", "unauthorized", "timeout", "queue_full", "rate_limited", "bridge_down", "not_active_gm"]);

/** Refusal codes that have their own notice; anything else is shown as `internal`. */
export const NOTICE_CODES = Object.freeze([
  "not_eligible",
  "already_fated",
  "no_charges",
  "forbidden",
  "not_found",
  "bridge_down",
  "superseded",
  "timeout",
  "queue_full",
  "unauthorized",
  "rate_limited",
  "bad_card",
  "apply_failed",
  "internal",
  "no_gm",
  "gm_no_answer",
  "gm_unfinished",
  "relay_expired",
  "no_handler",
]);

/**
 * @param {string} code a BridgeError code or module code
 * @returns {string} the localization key of its notice, `FATE_BRIDGE.Error.<code>`
 */
export function noticeKey(code) {
  return `FATE_BRIDGE.Error.${NOTICE_CODES.includes(code) ? code : "internal"}`;
}

/**
 * @param {string} code a BridgeError code or module code
 * @returns {"warn"|"error"} `error` for failures someone must look into (`internal`,
 *   `apply_failed`, and codes without a notice of their own), `warn` for refusals
 */
export function noticeLevel(code) {
  return code === "apply_failed" || noticeKey(code) === noticeKey("internal") ? "error" : "warn";
}

/**
 * The `graded` flag stored on a test card.
 *
 * @param {object} graded the bridge's `test_graded`
 * @param {Array<{point_id: string, name: string, charges: number|null}>} points the snapshot's fate points
 * @returns {{level: number, label: string, eligible: boolean, reasons: string[], fate_ml: number|null,
 *   points: Array<{point_id: string, name: string, charges: number|null}>}} points in the bridge's order
 */
export function gradedFlag(graded, points) {
  const byId = new Map(points.map((point) => [point.point_id, point]));
  return {
    level: graded.level,
    label: graded.label,
    eligible: graded.fate.eligible,
    reasons: [...graded.fate.reasons],
    fate_ml: graded.fate.fate_ml,
    points: graded.fate.points
      .filter((id) => byId.has(id))
      .map((id) => ({ point_id: id, name: byId.get(id).name, charges: byId.get(id).charges })),
  };
}

/**
 * @typedef {object} FoundryHelpers the subset of scripts/foundry.js this flow uses
 * @property {() => string} currentUserId
 * @property {(id: string) => string|null} userName
 * @property {(id: string) => boolean} isGMUser Foundry's `user.isGM` for that user
 * @property {(id: string) => import("../../foundry.js").MessageData|null} messageData plain data of
 *   a ChatMessage; `flags` = this module's flags
 * @property {(key: string, value: unknown) => string[]} messageIdsWithFlag ids of the messages whose
 *   module flag `key` is `value`
 * @property {(key: string) => Array<{id: string, flag: any}>} messagesWithFlag the messages that
 *   carry module flag `key` (any value), with it
 * @property {(uuid: string, options?: {runtime?: object}) => object|null} actorSnapshot see actor.js ActorSnapshot
 * @property {(actorUuid: string, itemId: string) => object|null} itemData plain {id, name, type, system}
 * @property {(messageId: string, key: string, value: unknown) => Promise<void>} setMessageFlag
 * @property {(actorUuid: string, itemId: string, changes: Object<string, unknown>) => Promise<void>} updateActorItem
 * @property {(data: {content: string, speaker: object, whisper: string[], blind: boolean, flags: object}) => Promise<string>} createChatMessage resolves to the new id
 * @property {(messageId: string, data: {content: string, flags: object}) => Promise<void>} updateChatMessage
 * @property {(level: "info"|"warn"|"error", key: string, data?: object) => void} notify
 */

/**
 * Make the GM-side flow.
 *
 * @param {object} deps
 * @param {FoundryHelpers} deps.foundry
 * @param {{isStopped(): boolean, request(message: object): Promise<object>}} deps.connection
 * @param {ReturnType<import("./messages.js").sohlMessageBuilders>} deps.build
 * @param {{parseFromString(text: string, type: string): Document}} deps.domParser
 * @returns {{
 *   gradeMessage(messageId: string, options?: {first?: boolean}): Promise<{ok: true, graded: object} | {ok: false, code: string}>,
 *     (for SoHL's own Fate card: the report of its test, `graded` that test's re-stated grading;
 *     `not_found` when no test card of its actor offered SoHL's Fate; for a repost raised by SoHL's
 *     own Fate whose report the bridge refused: `outsideRefused`, the refusal's code)
 *   requestSpend(request: {messageId: string, pointId: string, userId: string, physical?: number[]|null}): Promise<boolean>,
 *   requestChoice(request: {messageId: string, choice: string, userId: string}): Promise<boolean>,
 * }} `gradeMessage` never throws: a card that is not a SoHL test gives `{ok: false, code: "not_sohl"}`;
 *   `first`: the message's first grading, sent under its one event id (messages.js
 *   firstGradingEventId) so a second browser sending it gets the bridge's stored reply;
 *   `requestSpend` / `requestChoice` resolve true when the bridge's decision was applied, and
 *   reject with a BridgeError whose code says why not (nothing applied then; `apply_failed`: the
 *   decision was made and could not be applied, which the GM is told too). The refusal goes back
 *   as the relay's answer to the one request (logic/relay.js `done`, by `request_id`), so only the
 *   browser window whose click it was shows it: the same player's other window, whose click won,
 *   shows its card and nothing else. It carries its code alone (every browser receives a `done`).
 */
export function createFateFlow({ foundry, connection, build, domParser }) {
  /** A refusal for the asking window: its code only, no detail (see createFateFlow). */
  function refused(code) {
    return new BridgeError(code, `the GM's browser refused this Fate request: ${code}`);
  }

  /** The other messages of the test whose first message is `testOf`, oldest first. */
  function sameTest(messageId, testOf) {
    return testOf ? foundry.messageIdsWithFlag(FLAGS.TEST_OF, testOf).filter((id) => id !== messageId) : [];
  }

  /**
   * Which test a card belongs to: `{testOf, itemId}`. A card naming its item is a test of its own;
   * a repost joins the latest earlier card of the same key (and takes its item).
   */
  function testOf(message, card) {
    const known = message.flags[FLAGS.TEST_OF];
    if (known) return { testOf: known, itemId: card.itemId ?? message.flags[FLAGS.TEST_ITEM] ?? null };
    if (card.itemId || !card.testKey) return { testOf: message.id, itemId: card.itemId };
    const earlier = foundry.messageIdsWithFlag(FLAGS.TEST_KEY, card.testKey)
      .filter((id) => id !== message.id)
      .map((id) => foundry.messageData(id))
      .filter((data) => data?.flags[FLAGS.TEST_OF])
      .at(-1);
    return earlier ? { testOf: earlier.flags[FLAGS.TEST_OF], itemId: earlier.flags[FLAGS.TEST_ITEM] ?? null } : { testOf: message.id, itemId: null };
  }

  /** The first truthy module flag `key` of `messageId` or of another message of its test, or undefined. */
  function flagOfTest(messageId, testOfId, key) {
    for (const id of [messageId, ...sameTest(messageId, testOfId)]) {
      const value = foundry.messageData(id)?.flags[key];
      if (value) return value;
    }
    return undefined;
  }

  /** The `fated` flag of `messageId` or of another message of its test, or undefined. */
  const fatedOfTest = (messageId, testOfId) => flagOfTest(messageId, testOfId, FLAGS.FATED);
  /** The `fated_outside` flag of `messageId` or of another message of its test, or undefined. */
  const outsideOfTest = (messageId, testOfId) => flagOfTest(messageId, testOfId, FLAGS.FATED_OUTSIDE);
  /**
   * The report of SoHL's own Fate on the test still waiting for the bridge (`fated_outside_pending`),
   * or undefined: SoHL fated the test all the same, so it offers no Fate meanwhile.
   */
  const pendingOfTest = (messageId, testOfId) => flagOfTest(messageId, testOfId, FLAGS.OUTSIDE_PENDING);

  /**
   * S11, ours: the repost read into `parts` has the same d100, EML and level modifier as its
   * test's first message and a higher level reported by SoHL: SoHL's own Fate raised it (a GM
   * edit changes the EML or the modifier). The bridge checks the same from what it graded
   * (bridge/rulesets/sohl/decide.py _raised_over_first).
   */
  function raisedOverFirst(parts) {
    if (parts.testOf === parts.messageId || !Number.isInteger(parts.test.reported_level)) return false;
    const first = foundry.messageData(parts.testOf);
    const read = first ? readSohlCard(first.content, domParser) : null;
    const built = read?.ok ? buildTest({ ...read.card, itemId: parts.itemId }, foundry.itemData(parts.actorUuid, parts.itemId)) : null;
    if (!built?.ok || !Number.isInteger(built.test.reported_level)) return false;
    const [later, earlier] = [parts.test, built.test];
    const same = later.roll === earlier.roll && later.eml === earlier.eml && later.level_mod === earlier.level_mod;
    return same && later.reported_level > earlier.reported_level;
  }

  /**
   * Report to the bridge that SoHL fated the test of `messageId` itself; on its answer, flag every
   * message of the test `fated_outside` and store the re-stated grading (with `points`, the actor's
   * Fate Points as graded, or those of the message's `graded` flag). A report that never got the
   * bridge's answer (NOT_ANSWERED) leaves every message of the test `fated_outside_pending`: no
   * Spend Fate is offered on it, and the next link-up sends it again (`resendOutside`) under the
   * same event id (messages.js outsideEventId), before anything else. A refusal by the bridge
   * clears it.
   *
   * @returns {Promise<{ok: true, graded: object} | {ok: false, code: string}>}
   */
  async function reportOutside(messageId, evidence, cardMessageId, points) {
    const testIds = () => [messageId, ...sameTest(messageId, foundry.messageData(messageId)?.flags[FLAGS.TEST_OF] ?? messageId)];
    /** Set (or, with null, clear) the pending report on every message of the test. */
    const markPending = async (value) => {
      for (const id of testIds()) {
        if ((foundry.messageData(id)?.flags[FLAGS.OUTSIDE_PENDING] ?? null) !== value) await foundry.setMessageFlag(id, FLAGS.OUTSIDE_PENDING, value);
      }
    };
    let graded;
    try {
      graded = await connection.request(build.fatedOutside({ messageId, evidence, cardMessageId }));
    } catch (error) {
      const code = error.code ?? "internal";
      await markPending(NOT_ANSWERED.includes(code) ? { evidence, message_id: messageId, card_message_id: cardMessageId ?? null } : null);
      return { ok: false, code };
    }
    const message = foundry.messageData(messageId);
    for (const id of testIds()) {
      if (!foundry.messageData(id)?.flags[FLAGS.FATED_OUTSIDE]) await foundry.setMessageFlag(id, FLAGS.FATED_OUTSIDE, evidence);
    }
    await markPending(null);
    const flag = gradedFlag(graded, points ?? message?.flags[FLAGS.GRADED]?.points ?? []);
    await foundry.setMessageFlag(messageId, FLAGS.GRADED, flag);
    return { ok: true, graded: flag };
  }

  /**
   * SoHL's own Fate card: reported against the latest test card of its actor, posted before it,
   * that offered SoHL's Fate (the card may be graded again later, by a catch-up after a reload:
   * a newer test of the actor is not the one it was spent on).
   */
  function reportFateCard(message, actorUuid) {
    const test = foundry.messageIdsWithFlag(FLAGS.SOHL_FATE_ACTOR, actorUuid, { before: message.id })
      .filter((id) => id !== message.id).at(-1);
    if (!test) return Promise.resolve({ ok: false, code: "not_found" });
    return reportOutside(test, EVIDENCE.FATE_CARD, message.id);
  }

  /**
   * Read the card and snapshot its actor and item: the parts of `test_rolled`. A repost names no
   * item: the item of an earlier message of the same test is used.
   */
  function snapshot(message) {
    const read = readSohlCard(message.content, domParser);
    if (!read) return { ok: false, code: "not_sohl" };
    if (!read.ok || !read.card.actorUuid) return { ok: false, code: "bad_card" };
    const { actorUuid, testKey } = read.card;
    const { testOf: test, itemId } = testOf(message, read.card);
    if (!itemId) return { ok: false, code: "bad_card" };
    const actorData = foundry.actorSnapshot(actorUuid, { runtime: ITEM_RUNTIME });
    const built = buildTest({ ...read.card, itemId }, foundry.itemData(actorUuid, itemId));
    if (!actorData || !built.ok) return { ok: false, code: "bad_card" };
    return {
      ok: true, messageId: message.id, actorUuid, testKey, testOf: test, itemId, actor: buildActor(actorData), test: built.test,
      visibility: visibilityOfMessage(message), sohlOffersFate: read.card.hasFateButton,
    };
  }

  async function gradeMessage(messageId, { first = false } = {}) {
    const message = foundry.messageData(messageId);
    if (!message) return { ok: false, code: "not_found" };
    if (message.flags[FLAGS.CARD_FOR]) return { ok: false, code: "not_sohl" };
    const fateCard = readSohlFateCard(message.content, domParser);
    if (fateCard) return reportFateCard(message, fateCard.actorUuid);
    const parts = snapshot(message);
    if (!parts.ok) return parts;
    let graded;
    try {
      graded = await connection.request(
        build.testRolled({
          messageId, testOf: parts.testOf, actor: parts.actor, test: parts.test, visibility: parts.visibility,
          ...(first ? { eventId: firstGradingEventId(messageId) } : {}),
        }),
      );
    } catch (error) {
      return { ok: false, code: error.code ?? "internal" };
    }
    if (!message.flags[FLAGS.TEST_OF]) {
      if (parts.testKey) await foundry.setMessageFlag(messageId, FLAGS.TEST_KEY, parts.testKey);
      await foundry.setMessageFlag(messageId, FLAGS.TEST_OF, parts.testOf);
      await foundry.setMessageFlag(messageId, FLAGS.TEST_ITEM, parts.itemId);
      if (parts.sohlOffersFate) await foundry.setMessageFlag(messageId, FLAGS.SOHL_FATE_ACTOR, parts.actorUuid);
    }
    // A repost of a fated test is fated: it shows so and offers no second Fate.
    const fated = fatedOfTest(messageId, parts.testOf);
    if (fated && !message.flags[FLAGS.FATED]) await foundry.setMessageFlag(messageId, FLAGS.FATED, fated);
    const outside = outsideOfTest(messageId, parts.testOf);
    if (outside && !message.flags[FLAGS.FATED_OUTSIDE]) await foundry.setMessageFlag(messageId, FLAGS.FATED_OUTSIDE, outside);
    const pending = outside ? undefined : pendingOfTest(messageId, parts.testOf);
    if (pending && !message.flags[FLAGS.OUTSIDE_PENDING]) await foundry.setMessageFlag(messageId, FLAGS.OUTSIDE_PENDING, pending);
    const receipt = receiptOf(graded); // the grading posts no card: SoHL's own message keeps it
    if (receipt) await foundry.setMessageFlag(messageId, RECEIPT_FLAG, receipt);
    // SoHL's own Fate reposted the test with its level raised: the bridge records the test fated
    // before this repost gets its `graded` flag, so it never shows a Spend Fate button meanwhile.
    // (Not while a report of it waits for the link: one outside Fate, one report.)
    let outsideRefused;
    if (!fated && !outside && !pending && raisedOverFirst(parts)) {
      const reported = await reportOutside(messageId, EVIDENCE.RAISED_LEVEL, undefined, parts.actor.fate_points);
      if (reported.ok) return reported;
      outsideRefused = reported.code;
    }
    const flag = gradedFlag(graded, parts.actor.fate_points);
    await foundry.setMessageFlag(messageId, FLAGS.GRADED, flag);
    return outsideRefused ? { ok: true, graded: flag, outsideRefused } : { ok: true, graded: flag };
  }

  /** Resolve the actor an `update_item` effect names: the card's actor (token actors too) or a world actor. */
  function actorUuidFor(actorId, cardActorUuid) {
    return cardActorUuid && cardActorUuid.endsWith(`Actor.${actorId}`) ? cardActorUuid : `Actor.${actorId}`;
  }

  /** Every effect names something that exists: checked before any is applied. */
  function effectsApplicable(effects, cardActorUuid) {
    return effects.every((effect) => {
      if (effect.kind === "update_item") return Boolean(foundry.itemData(actorUuidFor(effect.actor_id, cardActorUuid), effect.item_id));
      if (effect.kind === "flag_message") return Boolean(foundry.messageData(effect.message_id));
      return false;
    });
  }

  /**
   * Apply a `fate_resolved`: effects in order, the Fate Test die (first resolution only), then
   * the card: a new ChatMessage, or the pending choice card's new content when this answers a
   * choice.
   */
  async function applyResolved(resolved, original, cardActorUuid, answersChoice, askerId) {
    if (!effectsApplicable(resolved.effects, cardActorUuid)) return false;
    const siblings = sameTest(original.id, original.flags[FLAGS.TEST_OF]);
    for (const effect of resolved.effects) {
      if (effect.kind === "update_item") {
        // The charges and the bridge's number for this spend land in one update: a later
        // snapshot then tells the bridge which of its spends the item already shows.
        await foundry.updateActorItem(actorUuidFor(effect.actor_id, cardActorUuid), effect.item_id, {
          [effect.path]: effect.value,
          [`flags.${MODULE_FLAG_SCOPE}.${SPEND_SEQ_FLAG}`]: effect.spend_seq,
        });
      } else {
        await foundry.setMessageFlag(effect.message_id, effect.key, effect.value);
        // The fated state follows the test: every message of it shows it.
        if (effect.key === FLAGS.FATED && effect.message_id === original.id) {
          for (const id of siblings) await foundry.setMessageFlag(id, effect.key, effect.value);
        }
      }
    }
    // A Fate card (and its die) is seen by whoever saw the test it fates.
    const audience = cardAudience({ sameAs: original });
    const pendingCard = original.flags[FLAGS.PENDING_CHOICE_CARD];
    if (answersChoice && pendingCard && foundry.messageData(pendingCard)) {
      await foundry.updateChatMessage(pendingCard, { content: resolved.card.html, flags: withRecord(resolved, { [FLAGS.CHOICE_BY]: [] }) });
      await foundry.setMessageFlag(original.id, FLAGS.PENDING_CHOICE_CARD, null);
      return true;
    }
    // The Fate Test's die rides on the card as a Roll (the bridge's `rolls`; its `fate_roll` from an
    // older bridge): Dice So Nice throws it once, as the user who asked, for the card's readers.
    // An answered choice rolls no new die.
    const flags = { [FLAGS.CARD_FOR]: original.id };
    if (resolved.outcome === "choice") flags[FLAGS.CHOICE_BY] = [...resolved.choice_by];
    const dice = !answersChoice && Number.isInteger(resolved.fate_roll) ? [{ faces: 100, results: [resolved.fate_roll] }] : [];
    const cardId = await postCard(foundry, resolved.card, { ...audience, flags: withRecord(resolved, flags), dice, diceUserId: askerId });
    if (resolved.outcome === "choice") await foundry.setMessageFlag(original.id, FLAGS.PENDING_CHOICE_CARD, cardId);
    return true;
  }

  /** Shared path of spend and choice: checks, the bridge request, the apply; a refusal is thrown. */
  async function decide(messageId, userId, makeRequest, { regrade }) {
    // A link that is merely down keeps the request until it is back (nothing lost in an outage).
    if (connection.isStopped()) throw refused("bridge_down");
    const original = foundry.messageData(messageId);
    if (!original) throw refused("not_found");
    // A player spends or chooses only on a result Foundry shows them (a GM on any).
    if (!foundry.isGMUser(userId) && !contentVisibleTo(original, userId)) throw refused("forbidden");
    const read = readSohlCard(original.content, domParser);
    const cardActorUuid = read?.ok ? read.card.actorUuid : null;
    if (regrade) {
      const graded = await gradeMessage(messageId);
      if (!graded.ok) throw refused(graded.code === "not_sohl" ? "bad_card" : graded.code);
      // Fated once in total, whichever of the test's messages the click comes from, and never
      // after SoHL fated it itself (S11).
      const testOfId = foundry.messageData(messageId)?.flags[FLAGS.TEST_OF];
      if (fatedOfTest(messageId, testOfId) || outsideOfTest(messageId, testOfId) || pendingOfTest(messageId, testOfId)) throw refused("already_fated");
    }
    let resolved;
    try {
      resolved = await connection.request(makeRequest({ userName: foundry.userName(userId) ?? undefined, userIsGM: foundry.isGMUser(userId) }));
    } catch (error) {
      throw refused(error.code ?? "internal");
    }
    const applied = await applyResolved(resolved, foundry.messageData(messageId) ?? original, cardActorUuid, !regrade, userId);
    if (!applied) {
      if (userId !== foundry.currentUserId()) foundry.notify("error", noticeKey("apply_failed"));
      throw refused("apply_failed");
    }
    return true;
  }

  /**
   * Spends on one test run one after another: clicks on a test and on its repost at once give one
   * Fate Test, the later click then refused `already_fated` here, without a bridge round trip. Keyed by the test's first message (`test_of`, known once graded).
   */
  const spendsByTest = new Map();
  function oneAtATime(messageId, run) {
    const key = foundry.messageData(messageId)?.flags[FLAGS.TEST_OF] ?? messageId;
    const done = (spendsByTest.get(key) ?? Promise.resolve()).then(run);
    const tail = done.catch(() => {});
    spendsByTest.set(key, tail);
    tail.then(() => {
      if (spendsByTest.get(key) === tail) spendsByTest.delete(key);
    });
    return done;
  }

  /**
   * Send again every report of SoHL's own Fate that never got the bridge's answer (flag
   * `fated_outside_pending`, which names the report's message), one after the other, each once.
   *
   * @returns {Promise<Array<{messageId: string, ok: boolean, code?: string}>>} each report's outcome
   */
  async function resendOutside() {
    const outcomes = [];
    const done = new Set();
    for (const { flag } of foundry.messagesWithFlag(FLAGS.OUTSIDE_PENDING)) {
      // Every message of the test carries it; it names the message the report was made for.
      if (!flag || typeof flag.message_id !== "string" || !Object.values(EVIDENCE).includes(flag.evidence)) continue;
      const key = JSON.stringify([flag.message_id, flag.evidence, flag.card_message_id ?? null]);
      if (done.has(key)) continue;
      done.add(key);
      const outcome = await reportOutside(flag.message_id, flag.evidence, flag.card_message_id ?? undefined);
      outcomes.push({ messageId: flag.message_id, ...(outcome.ok ? { ok: true } : { ok: false, code: outcome.code }) });
    }
    return outcomes;
  }

  return {
    gradeMessage,
    resendOutside,
    requestSpend: ({ messageId, pointId, userId, physical = null }) =>
      oneAtATime(messageId, () => decide(messageId, userId, (user) => build.fateSpend({ messageId, pointId, userId, physical, ...user }), { regrade: true })),
    requestChoice: ({ messageId, choice, userId }) =>
      decide(messageId, userId, (user) => build.fateChoice({ messageId, choice, userId, ...user }), { regrade: false }),
  };
}
