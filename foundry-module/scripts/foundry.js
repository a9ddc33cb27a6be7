/**
 * The only file that touches Foundry globals (`game`, `Hooks`, `ui`, `ChatMessage`, `Roll`,
 * `foundry`, `fromUuidSync`, `canvas`) and the browser's `WebSocket` / `DOMParser`. Each helper is small,
 * named for what it does, and returns plain data, so scripts/logic/ and scripts/main.js never see
 * a Foundry object. Globals are read when a helper runs (never at import), so tests can install
 * fresh fakes per test.
 */

import { DICE_USER_FLAG, UNKNOWN_MODE_VISIBILITY, visibilityOfRollMode } from "./logic/cards.js";
import { socketDelivery } from "./logic/relay.js";

/** Module id, flag scope and socket name suffix. */
export const MODULE_ID = "fate-bridge";
const SOCKET = `module.${MODULE_ID}`;
/** Class put on a chat message the audit window points at, and how long it stays. */
const HIGHLIGHT_CLASS = "fate-bridge-highlight";
const HIGHLIGHT_MS = 3_000;
/** Foundry v13+'s chat notification pane, which shows copies of recent messages. */
const NOTIFICATIONS_PANE = "#chat-notifications";

/**
 * Register this module's own world setting, the bridge address.
 *
 * @param {{onBridgeChange: () => void}} callbacks run when the bridge address changes
 * @param {{defaultUrl: string}} options
 */
export function registerWorldSettings({ onBridgeChange }, { defaultUrl }) {
  game.settings.register(MODULE_ID, "bridgeUrl", {
    name: "FATE_BRIDGE.Settings.BridgeUrl.Name",
    hint: "FATE_BRIDGE.Settings.BridgeUrl.Hint",
    scope: "world",
    config: true,
    type: String,
    default: defaultUrl,
    onChange: onBridgeChange,
  });
}

/**
 * Register a world setting of this module with a fixed set of string values, shown in the
 * settings window (a ruleset's option; call during `init`).
 *
 * @param {string} key the setting's key in this module's scope
 * @param {{name: string, hint: string, choices: Record<string, string>, default: string,
 *   onChange: (value: string) => void}} spec localization keys, value -> label key, default value
 */
export function registerChoiceSetting(key, { name, hint, choices, default: initial, onChange }) {
  game.settings.register(MODULE_ID, key, { name, hint, scope: "world", config: true, type: String, choices, default: initial, onChange });
}

/**
 * Register a world setting of this module that the settings window does not show: data the
 * active GM's browser keeps for every client (e.g. the world's dice settings, the dice session's
 * planned end). Foundry lets GMs alone write world settings (`ClientSettings#set`, scope world).
 *
 * @param {string} key the setting's key in this module's scope
 * @param {unknown} initial its default value (an object)
 */
export function registerHiddenWorldSetting(key, initial) {
  game.settings.register(MODULE_ID, key, { scope: "world", config: false, type: Object, default: initial });
}

/**
 * @param {string} key a setting of this module
 * @param {unknown} value its new value (a world setting: GMs only)
 * @returns {Promise<void>}
 */
export async function setSetting(key, value) {
  await game.settings.set(MODULE_ID, key, value);
}

/** Key of the bridge token setting. */
export const TOKEN_KEY = "token";

/**
 * Register the bridge token: `client` scope, so it stays in this browser and never reaches
 * Foundry's server, whatever that server sends to other users' browsers. Foundry v13
 * keeps a `client` setting in `game.settings.storage.get("client")`, which is `window.localStorage`,
 * under the setting's id (`fate-bridge.token`, the value as JSON text), and `user` and `world`
 * settings as Setting documents of the one `WorldSettings` collection the server fills
 * (client/helpers/client-settings.mjs: the `ClientSettings` constructor, `get`, `#setClient`). A
 * GM's other browsers get it from the link holder's (logic/token-pairing.js). Shown in the
 * settings window to GMs only. Call at `setup`, when the current user is known.
 *
 * @param {{onBridgeChange: () => void}} callbacks
 */
export function registerTokenSetting({ onBridgeChange }) {
  game.settings.register(MODULE_ID, TOKEN_KEY, {
    name: "FATE_BRIDGE.Settings.Token.Name",
    hint: "FATE_BRIDGE.Settings.Token.Hint",
    scope: "client",
    config: Boolean(game.user?.isGM),
    type: String,
    default: "",
    onChange: onBridgeChange,
  });
}

/**
 * Register the invite code a shared bridge's host handed out and, hidden, the secret of
 * this browser's registration request: `client` scope like the token, since either lets its
 * holder collect the world's token (the code registers the world, the secret collects an approved
 * request's token); the code shown to GMs only. The module registers the world with them and
 * keeps the token it gets in the token setting (scripts/logic/registration.js). Call at `setup`.
 *
 * @param {{onInviteChange: () => void}} callbacks run when the invite code changes
 */
export function registerInviteSettings({ onInviteChange }) {
  game.settings.register(MODULE_ID, INVITE_KEY, {
    name: "FATE_BRIDGE.Settings.InviteCode.Name",
    hint: "FATE_BRIDGE.Settings.InviteCode.Hint",
    scope: "client",
    config: Boolean(game.user?.isGM),
    type: String,
    default: "",
    onChange: onInviteChange,
  });
  game.settings.register(MODULE_ID, REQUEST_SECRET_KEY, { scope: "client", config: false, type: String, default: "" });
}

/** Keys of the invite code and of the registration request's secret. */
export const INVITE_KEY = "inviteCode";
export const REQUEST_SECRET_KEY = "registrationSecret";

/**
 * The id under which an earlier release kept the token with the GM's user (scope `user`): the
 * token setting's own id; Foundry keeps the two apart (a Setting document on its server, this
 * browser's localStorage).
 */
const USER_TOKEN_ID = `${MODULE_ID}.${TOKEN_KEY}`;

/** The Setting document in which an earlier release kept this user's token, if any. */
function userScopeTokenSetting() {
  return game.settings.storage?.get("world")?.getSetting?.(USER_TOKEN_ID, game.user?.id) ?? null;
}

/**
 * The token an earlier release kept with this GM's user on Foundry's server (scope `user`), to
 * move into this browser's `client` setting. Foundry keeps it as a Setting document `{key:
 * "fate-bridge.token", user: USER_ID}` of `game.settings.storage.get("world")`
 * (`WorldSettings#getSetting(key, user)`: "For user-scoped settings, the user ID";
 * client/documents/collections/world-settings.mjs), read here by this user's own id.
 *
 * @returns {string|null} the token, or null when none is kept there
 */
export function userScopeToken() {
  const stored = userScopeTokenSetting()?.value;
  if (typeof stored !== "string" || !stored) return null;
  let token = stored;
  try {
    const parsed = JSON.parse(stored);
    if (typeof parsed === "string") token = parsed;
  } catch {
    // the document's value is the token itself, not its JSON text
  }
  return token || null;
}

/**
 * Clear the token an earlier release kept with this GM's user: its Setting document gets the empty
 * text, written as `ClientSettings#set` writes a `user` setting (`Setting#update({value: json})`).
 *
 * @returns {Promise<void>}
 */
export async function forgetUserScopeToken() {
  await userScopeTokenSetting()?.update({ value: JSON.stringify("") });
}

/**
 * @param {string} key a setting of this module (`bridgeUrl`, `token`, or one a ruleset registered)
 * @returns {string} the setting's value
 */
export function getSetting(key) {
  return game.settings.get(MODULE_ID, key);
}

/**
 * @param {string} namespace another package's id (the game system's, e.g. `sohl`)
 * @param {string} key its setting's key
 * @returns {unknown} that setting's value, or undefined when the package does not register it
 */
export function otherSetting(namespace, key) {
  return game.settings.settings.has(`${namespace}.${key}`) ? game.settings.get(namespace, key) : undefined;
}

/**
 * @param {string} name hook name
 * @param {Function} fn
 */
export function onHook(name, fn) {
  Hooks.on(name, fn);
}

/**
 * @param {string} name hook name
 * @param {Function} fn runs once
 */
export function onceHook(name, fn) {
  Hooks.once(name, fn);
}

/** Marks a method this module put in place of a game system's own (wrapClassMethod), so it is replaced once. */
const WRAPPED = Symbol.for("fate-bridge.wrapped");

/**
 * Put a replacement in place of a method on the prototype of a class a game system exposes on
 * a global (e.g. `sohl.document.item.logic.SkillLogic`). Every instance, made before or after,
 * then runs the replacement: it survives sheet re-renders and new chat cards, which a DOM change
 * would not. Replacing an already replaced method does nothing.
 *
 * @param {string} path dotted path from `globalThis` to the class
 * @param {string} method the method's name on the class's prototype
 * @param {(original: Function) => Function} makeReplacement given the original method, returns
 *   the function to run instead (called with the instance as `this` and the original arguments)
 * @returns {boolean} true when the method is (now) replaced; false when the class or the method
 *   is not there (another system, or a system version without it)
 */
export function wrapClassMethod(path, method, makeReplacement) {
  const owner = path.split(".").reduce((node, key) => (node === null || node === undefined ? undefined : node[key]), globalThis);
  const proto = typeof owner === "function" ? owner.prototype : undefined;
  const original = proto?.[method];
  if (typeof original !== "function") return false;
  if (original[WRAPPED]) return true;
  const replacement = makeReplacement(original);
  Object.defineProperty(replacement, WRAPPED, { value: true });
  Object.defineProperty(proto, method, { value: replacement, writable: true, configurable: true, enumerable: false });
  return true;
}

/** @param {object} payload sent to every other client on the module socket */
export function emitSocket(payload) {
  game.socket.emit(SOCKET, payload);
}

/**
 * @param {(payload: object, senderId: string) => void} fn receives the payload and the sender's
 *   user id that the Foundry server added; a delivery of any other shape (a client emitting extra
 *   arguments to pose as someone else) never reaches it (logic/relay.js socketDelivery)
 */
export function onSocket(fn) {
  game.socket.on(SOCKET, (...args) => {
    const delivery = socketDelivery(args);
    if (delivery) fn(delivery.payload, delivery.senderId);
  });
}

/** @returns {string|null} the world's active GM's user id (`game.users.activeGM`), null when no GM is logged in */
export function activeGMId() {
  return game.users.activeGM?.id ?? null;
}

/** @returns {boolean} true when this client is the world's active GM */
export function isActiveGM() {
  return Boolean(game.users.activeGM?.isSelf);
}

/**
 * @returns {string[]} the ids of the GM users logged in now (`User#active`: "Is this User
 *   currently connected?"; `User#isGM`, Assistant GMs too), in Foundry's user list order
 */
export function activeGMIds() {
  return game.users.filter((user) => user.isGM && user.active).map((user) => user.id);
}

/** @param {string} userId @returns {boolean} true when that user is a GM */
export function isGMUser(userId) {
  return Boolean(game.users.get(userId)?.isGM);
}

/** @returns {string} this client's user id */
export function currentUserId() {
  return game.user.id;
}

/** @returns {boolean} */
export function currentUserIsGM() {
  return Boolean(game.user.isGM);
}

/** @param {string} userId @returns {string|null} the user's name */
export function userName(userId) {
  return game.users.get(userId)?.name ?? null;
}

/**
 * Every GM user's id, logged in or not: the users Foundry whispers a GM or blind roll to
 * (`ChatMessage.getWhisperRecipients("GM")`: `user.isGM`, so Assistant GMs too).
 *
 * @returns {string[]}
 */
export function gmUserIds() {
  return game.users.filter((user) => user.isGM).map((user) => user.id);
}

/**
 * This client's roll mode as the wire's `visibility`: `publicroll` -> `public`, `gmroll` -> `gm`,
 * `blindroll` -> `blind`, `selfroll` -> `self`. Foundry v14 keeps it in `core.messageMode`
 * (`public`, `gm`, `blind`, `self`, `ic`; `ic` is public) and deprecates `core.rollMode`, which v13
 * uses: the first one registered is read. A mode this module does not know (v14's
 * `CONFIG.ChatMessage.modes` is a registry systems and modules extend) is `self`: never public.
 *
 * @returns {"public"|"gm"|"blind"|"self"}
 */
export function rollMode() {
  const key = game.settings.settings.has("core.messageMode") ? "messageMode" : "rollMode";
  return visibilityOfRollMode(game.settings.get("core", key)) ?? UNKNOWN_MODE_VISIBILITY;
}

/**
 * @typedef {object} MessageData a ChatMessage as plain data
 * @property {string} id
 * @property {string} content
 * @property {string[]} whisper the user ids it is whispered to (empty: everyone sees it)
 * @property {boolean} blind hidden from its author too (Foundry's blind roll)
 * @property {string|null} authorId the user who posted it (`ChatMessage#author`, a User since v12)
 * @property {boolean} isRoll it carries Rolls (`ChatMessage#isRoll`): Foundry then hides a whispered
 *   message's content, not the message (logic/cards.js contentVisibleTo)
 * @property {boolean} contentVisible this client's user reads its content (`ChatMessage#isContentVisible`,
 *   Foundry's own answer on this version; false: Foundry shows the "rolled privately" stub)
 * @property {Record<string, any>} flags this module's flags only
 */

/**
 * @param {string} messageId
 * @returns {MessageData|null}
 */
export function messageData(messageId) {
  const message = game.messages.get(messageId);
  if (!message) return null;
  const author = message.author;
  return {
    id: message.id,
    content: message.content ?? "",
    whisper: (message.whisper ?? []).map((user) => (typeof user === "string" ? user : user?.id)).filter(Boolean),
    blind: Boolean(message.blind),
    authorId: (typeof author === "string" ? author : author?.id) ?? null,
    isRoll: Boolean(message.isRoll),
    contentVisible: Boolean(message.isContentVisible),
    flags: { ...(message.flags?.[MODULE_ID] ?? {}) },
  };
}

/**
 * The world's most recent chat messages by Foundry's server: at most `limit`, none created more
 * than `maxAgeMs` before this browser's clock now, in the order the server created them.
 *
 * A message's age and order come from `_stats.createdTime`, which Foundry's server sets when it
 * stores the message and ignores in the data a client sends (`DocumentStatsField.managedFields`:
 * "These fields are managed by the server and are ignored if they appear in creation or update
 * data", common/data/fields.mjs; League-of-Foundry-Developers/foundry-vtt-types
 * src/foundry/common/data/fields.d.mts lists `createdTime` among them for v13). Never from
 * `ChatMessage#timestamp`: that is filled in by the browser that creates the message
 * (`timestamp: new fields.NumberField({..., initial: Date.now})`, v13 common/documents/chat-message.mjs),
 * so a player's wrong clock would skip a recent test or bring back an old one. The bound is
 * measured against the clock of the GM's browser that asks (the server's and the GM's clocks
 * differ by far less than the hours it spans). A message without a server time (none recorded)
 * is left out. Messages the server created in the same millisecond keep `game.messages` order.
 *
 * @param {{limit: number, maxAgeMs: number}} bound
 * @returns {string[]} their ids, oldest first
 */
export function recentMessageIds({ limit, maxAgeMs }) {
  const since = Date.now() - maxAgeMs;
  return game.messages
    .map((message) => ({ id: message.id, created: message._stats?.createdTime }))
    .filter(({ created }) => Number.isFinite(created) && created >= since)
    .sort((a, b) => a.created - b.created)
    .slice(-limit)
    .map(({ id }) => id);
}

/**
 * @param {string} key a flag key in this module's scope
 * @param {unknown} value compared with `===`
 * @param {{before?: string|null}} [options] `before`: only messages posted before that chat
 *   message (`game.messages` order); all when it is null or not in the world
 * @returns {string[]} the ids of the world's chat messages whose flag `key` is `value`, oldest first
 */
export function messageIdsWithFlag(key, value, { before = null } = {}) {
  const messages = game.messages.filter(() => true);
  const end = before === null ? -1 : messages.findIndex((message) => message.id === before);
  return (end < 0 ? messages : messages.slice(0, end))
    .filter((message) => message.flags?.[MODULE_ID]?.[key] === value)
    .map((message) => message.id);
}

/**
 * Runtime values a system keeps on its item data model beside the stored ones (prepared, not in
 * `toObject()`), to copy onto each plain item: `{name: path}`, `path` dotted under `item.system`,
 * `name` dotted in the plain item (e.g. `{"masteryLevel.effective": "logic.masteryLevel.effective"}`).
 * Only numbers, strings, booleans and null are copied; a name whose values are all missing is left out.
 *
 * @typedef {Record<string, string>} ItemRuntime
 */

/**
 * @param {string} uuid the actor's UUID (`Actor.x`, or a token actor's)
 * @param {{runtime?: ItemRuntime}} [options] runtime values to copy onto each item
 * @returns {{id: string, name: string, hasPlayerOwner: boolean, ownerUserIds: string[], statuses: string[],
 *   items: object[]}|null} `ownerUserIds`: users with OWNER permission, GMs included; `items` as itemData
 */
export function actorSnapshot(uuid, { runtime = {} } = {}) {
  const actor = fromUuidSync(uuid);
  if (!actor) return null;
  return {
    id: actor.id,
    name: actor.name,
    hasPlayerOwner: Boolean(actor.hasPlayerOwner),
    ownerUserIds: game.users.filter((user) => actor.testUserPermission(user, "OWNER")).map((user) => user.id),
    statuses: [...(actor.statuses ?? [])],
    items: actor.items.map((item) => plainItem(item, runtime)),
  };
}

/**
 * @typedef {object} ActorData an actor as plain data
 * @property {string} id the world actor's id (a token actor's base actor)
 * @property {string} uuid
 * @property {string} name
 * @property {string} type
 * @property {object} system its system data, prepared values (a copy: e.g. the HMtW system's
 *   `system.swords`, `system.pentacles`, `system.cups`, `system.wands`)
 */

/**
 * @param {string} uuid the actor's UUID (`Actor.x`, or a token actor's)
 * @returns {ActorData|null}
 */
export function actorData(uuid) {
  const actor = fromUuidSync(uuid);
  return actor ? plainActor(actor) : null;
}

/**
 * The actors of this client's controlled (selected) tokens, in the order they were selected, each
 * once; none while no scene is drawn.
 *
 * @returns {ActorData[]}
 */
export function controlledActors() {
  const actors = new Map();
  for (const token of globalThis.canvas?.tokens?.controlled ?? []) {
    const actor = token.actor;
    if (actor && !actors.has(actor.id)) actors.set(actor.id, plainActor(actor));
  }
  return [...actors.values()];
}

function plainActor(actor) {
  const system = actor.system ?? {};
  return {
    id: actor.id,
    uuid: actor.uuid,
    name: actor.name,
    type: actor.type,
    // A system's TypeDataModel gives its prepared values with toObject(false); a template.json system is a plain object.
    system: typeof system.toObject === "function" ? system.toObject(false) : foundry.utils.deepClone(system),
  };
}

/**
 * @param {string} actorUuid
 * @param {string} itemId
 * @returns {{id: string, name: string, type: string, system: object, moduleFlags: object}|null}
 *   `system` its stored data, `moduleFlags` this module's flags on it
 */
export function itemData(actorUuid, itemId) {
  const item = fromUuidSync(actorUuid)?.items.get(itemId);
  return item ? plainItem(item) : null;
}

/** An item as plain data, with the `runtime` values asked for (see ItemRuntime). */
function plainItem(item, runtime = {}) {
  const plain = {
    id: item.id,
    name: item.name,
    type: item.type,
    system: item.toObject().system,
    moduleFlags: { ...(item.flags?.[MODULE_ID] ?? {}) },
  };
  for (const [name, path] of Object.entries(runtime)) {
    const value = foundry.utils.getProperty(item.system ?? {}, path);
    if (value === undefined || (value !== null && !["number", "string", "boolean"].includes(typeof value))) continue;
    const [head, ...rest] = name.split(".");
    if (!rest.length) plain[head] = value;
    else foundry.utils.setProperty((plain[head] ??= {}), rest.join("."), value);
  }
  return plain;
}

/**
 * A chat message's rolls as plain data, with what a ruleset needs to read them.
 *
 * @param {string|object} message its id, or the ChatMessage a hook handed over
 * @returns {null | {id: string, speakerActorId: string|null, flavor: string|null, rollType: string|null,
 *   contentVisible: boolean, rolls: object[]}} null when there is no such message. `contentVisible`:
 *   this client's user reads it (`ChatMessage#isContentVisible`). `rolls` is `message.rolls` as Roll JSON
 *   objects (`Roll#toJSON`; a JSON string, as in the message's source, is parsed; one that does not
 *   parse is left out); `rollType` is a system's roll type (dnd5e's `flags.dnd5e.roll.type`)
 */
export function messageRolls(message) {
  const found = typeof message === "string" ? game.messages.get(message) : message;
  if (!found) return null;
  const rollType = found.flags?.dnd5e?.roll?.type;
  return {
    id: found.id,
    speakerActorId: found.speaker?.actor ?? null,
    flavor: typeof found.flavor === "string" ? found.flavor : null,
    rollType: typeof rollType === "string" ? rollType : null,
    contentVisible: Boolean(found.isContentVisible),
    rolls: (found.rolls ?? []).map(plainRoll).filter((roll) => roll !== null),
  };
}

/** One entry of `message.rolls` (a Roll, or a JSON string) as a plain object, or null. */
function plainRoll(roll) {
  if (typeof roll === "string") {
    try {
      const data = JSON.parse(roll);
      return data && typeof data === "object" ? data : null;
    } catch {
      return null;
    }
  }
  if (typeof roll?.toJSON === "function") return roll.toJSON();
  return roll && typeof roll === "object" ? roll : null;
}

/**
 * @param {string} actorUuid
 * @returns {boolean} true when the current user is OWNER of that actor
 */
export function userOwnsActor(actorUuid) {
  return Boolean(fromUuidSync(actorUuid)?.isOwner);
}

/**
 * @param {string} messageId
 * @param {string} key flag key in this module's scope
 * @param {unknown} value
 * @returns {Promise<void>}
 */
export async function setMessageFlag(messageId, key, value) {
  await game.messages.get(messageId).setFlag(MODULE_ID, key, value);
}

/**
 * `actor.items.get(itemId).update(changes)`: one update, so every change lands together.
 *
 * @param {string} actorUuid
 * @param {string} itemId
 * @param {Object<string, unknown>} changes dotted paths -> values, e.g.
 *   `{"system.charges.value": 1, "flags.fate-bridge.spend_seq": 7}`
 * @returns {Promise<void>}
 */
export async function updateActorItem(actorUuid, itemId, changes) {
  await fromUuidSync(actorUuid).items.get(itemId).update(changes);
}

/**
 * Post a chat card. `rolls` (serialized Rolls of the bridge's own dice, logic/cards.js
 * cardMessageData) become the message's real Foundry Rolls (`message.rolls`, via `Roll.fromData`), so
 * every client shows the bridge's values and Dice So Nice rolls them once, to the card's readers;
 * without them nothing is attached and Dice So Nice rolls nothing for the card.
 *
 * `author`: the user the card is posted as (a self card's asker, logic/cards.js cardAudience);
 * without it Foundry makes this client's user the author (`DocumentAuthorField`, initial
 * `game.user`). Foundry lets only a GM name another author (v13 common/documents/chat-message.mjs
 * `BaseChatMessage.#canCreate`); the field is `author` since v12 (its `user` shim ends in v14:
 * `shimData` "since 12, until 14", foundry-vtt-types common/documents/chat-message.d.mts).
 *
 * @param {{content: string, speaker: {actor: string|null, alias?: string}, whisper: string[],
 *   blind: boolean, flags: object, author?: string, rolls?: object[]}} data `flags` go to this module's scope
 * @returns {Promise<string>} the new message's id
 */
export async function createChatMessage({ content, speaker, whisper, blind, flags, author, rolls = [] }) {
  const message = await ChatMessage.create({
    content,
    speaker: { scene: null, token: null, actor: speaker.actor, alias: speaker.alias },
    whisper,
    blind,
    flags: { [MODULE_ID]: flags },
    ...(author ? { author } : {}),
    ...(rolls.length ? { rolls: rolls.map((data) => Roll.fromData(data)) } : {}),
  });
  return message.id;
}

/**
 * Random bytes from the browser's CSPRNG (a dice request's `client_seed`).
 *
 * @param {Uint8Array} bytes filled in place
 * @returns {Uint8Array}
 */
export function randomValues(bytes) {
  return globalThis.crypto.getRandomValues(bytes);
}

/**
 * WebCrypto's SubtleCrypto, for sealed relay replies (logic/sealed-reply.js). Browsers offer it
 * only in a secure context (HTTPS, or http://localhost): MDN "Crypto: subtle property".
 *
 * @returns {SubtleCrypto|null} null where this page has none
 */
export function webCrypto() {
  return globalThis.crypto?.subtle ?? null;
}

/**
 * @param {Uint8Array} bytes
 * @returns {Promise<ArrayBuffer>} their SHA-256 (WebCrypto)
 */
export function sha256(bytes) {
  return globalThis.crypto.subtle.digest("SHA-256", bytes);
}

/**
 * The chat messages carrying this module's flag `key`.
 *
 * @param {string} key
 * @returns {Array<{id: string, content: string, flag: any}>}
 */
export function messagesWithFlag(key) {
  return game.messages
    .filter((m) => m.getFlag(MODULE_ID, key) !== undefined)
    .map((m) => ({ id: m.id, content: m.content, flag: m.getFlag(MODULE_ID, key) }));
}

/**
 * Real dice the user throws, for a ruleset that allows them. Where this user set the
 * denomination to a fulfillment method in Foundry's Dice Configuration (v12+: core setting
 * `diceConfiguration`, `Roll.DICE_CONFIGURATION_SETTING`, denomination -> method id, "" for
 * Foundry's digital roll), Foundry's own RollResolver asks for them
 * (`Roll#evaluate({allowInteractive: true})`); otherwise a dialog asks for the values.
 * The bridge checks every value against its die.
 * Sources: foundryvtt.com/api/interfaces/CONFIG.DiceFulfillmentConfiguration.html (`CONFIG.Dice.fulfillment`
 * = {defaultMethod, dice, methods}), foundryvtt.com/api/v14/interfaces/CONFIG.DiceFulfillmentMethod.html
 * (`interactive`, `handler`, `resolver`), foundry.dice.Roll `DICE_CONFIGURATION_SETTING: "diceConfiguration"`,
 * fvtt-types 13.346 src/foundry/client/applications/dice/roll-resolver.d.mts (RollResolver: "handling
 * unfulfilled dice terms in a roll").
 *
 * @param {number[]} faces the dice asked for, in order
 * @returns {Promise<string|null>} the values typed, as text (null when the dialog was closed)
 */
export async function askPhysicalDice(faces) {
  const configured = game.settings.get("core", "diceConfiguration") ?? {};
  const fulfilled = globalThis.CONFIG?.Dice?.fulfillment && faces.every((f) => configured[`d${f}`]);
  if (fulfilled) {
    const values = [];
    for (const f of faces) {
      const roll = await new Roll(`1d${f}`).evaluate({ allowInteractive: true });
      values.push(roll.dice[0].results[0].result);
    }
    return values.join(" ");
  }
  const label = faces.map((f) => `d${f}`).join(", ");
  return foundry.applications.api.DialogV2.prompt({
    window: { title: localize("FATE_BRIDGE.Dice.PhysicalTitle") },
    content: `<label>${localize("FATE_BRIDGE.Dice.PhysicalPrompt", { dice: label })} <input name="values" type="text" autofocus></label>`,
    ok: { callback: (event, button) => button.form.elements.values.value },
    rejectClose: false,
  });
}

/**
 * @param {string} messageId
 * @param {{content: string, flags: object}} data `flags` go to this module's scope
 * @returns {Promise<void>}
 */
export async function updateChatMessage(messageId, { content, flags }) {
  await game.messages.get(messageId).update({ content, flags: { [MODULE_ID]: flags } });
}

/**
 * Dice So Nice throws a card's dice itself, on each client whose user reads the card
 * (logic/cards.js cardMessageData), as the message's author: `Dice3D#renderRolls` calls
 * `showForRoll(roll, chatMessage.author, false, null, false, chatMessage.id, speaker)`, and
 * `showForRoll` fires `diceSoNiceRollStart(messageID, context)` before `show(notation,
 * context.user, ...)` plays it with `context.user`'s appearance (module/Dice3D.js of Dice So Nice
 * 5.1.6). The author of a bridge card is the GM whose browser posted it; this hook hands
 * the dice to the user who asked (flag DICE_USER_FLAG), so they roll in that user's colours.
 * Older or newer Dice So Nice versions that do not read `context.user` show the GM's colours.
 */
export function installDiceAppearance() {
  Hooks.on("diceSoNiceRollStart", (messageId, context) => {
    const userId = game.messages.get(messageId)?.flags?.[MODULE_ID]?.[DICE_USER_FLAG];
    const user = typeof userId === "string" ? game.users.get(userId) : null;
    if (user && context && typeof context === "object") context.user = user;
  });
}

/**
 * @param {string} key localization key
 * @param {object} [data] format data
 * @returns {string}
 */
export function localize(key, data) {
  return data ? game.i18n.format(key, data) : game.i18n.localize(key);
}

/**
 * @param {"info"|"warn"|"error"} level
 * @param {string} key localization key
 * @param {object} [data] format data
 */
export function notify(level, key, data) {
  ui.notifications[level](localize(key, data));
}

/** Longest user name sent in `hello` (the bridge's limit on names). */
const MAX_USER_NAME = 256;

/**
 * @returns {string} this client's language, Foundry's `game.i18n.lang` (Localization#lang, the
 *   `core.language` setting; "en" by default: foundryvtt.com/api/v14/classes/foundry.helpers.Localization.html)
 */
export function language() {
  return String(game.i18n?.lang || "en");
}

/**
 * @returns {{module_version: string, foundry_version: string, system_id: string, system_version: string,
 *   user_name: string, language: string}} for `hello`; `user_name` is this client's user, named to
 *   a browser it supersedes; `language` is the one the bridge writes this world's cards in
 */
export function clientInfo() {
  return {
    module_version: moduleVersion(),
    foundry_version: String(game.version ?? ""),
    system_id: String(game.system?.id ?? ""),
    system_version: String(game.system?.version ?? ""),
    user_name: String(game.user?.name ?? "").slice(0, MAX_USER_NAME),
    language: language(),
  };
}

/**
 * @param {string} text put on the clipboard as plain text (Foundry's ClipboardHelper)
 * @returns {Promise<void>}
 */
export async function copyText(text) {
  await game.clipboard.copyPlainText(text);
}

/** @returns {string} this world's id */
export function worldId() {
  return game.world.id;
}

/** @returns {string} a random 16-character id */
export function randomId() {
  return foundry.utils.randomID(16);
}

/** @returns {typeof WebSocket} the browser's WebSocket class */
export function webSocketClass() {
  return globalThis.WebSocket;
}

/** @returns {DOMParser} */
export function domParser() {
  return new globalThis.DOMParser();
}

/**
 * @returns {{setTimeout: Function, clearTimeout: Function, now: () => number}} the platform timers
 *   and clock (`now`: ms since the epoch, Date.now)
 */
export function timers() {
  return { setTimeout: globalThis.setTimeout.bind(globalThis), clearTimeout: globalThis.clearTimeout.bind(globalThis), now: () => Date.now() };
}

/**
 * Register the GM-only "Fate audit" button in this module's settings (`restricted`: Foundry
 * shows it to GMs only). Foundry opens it with `new WindowClass().render(true)`.
 *
 * @param {Function} WindowClass an ApplicationV2 subclass (scripts/audit-window.js)
 */
export function registerAuditMenu(WindowClass) {
  game.settings.registerMenu(MODULE_ID, "audit", {
    name: "FATE_BRIDGE.Audit.Menu.Name",
    label: "FATE_BRIDGE.Audit.Menu.Label",
    hint: "FATE_BRIDGE.Audit.Menu.Hint",
    icon: "fa-solid fa-scroll",
    type: WindowClass,
    restricted: true,
  });
}

/** @returns {Function} Foundry's ApplicationV2 base class (v13+) */
export function applicationV2Base() {
  return foundry.applications.api.ApplicationV2;
}

/** @returns {Document} the page's document */
export function htmlDocument() {
  return globalThis.document;
}

/** @returns {Array<{id: string, name: string}>} the world's actors, sorted by name */
export function worldActors() {
  return game.actors
    .map((actor) => ({ id: actor.id, name: String(actor.name ?? actor.id) }))
    .sort((a, b) => a.name.localeCompare(b.name));
}

/**
 * Bring a chat message into view: scroll the chat log to it and highlight it for a moment, or,
 * when the log has not rendered it (older than the loaded batch), open it as a popout.
 *
 * @param {string} messageId
 * @returns {"shown"|"popout"|"hidden"|"gone"} `gone`: no such message in this world any more;
 *   `hidden`: it exists but could neither be found in the log nor popped out
 */
export function revealChatMessage(messageId) {
  const message = game.messages.get(messageId);
  if (!message) return "gone";
  ui.chat?.activate?.();
  // v13+ also lists recent messages in the notification pane (`#chat-notifications .chat-log`,
  // outside the sidebar, hidden once the chat tab is active): only the chat log's copy will do.
  const element = [...globalThis.document.querySelectorAll(".chat-log [data-message-id]")].find(
    (node) => node.dataset.messageId === messageId && !node.closest(NOTIFICATIONS_PANE),
  );
  if (element) {
    element.scrollIntoView?.({ block: "center", behavior: "smooth" });
    element.classList.add(HIGHLIGHT_CLASS);
    globalThis.setTimeout(() => element.classList.remove(HIGHLIGHT_CLASS), HIGHLIGHT_MS);
    return "shown";
  }
  const ChatPopout = foundry.applications?.sidebar?.apps?.ChatPopout;
  if (!ChatPopout) return "hidden";
  new ChatPopout({ message }).render({ force: true });
  return "popout";
}

/** Id of the GM's bridge link badge (styles/fate-bridge.css `.fate-bridge-link`). */
const LINK_BADGE_ID = "fate-bridge-link";

/**
 * Draw (or remove) the GM's bridge link badge: a small pill at the top of the page whose
 * `data-state` is the link state (the stylesheet colours it) and whose tooltip says the address,
 * the likely cause, the next attempt and the versions. Every text goes in through `textContent`
 * and `title`.
 *
 * @param {{state: string, label: string, details: string[]}|null} badge null removes it
 */
export function showLinkBadge(badge) {
  const doc = globalThis.document;
  let element = doc.getElementById(LINK_BADGE_ID);
  if (!badge) {
    element?.remove();
    return;
  }
  if (!element) {
    element = doc.createElement("div");
    element.id = LINK_BADGE_ID;
    element.className = "fate-bridge-link";
    element.setAttribute("role", "status");
    element.setAttribute("aria-live", "polite");
    doc.body.append(element);
  }
  element.dataset.state = badge.state;
  element.textContent = badge.label;
  element.title = badge.details.join("\n");
}

/** @returns {string} the Foundry page's protocol (`"https:"` or `"http:"`) */
export function pageProtocol() {
  return String(globalThis.location?.protocol ?? "");
}

/** @returns {string} the Foundry page's host name (`location.hostname`, e.g. `"foundry.example.org"`) */
export function pageHost() {
  return String(globalThis.location?.hostname ?? "");
}

/**
 * The browser's answer for a permission, under the first of `names` it knows
 * (`navigator.permissions.query`: MDN "Permissions: query()"; a name the browser does not know
 * rejects with a TypeError, so the next is tried).
 *
 * @param {readonly string[]} names permission names, most precise first
 * @returns {Promise<"granted"|"denied"|"prompt"|null>} null when the browser has no Permissions
 *   API or knows none of the names
 */
export async function permissionState(names) {
  const permissions = globalThis.navigator?.permissions;
  if (typeof permissions?.query !== "function") return null;
  for (const name of names) {
    try {
      return (await permissions.query({ name })).state;
    } catch {
      // not a permission this browser knows: try the next name
    }
  }
  return null;
}

/** @returns {string} this module's version (module.json) */
export function moduleVersion() {
  return String(game.modules.get(MODULE_ID)?.version ?? "");
}

/**
 * Every chat message's id and this module's flags (the receipts check reads `receipt`).
 *
 * @returns {Array<{id: string, flags: Record<string, any>}>} in the log's order
 */
export function chatMessageFlags() {
  return game.messages.map((message) => ({ id: message.id, flags: { ...(message.flags?.[MODULE_ID] ?? {}) } }));
}

/**
 * Let the user download `text` as a file: Foundry's `foundry.utils.saveDataToFile(data, type,
 * filename)` (v13/v14 client utils; also what core's own "Export Data" uses).
 *
 * @param {string} text
 * @param {string} type a MIME type, e.g. `application/json`
 * @param {string} filename
 */
export function saveTextFile(text, type, filename) {
  foundry.utils.saveDataToFile(text, type, filename);
}
