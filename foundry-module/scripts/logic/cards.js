/**
 * Posting a bridge `card {title, html, ruleset, speaker_actor_id, speaker_alias}` (docs/protocol.md)
 * as a new ChatMessage: the one way SoHL's Fate flow and every ruleset do it, and who sees it
 * (`cardAudience`, the one audience rule). The bridge escapes every outside string in `html`, so
 * it is posted as the message content as is.
 */

import { rollsForCard } from "./dice-trust.js";

/** The wire's `visibility` values, as the dialogs offer them. */
export const VISIBILITIES = Object.freeze(["public", "gm", "blind", "self"]);

/**
 * Foundry's roll modes -> wire `visibility`: v13's `core.rollMode` names (also what SoHL writes on
 * its cards) and v14's `core.messageMode` names (`ic`, "public as character", is public).
 */
export const VISIBILITY_BY_ROLL_MODE = Object.freeze({
  publicroll: "public",
  gmroll: "gm",
  blindroll: "blind",
  selfroll: "self",
  public: "public",
  gm: "gm",
  blind: "blind",
  self: "self",
  ic: "public",
});

/** Words a chat command takes for its visibility: the wire's own and Foundry's v13 roll mode names. */
const VISIBILITY_WORDS = Object.freeze(Object.fromEntries(
  Object.entries(VISIBILITY_BY_ROLL_MODE).filter(([word]) => word !== "ic"),
));

/**
 * @param {unknown} mode a Foundry roll or message mode (`gmroll`, `gm`, ...)
 * @returns {string|null} its wire `visibility`, or null for an unknown or missing mode
 */
export function visibilityOfRollMode(mode) {
  return typeof mode === "string" && Object.hasOwn(VISIBILITY_BY_ROLL_MODE, mode) ? VISIBILITY_BY_ROLL_MODE[mode] : null;
}

/**
 * @param {string} word a word typed in a chat command, any case
 * @returns {string|null} the visibility it names (`gm`, `gmroll` -> `gm`), or null when it names none
 */
export function visibilityWord(word) {
  const key = String(word ?? "").toLowerCase();
  return Object.hasOwn(VISIBILITY_WORDS, key) ? VISIBILITY_WORDS[key] : null;
}

/**
 * @param {unknown} value what a client sent as a visibility
 * @returns {string} `value` when it is one of VISIBILITIES, else `public`
 */
export function checkedVisibility(value) {
  return VISIBILITIES.includes(value) ? value : "public";
}

/**
 * Who can read a chat message, by Foundry's own rule (client `ChatMessage#visible` and
 * `#isContentVisible`, foundry/client/documents/chat-message.mjs; the v13/v14 typings say the same:
 * "Messages may not be visible if they are private whispers"): an empty `whisper` list is seen by
 * everyone; otherwise by the users on the list and by its author, except that a `blind` message's
 * content is hidden from its author. So:
 * - no whisper -> `public` (the only audience every player sees);
 * - whisper and blind -> `blind` (Foundry's blindroll: the GMs on the list only);
 * - whisper naming only the author -> `self` (selfroll);
 * - any other whisper -> `gm` (gmroll: the GMs on the list and the author).
 * The visibility comes from the message Foundry stored, never from a roll mode a system writes in
 * its own data (SoHL's `rollMode` in `data-scope` names the dialog's choice, not what Foundry applied).
 *
 * @param {{whisper: string[], blind: boolean, authorId?: string|null}} message plain message data
 *   (scripts/foundry.js messageData)
 * @returns {"public"|"gm"|"blind"|"self"}
 */
export function visibilityOfMessage({ whisper = [], blind = false, authorId = null }) {
  if (whisper.length === 0) return "public";
  if (blind) return "blind";
  return whisper.every((id) => id === authorId) ? "self" : "gm";
}

/**
 * Who sees a card, as `{whisper, blind}` for postCard. Either
 * - by Foundry's roll modes (`visibility`, `askerId`, `gmIds`): `public` everyone; `gm` (gmroll)
 *   every GM and the asker; `blind` (blindroll) every GM only, blind (the asker does not see the
 *   result); `self` (selfroll) the asker only (and the GM posting it, its author). Any other
 *   visibility is public;
 * - or as an existing message (`sameAs`): whoever reads it (visibilityOfMessage's rule). Its
 *   whisper list plus its author when not blind, since Foundry shows a whisper to its author and a
 *   card posted by the GM's browser has another author: a private-GM test's card reaches the GMs
 *   and the player who posted the test; a blind test's card the GMs only (blind); a self test's
 *   card its roller; a public test's card everyone.
 *
 * @param {{visibility?: string, askerId?: string, gmIds?: string[]} |
 *   {sameAs: {whisper: string[], blind: boolean, authorId?: string|null}}} rule
 * @returns {{whisper: string[], blind: boolean}}
 */
export function cardAudience(rule) {
  if (rule.sameAs) {
    const { whisper = [], blind = false, authorId = null } = rule.sameAs;
    if (whisper.length === 0) return { whisper: [], blind: false };
    if (blind || !authorId) return { whisper: [...new Set(whisper)], blind: Boolean(blind) };
    return { whisper: [...new Set([...whisper, authorId])], blind: false };
  }
  const { visibility, askerId, gmIds = [] } = rule;
  switch (visibility) {
    case "gm": return { whisper: [...new Set([...gmIds, askerId])], blind: false };
    case "blind": return { whisper: [...new Set(gmIds)], blind: true };
    case "self": return { whisper: [askerId], blind: false };
    default: return { whisper: [], blind: false };
  }
}

/**
 * @typedef {object} BridgeCard
 * @property {string} title
 * @property {string} html the card's content, escaped by the bridge
 * @property {string} ruleset the ruleset that made it
 * @property {string|null} [speaker_actor_id] the ChatMessage speaker's actor id
 * @property {string|null} [speaker_alias] the speaker's shown name
 */

/**
 * The data of the ChatMessage that shows `card`.
 *
 * @param {BridgeCard} card
 * @param {{whisper?: string[], blind?: boolean, flags?: object}} [options] who sees it (the
 *   original test's whisper list and blind flag, by default public) and this module's flags on it
 * @returns {{content: string, speaker: {actor: string|null, alias: string|undefined}, whisper: string[],
 *   blind: boolean, flags: object, rolls?: object[]}} what scripts/foundry.js `createChatMessage` takes;
 *   `rolls` when the card's reply rolled dice (logic/dice-trust.js rollsForCard)
 * @throws {TypeError} when `card.html` is not a string
 */
export function cardMessageData(card, { whisper = [], blind = false, flags = {} } = {}) {
  if (typeof card?.html !== "string") throw new TypeError("a bridge card needs its html as a string");
  const rolls = rollsForCard(card); // the bridge's dice for this card, as real Rolls (issue 19)
  return {
    content: card.html,
    speaker: { actor: card.speaker_actor_id ?? null, alias: card.speaker_alias ?? undefined },
    whisper: [...whisper],
    blind: Boolean(blind),
    flags: { ...flags },
    ...(rolls.length ? { rolls } : {}),
  };
}

/**
 * Post `card` as a new ChatMessage with no roll attached.
 *
 * @param {{createChatMessage(data: object): Promise<string>}} foundry scripts/foundry.js
 * @param {BridgeCard} card
 * @param {{whisper?: string[], blind?: boolean, flags?: object}} [options] see cardMessageData
 * @returns {Promise<string>} the new message's id
 * @throws {TypeError} (as a rejection) when `card.html` is not a string
 */
export async function postCard(foundry, card, options) {
  return foundry.createChatMessage(cardMessageData(card, options));
}
