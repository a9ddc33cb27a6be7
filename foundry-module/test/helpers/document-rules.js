/**
 * Rules of Foundry documents as plain functions over plain data, shared by the fakes that must
 * agree on them: the fake Foundry server (foundry-server.js), the fake client in a real page
 * (foundry-page.js) and the one-process fake (fake-foundry.js). Runs in Node and in the browser.
 *
 * Who sees a ChatMessage, as Foundry v13's client getters decide it (client/documents/chat-message.mjs, v13):
 * - `visible`: a message with no whisper list is seen by everyone; a whispered message with rolls
 *   too (others get Foundry's "rolled privately" stub); a whispered one without rolls by its author
 *   and the users on its whisper list (blind plays no part).
 * - `isContentVisible`: for a roll, the users on the whisper list, and the author unless blind;
 *   otherwise `visible`.
 *
 * @typedef {{whisper: string[], blind: boolean, authorId: string|null, isRoll: boolean}} Audience
 */

/**
 * @param {Audience} message
 * @param {string} userId
 * @returns {boolean} the message is in that user's chat log
 */
export function messageVisibleTo(message, userId) {
  if (!message.whisper.length || message.isRoll) return true;
  return message.authorId === userId || message.whisper.includes(userId);
}

/**
 * @param {Audience} message
 * @param {string} userId
 * @returns {boolean} that user reads the message's content (not the "rolled privately" stub)
 */
export function messageContentVisibleTo(message, userId) {
  if (!message.isRoll) return messageVisibleTo(message, userId);
  if (!message.whisper.length) return true;
  return message.whisper.includes(userId) || (message.authorId === userId && !message.blind);
}

const isPlainObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);

/**
 * Apply a document update to `target` in place, as Foundry's `Document#update` merges its
 * changes (`foundry.utils.mergeObject` after `expandObject`): a dotted key ("system.charges.value")
 * names a nested field; an object merges into the object there, key by key; anything else
 * (arrays, null, values) replaces what was there.
 *
 * @param {object} target the document's data
 * @param {object} changes the update's data
 * @returns {object} `target`
 */
export function applyUpdate(target, changes) {
  for (const [key, value] of Object.entries(changes)) {
    const path = key.split(".");
    let node = target;
    for (const part of path.slice(0, -1)) node = isPlainObject(node[part]) ? node[part] : (node[part] = {});
    const last = path.at(-1);
    if (isPlainObject(value) && isPlainObject(node[last])) applyUpdate(node[last], value);
    else node[last] = structuredClone(value);
  }
  return target;
}
