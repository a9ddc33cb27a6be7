/**
 * Posting a bridge `card {title, html, ruleset, speaker_actor_id, speaker_alias}` (docs/protocol.md)
 * as a new ChatMessage: the one way SoHL's Fate flow and every ruleset do it. The bridge escapes
 * every outside string in `html`, so it is posted as the message content as is.
 */

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
 *   blind: boolean, flags: object}} what scripts/foundry.js `createChatMessage` takes
 * @throws {TypeError} when `card.html` is not a string
 */
export function cardMessageData(card, { whisper = [], blind = false, flags = {} } = {}) {
  if (typeof card?.html !== "string") throw new TypeError("a bridge card needs its html as a string");
  return {
    content: card.html,
    speaker: { actor: card.speaker_actor_id ?? null, alias: card.speaker_alias ?? undefined },
    whisper: [...whisper],
    blind: Boolean(blind),
    flags: { ...flags },
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
