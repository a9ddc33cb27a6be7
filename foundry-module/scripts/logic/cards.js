/**
 * Posting a bridge `card {title, html, ruleset, speaker_actor_id, speaker_alias}` (docs/protocol.md)
 * as a new ChatMessage: the one way SoHL's Fate flow and every ruleset do it, and who sees it
 * (`cardAudience`, the one audience rule). The bridge escapes every outside string in `html`, so
 * it is posted as the message content as is.
 */

import { rollsForCard } from "./dice-trust.js";
import { rollData } from "./dice.js";

/** This module's flag naming the user whose Dice So Nice appearance a card's dice take (foundry.js). */
export const DICE_USER_FLAG = "dice_user";

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
 * The visibility of a mode nobody here knows: the asker's own. Foundry v14 keeps message modes
 * in a registry that systems and modules extend (`CONFIG.ChatMessage.modes`), so a mode this
 * module has no name for may be anything but public; its result is shown to the asker only and
 * never reaches the stream overlay.
 */
export const UNKNOWN_MODE_VISIBILITY = "self";

/**
 * @param {unknown} value what a client sent as a visibility
 * @returns {string} `value` when it is one of VISIBILITIES, else UNKNOWN_MODE_VISIBILITY (`self`)
 */
export function checkedVisibility(value) {
  return VISIBILITIES.includes(value) ? value : UNKNOWN_MODE_VISIBILITY;
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
 * Whether `userId` reads a chat message's content, by Foundry's own getters (client
 * `ChatMessage#visible` / `#isContentVisible`, client/documents/chat-message.mjs of v13; v14 keeps
 * both and adds `_getHiddenContent()`, the HTML shown *instead* when the content is hidden, per the
 * v14 typings "Return the HTML content to display for this message when its content is not visible
 * to the current user"):
 * - a message with rolls (`isRoll`): everyone when not whispered; else the users on its whisper
 *   list, and its author unless it is blind. Everyone else sees Foundry's "rolled privately" stub;
 * - a message without rolls: everyone when not whispered; else its author and the users on the
 *   whisper list. `blind` plays no part: a blind SoHL test (SoHL posts no Rolls on its test cards)
 *   shows its full result to the player who rolled it.
 * A GM not on the whisper list does not read it either (Foundry has no GM exception here).
 *
 * @param {{whisper?: string[], blind?: boolean, authorId?: string|null, isRoll?: boolean}} message
 *   plain message data (scripts/foundry.js messageData)
 * @param {string} userId
 * @returns {boolean}
 */
export function contentVisibleTo({ whisper = [], blind = false, authorId = null, isRoll = false }, userId) {
  if (whisper.length === 0) return true;
  if (whisper.includes(userId)) return true;
  return authorId !== null && authorId === userId && !(isRoll && blind);
}

/**
 * Who sees a card, as `{whisper, blind, authorId?}` for postCard. Either
 * - by Foundry's roll modes (`visibility`, `askerId`, `gmIds`): `public` everyone; `gm` (gmroll)
 *   every GM and the asker; `blind` (blindroll) every GM only, blind (the asker does not see the
 *   result); `self` (selfroll) the asker only, and the asker is the card's author. Any other
 *   visibility is `self` (UNKNOWN_MODE_VISIBILITY);
 * - or as an existing message (`sameAs`): whoever reads its content (contentVisibleTo). Its
 *   whisper list plus its author when the author reads it, since Foundry shows a whisper to its
 *   author and a card posted by the GM's browser has another author: a private-GM test's card
 *   reaches the GMs and the player who posted the test; a public test's card everyone; a blind
 *   test with rolls (hidden from its author) the GMs only, blind; a blind test without rolls (a
 *   SoHL test card: its author reads it) the GMs and its author; a self test's card (whispered to
 *   its author alone) its roller only, the roller its author.
 *
 * Why the author: Foundry shows a whisper to the users on its list *and to its author*
 * (`ChatMessage#visible` / `#isContentVisible`, client/documents/chat-message.mjs of v13). The
 * GM's browser posts every card; were it the author of a self card, the GM would read it and Dice
 * So Nice would throw its dice on the GM's screen. So a self card is created with the asker as its
 * `author`, which Foundry lets a GM do (common/documents/chat-message.mjs of v13,
 * `BaseChatMessage.#canCreate`: "if ( user.isGM ) return true"; a player "cannot impersonate a
 * different user"). The GM's browser then holds the message like every client does (Foundry
 * sends every chat message to every client) but shows only Foundry's "rolled privately" line for
 * a card with Rolls, and nothing for one without.
 *
 * @param {{visibility?: string, askerId?: string, gmIds?: string[]} |
 *   {sameAs: {whisper: string[], blind: boolean, authorId?: string|null}}} rule
 * @returns {{whisper: string[], blind: boolean, authorId?: string}} `authorId` only for a self
 *   card: the user the card is posted as (cardMessageData)
 */
export function cardAudience(rule) {
  if (rule.sameAs) {
    const { whisper = [], blind = false, authorId = null } = rule.sameAs;
    if (whisper.length === 0) return { whisper: [], blind: false };
    if (!authorId || !contentVisibleTo(rule.sameAs, authorId)) return { whisper: [...new Set(whisper)], blind: Boolean(blind) };
    if (visibilityOfMessage(rule.sameAs) === "self") return { whisper: [authorId], blind: false, authorId };
    return { whisper: [...new Set([...whisper, authorId])], blind: false };
  }
  const { visibility, askerId, gmIds = [] } = rule;
  switch (visibility) {
    case "gm": return { whisper: [...new Set([...gmIds, askerId])], blind: false };
    case "blind": return { whisper: [...new Set(gmIds)], blind: true };
    case "public": return { whisper: [], blind: false };
    case "self":
    default: return { whisper: [askerId], blind: false, authorId: askerId };
  }
}

/**
 * What a relayed request's answer may carry back to its asker. Foundry's server hands a module
 * socket payload (`game.socket.emit("module.<id>", ...)`) to every other connected client, so the
 * relay's `done` reaches every browser, whatever its `to` says (logic/relay.js): a result that
 * only the card's readers may see must not ride on it. The card itself carries the answer, to its
 * own audience (Foundry's whisper rules).
 *
 * @param {string} visibility the answer's wire visibility (`public`, `gm`, `blind`, `self`)
 * @param {object} result what the handler would return
 * @returns {object} `result` for a public answer, else only `{visibility}` (nothing private)
 */
export function relayedResult(visibility, result) {
  const seen = checkedVisibility(visibility); // an unknown visibility is the asker's own, as its card is (cardAudience)
  return seen === "public" ? result : { visibility: seen };
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
 * Its dice ride on the message as real Rolls, and nowhere else: Dice So Nice animates every new
 * ChatMessage that carries rolls with dice, on every client whose user reads its content
 * (module/main.js `createChatMessage` -> `shouldInterceptMessage`, `isContentVisible`; Dice So Nice
 * 5.1.6), so a die is thrown once, for exactly the card's readers (the GM whose browser posts
 * it only when the GM reads it: not on a self card, whose author is the asker), and never thrown
 * a second time by a `showForRoll` of ours. The rolls are the bridge's
 * (`reply.rolls`, logic/dice-trust.js rollsForCard); `dice` stands in only for a reply without
 * them (an older bridge).
 *
 * @param {BridgeCard} card
 * @param {{whisper?: string[], blind?: boolean, authorId?: string|null, flags?: object,
 *   dice?: import("./dice.js").DiceGroup[], diceUserId?: string|null}} [options] who sees it (the
 *   original test's whisper list and blind flag, by default public; cardAudience), the user it is
 *   posted as (`authorId`, a self card's asker: cardAudience; by default the posting user), this
 *   module's flags on it, the dice the ruleset knows the reply rolled, and the user who asked
 *   (their Dice So Nice appearance: flag DICE_USER_FLAG, read by scripts/foundry.js installDiceAppearance)
 * @returns {{content: string, speaker: {actor: string|null, alias: string|undefined}, whisper: string[],
 *   blind: boolean, flags: object, author?: string, rolls?: object[]}} what scripts/foundry.js
 *   `createChatMessage` takes; `author` when `authorId` was given, `rolls` when the card's reply rolled dice
 * @throws {TypeError} when `card.html` is not a string or `authorId` is given and not a non-empty
 *   string, or (from rollData) for malformed `dice`
 */
export function cardMessageData(card, { whisper = [], blind = false, authorId = null, flags = {}, dice = [], diceUserId = null } = {}) {
  if (typeof card?.html !== "string") throw new TypeError("a bridge card needs its html as a string");
  if (authorId !== null && (typeof authorId !== "string" || !authorId)) throw new TypeError("a card's authorId must be a user id (a non-empty string) or null");
  const bridgeRolls = rollsForCard(card); // the bridge's dice for this card, as real Rolls
  const rolls = bridgeRolls.length ? bridgeRolls : dice.length ? [rollData(dice)] : [];
  return {
    content: card.html,
    speaker: { actor: card.speaker_actor_id ?? null, alias: card.speaker_alias ?? undefined },
    whisper: [...whisper],
    blind: Boolean(blind),
    flags: { ...flags, ...(rolls.length && diceUserId ? { [DICE_USER_FLAG]: diceUserId } : {}) },
    ...(authorId !== null ? { author: authorId } : {}),
    ...(rolls.length ? { rolls } : {}),
  };
}

/**
 * Post `card` as a new ChatMessage (with its dice as Rolls: cardMessageData).
 *
 * @param {{createChatMessage(data: object): Promise<string>}} foundry scripts/foundry.js
 * @param {BridgeCard} card
 * @param {Parameters<typeof cardMessageData>[1]} [options] see cardMessageData
 * @returns {Promise<string>} the new message's id
 * @throws {TypeError} (as a rejection) when `card.html` is not a string
 */
export async function postCard(foundry, card, options) {
  return foundry.createChatMessage(cardMessageData(card, options));
}
