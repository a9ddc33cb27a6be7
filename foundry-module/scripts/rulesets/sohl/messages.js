/**
 * SoHL's requests to the bridge (wire protocol v1, docs/protocol.md "sohl", bridge/rulesets/sohl/wire.py):
 * `test_rolled`, `fate_spend`, `fate_choice`, and the S12 option sent in the link's `settings`.
 * Each builder returns a plain object ready for JSON.stringify, always with `v: 1`; event ids
 * come from an injected generator so tests can predict them.
 */

import { FATE_OPTIONS, PROTOCOL_VERSION } from "../../logic/messages.js";

/** SoHL's message tags. */
export const SOHL_MSG = Object.freeze({
  TEST_ROLLED: "test_rolled",
  TEST_GRADED: "test_graded",
  FATE_SPEND: "fate_spend",
  FATE_CHOICE: "fate_choice",
  FATE_RESOLVED: "fate_resolved",
  FATED_OUTSIDE: "fated_outside",
});

/**
 * The `event_id` of a message's first grading (its `test_rolled` when it is posted, or caught up
 * later by whichever GM's browser holds the link): one per message, so when two browsers send it
 * (a hand-over while it was in flight) the bridge answers the second with its stored reply and
 * grades the test once. A later grading of the same message (before a spend, with a fresh
 * snapshot) takes a new event id.
 *
 * @param {string} messageId the ChatMessage's id (16 letters and digits)
 * @returns {string} at most 128 characters
 */
export function firstGradingEventId(messageId) {
  return `grade-${messageId}`;
}

/**
 * The event id of a `fated_outside` report: one per piece of evidence (SoHL's Fate card, or the
 * repost that shows the raised level), so the same evidence reported again, after a reload or by
 * the next link holder, gets the bridge's stored reply and writes no second record.
 *
 * @param {string} evidence an EVIDENCE value
 * @param {string} shownBy the ChatMessage id that shows it (the Fate card's for `fate_card`, the
 *   repost's for `raised_level`; the bridge's `shown_by`)
 * @returns {string} at most 128 characters
 */
export function outsideEventId(evidence, shownBy) {
  return `outside-${evidence}-${shownBy}`;
}
/** What SoHL posted when it fated a test itself (bridge/rulesets/sohl/wire.py FatedOutside). */
export const EVIDENCE = Object.freeze({ RAISED_LEVEL: "raised_level", FATE_CARD: "fate_card" });

/** The two answers to a Fate Test critical success (rule S9). */
export const CHOICES = Object.freeze(["spend", "keep"]);

/**
 * Make SoHL's message builders.
 *
 * @param {() => string} newEventId returns a fresh, world-unique event id (at most 128 chars)
 * @returns {{
 *   testRolled: (p: {messageId: string, testOf?: string, actor: object, test: object, visibility: string, eventId?: string}) => object,
 *   fateSpend: (p: {messageId: string, pointId: string, userId: string, userName?: string, userIsGM: boolean, physical?: number[]|null}) => object,
 *     (`physical`: the roller's real Fate Test d100)
 *   fateChoice: (p: {messageId: string, choice: string, userId: string, userName?: string, userIsGM: boolean}) => object,
 *   fatedOutside: (p: {messageId: string, evidence: string, cardMessageId?: string}) => object,
 *     (SoHL fated the test of `messageId` itself; `cardMessageId`: SoHL's Fate card, for `fate_card`;
 *     its event id is outsideEventId's, the same for the same evidence)
 * }}
 * `userIsGM` is Foundry's `user.isGM` for `userId` (the bridge lets a GM act for any actor and
 * answer any choice). `testOf` is the test's first message when `messageId` is a later one (the
 * GM's edit repost): sent as `test_of`, left out when absent or equal to `messageId`. `eventId` (testRolled) replaces the fresh event
 * id (firstGradingEventId). `fateChoice` throws a TypeError for a choice outside CHOICES, `fatedOutside` for an evidence
 * outside EVIDENCE.
 */
export function sohlMessageBuilders(newEventId) {
  const withName = (message, userName) => (userName ? { ...message, user_name: userName } : message);
  return {
    testRolled: ({ messageId, testOf, actor, test, visibility, eventId }) => ({
      type: SOHL_MSG.TEST_ROLLED,
      v: PROTOCOL_VERSION,
      event_id: eventId ?? newEventId(),
      ruleset: "sohl",
      message_id: messageId,
      ...(testOf && testOf !== messageId ? { test_of: testOf } : {}),
      actor,
      test,
      visibility,
    }),
    fateSpend: ({ messageId, pointId, userId, userName, userIsGM, physical = null }) =>
      withName(
        {
          type: SOHL_MSG.FATE_SPEND, v: PROTOCOL_VERSION, event_id: newEventId(), message_id: messageId, point_id: pointId, user_id: userId,
          user_is_gm: userIsGM === true, ...(physical ? { physical } : {}),
        },
        userName,
      ),
    fatedOutside: ({ messageId, evidence, cardMessageId }) => {
      if (!Object.values(EVIDENCE).includes(evidence)) {
        throw new TypeError(`evidence ${JSON.stringify(evidence)} is not one of ${Object.values(EVIDENCE).join(", ")}`);
      }
      return {
        type: SOHL_MSG.FATED_OUTSIDE, v: PROTOCOL_VERSION, event_id: outsideEventId(evidence, cardMessageId ?? messageId),
        message_id: messageId, evidence,
        ...(cardMessageId ? { card_message_id: cardMessageId } : {}),
      };
    },
    fateChoice: ({ messageId, choice, userId, userName, userIsGM }) => {
      if (!CHOICES.includes(choice)) {
        throw new TypeError(`choice ${JSON.stringify(choice)} is not one of ${CHOICES.join(", ")}`);
      }
      return withName(
        {
          type: SOHL_MSG.FATE_CHOICE, v: PROTOCOL_VERSION, event_id: newEventId(), message_id: messageId, choice, user_id: userId,
          user_is_gm: userIsGM === true,
        },
        userName,
      );
    },
  };
}

/** SoHL's world setting `sohl.optionFate` -> the bridge's fate option. */
export const SOHL_FATE_OPTION = Object.freeze({ none: "off", pconly: "pc_only", everyone: "everyone" });

/**
 * The fate option to send in `settings` (rule S12).
 *
 * @param {string} moduleOption this module's `fateOption` setting: `system`, `everyone`, `pc_only` or `off`
 * @param {unknown} sohlOption SoHL's `optionFate` world setting (read only for `system`)
 * @returns {"everyone"|"pc_only"|"off"} `system` follows SoHL (`none` -> off, `pconly` -> pc_only,
 *   `everyone` -> everyone, anything else -> everyone, the bridge's default)
 */
export function resolveFateOption(moduleOption, sohlOption) {
  if (FATE_OPTIONS.includes(moduleOption)) return moduleOption;
  return Object.hasOwn(SOHL_FATE_OPTION, sohlOption) ? SOHL_FATE_OPTION[sohlOption] : "everyone";
}
