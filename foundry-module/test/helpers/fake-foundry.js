/**
 * The smallest fakes of the Foundry globals scripts/foundry.js reads, installed fresh per test.
 * One process plays every client: `world.asUser(id)` switches who "this client" is, and
 * `world.deliverSocket()` hands what was emitted on the module socket to the registered handlers:
 * the emitted arguments, then the emitter's id appended as Foundry's server does
 * (`world.deliverAs(id)`: the same, as user `id`).
 *
 * Several browsers (issue 24): `world.asClient(id, fn)` runs `fn` as user `id`'s own browser. What
 * it registers (hooks, the module socket's handler) and everything it schedules (promise
 * continuations, timers from `world.clientTimers(clock)`) keeps running as that user, through
 * Node's AsyncLocalStorage, so one process plays several GMs' browsers at once, each with its own
 * module instance. As Foundry's server does, a socket payload goes to every other connected client,
 * never back to its sender (socket.io `socket.broadcast.emit`: foundryvtt.wiki/en/development/api/sockets,
 * "the initial requester ... and all other connected clients who receive a broadcast"), a hook
 * such as `userConnected` runs on each browser as that browser, and a browser whose user left
 * (`world.connectUser(id, false)`) gets no more hooks or payloads.
 *
 * Settings, where Foundry v13 keeps them (client/helpers/client-settings.mjs): a `client` setting
 * in the browser's own localStorage (one per user here: `world.localStorageOf(id)`), as JSON text;
 * `world` and `user` settings as Setting documents `{key, user, value}` on Foundry's server
 * (`world.serverSettings`), which each browser reads from the one collection
 * `game.settings.storage.get("world")` (`getSetting(key, user)`). What the server puts in a
 * browser's collection is not public for other users' `user` settings: by default this fake sends a
 * browser its own only; `everyUsersSettings` sends every user's to every browser (issue 36: the
 * token must be safe even then).
 */
import { readFileSync } from "node:fs";
import { AsyncLocalStorage } from "node:async_hooks";
import { JSDOM } from "jsdom";
import { messageContentVisibleTo, messageVisibleTo } from "./document-rules.js";

const EN = JSON.parse(readFileSync(new URL("../../lang/en.json", import.meta.url), "utf8"));
const OWNER = 3;
let counter = 0;
/** The user whose browser is running now (world.asClient), undefined outside any. */
const clientOf = new AsyncLocalStorage();

/**
 * A WebSocket class (fake-socket.js fakeWebSocketClass) whose events (open, message, close) reach
 * the browser that made the socket (world.asClient), as a browser's own WebSocket does; the same
 * `instances` list. Pass it to installFakeFoundry({WebSocket}) for several browsers.
 *
 * @param {Function} Base the fake WebSocket class
 * @returns {Function}
 */
export function clientWebSocketClass(Base) {
  return class extends Base {
    #run = AsyncLocalStorage.snapshot();
    open() { this.#run(() => super.open()); }
    receive(message) { this.#run(() => super.receive(message)); }
    drop(code, reason) { this.#run(() => super.drop(code, reason)); }
  };
}

/** @returns {string} a fresh 16-character id */
export function fakeId(prefix = "id") {
  counter += 1;
  return `${prefix}${String(counter).padStart(16 - prefix.length, "0")}`;
}

function setPath(target, path, value) {
  const keys = path.split(".");
  let node = target;
  for (const key of keys.slice(0, -1)) node = node[key] ??= {};
  node[keys.at(-1)] = value;
}

class Collection extends Map {
  filter(fn) { return [...this.values()].filter(fn); }
  map(fn) { return [...this.values()].map(fn); }
  find(fn) { return [...this.values()].find(fn); }
}

export class FakeItem {
  constructor(data, updates) {
    this.id = data._id ?? data.id ?? fakeId("item");
    this.name = data.name;
    this.type = data.type;
    this.system = structuredClone(data.system ?? {});
    this.flags = structuredClone(data.flags ?? {});
    if (data.masteryLevel) this.system.logic = { masteryLevel: data.masteryLevel };
    this.updates = updates;
  }
  toObject() {
    const { logic, ...system } = this.system;
    return { _id: this.id, name: this.name, type: this.type, system: structuredClone(system) };
  }
  async update(changes) {
    this.updates.push({ itemId: this.id, changes });
    for (const [path, value] of Object.entries(changes)) setPath(this, path, value);
  }
}

/**
 * The smallest ApplicationV2 the audit window needs, following Foundry v13's life-cycle:
 * `render(true | {force})` -> `_canRender` (a throw becomes a warning, nothing rendered) ->
 * `_prepareContext` -> frame on first render (only when forced) -> `_renderHTML` ->
 * `_replaceHTML(result, content)` -> `_onFirstRender` / `_onRender`. Renders run one at a time.
 */
export class FakeApplicationV2 {
  static DEFAULT_OPTIONS = { id: "app-{id}", classes: [], window: { title: "" }, position: {} };
  static #count = 0;
  #state = 0;
  #queue = Promise.resolve();
  constructor(options = {}) {
    this.options = { ...this.constructor.DEFAULT_OPTIONS, ...options };
    FakeApplicationV2.#count += 1;
    this.id = String(this.options.id).replace("{id}", String(FakeApplicationV2.#count));
    this.element = null;
  }
  get rendered() { return this.#state === 2; }
  render(options = {}, legacy = {}) {
    const opts = typeof options === "boolean" ? { ...legacy, force: options } : options;
    const run = this.#queue.then(() => this.#render(opts));
    this.#queue = run.catch(() => {});
    return run;
  }
  async #render(options) {
    try {
      if (this._canRender(options) === false) return this;
    } catch (error) {
      globalThis.ui.notifications.warn(error.message);
      return this;
    }
    const first = this.#state <= 0;
    if (first && !options.force) return this;
    const context = await this._prepareContext(options);
    if (first) {
      const doc = globalThis.document;
      this.element = doc.createElement("div");
      this.element.id = this.id;
      this.element.className = ["application", ...(this.options.classes ?? [])].join(" ");
      const content = doc.createElement("section");
      content.className = "window-content";
      this.element.append(content);
      doc.body.append(this.element);
    }
    this._replaceHTML(await this._renderHTML(context, options), this.element.querySelector(".window-content"), options);
    this.#state = 2;
    if (first) this._onFirstRender(context, options);
    this._onRender(context, options);
    return this;
  }
  _canRender() {}
  async _prepareContext() { return {}; }
  _onFirstRender() {}
  _onRender() {}
  async close() {
    this.element?.remove();
    this.#state = -1;
  }
}

export class FakeMessage {
  constructor(world, data) {
    this.world = world;
    this.id = data._id ?? fakeId("msg");
    this.content = data.content ?? "";
    this.speaker = data.speaker ?? {};
    this.whisper = data.whisper ?? [];
    this.blind = Boolean(data.blind);
    this.rolls = data.rolls ?? [];
    this.flavor = data.flavor;
    this.flags = structuredClone(data.flags ?? {});
    // ChatMessage#timestamp: ms since the epoch by the clock of the browser that created it (v13
    // common/documents/chat-message.mjs: `timestamp: new fields.NumberField({..., initial: Date.now})`,
    // filled in where the data is made): a player's wrong clock lands here (world.clientClockSkewMs).
    this.timestamp = data.timestamp ?? Date.now() + (world.clientClockSkewMs.get(world.currentUserId) ?? 0);
    // `_stats.createdTime`: the server's clock at creation; Foundry's server manages it and ignores
    // it in creation data (DocumentStatsField.managedFields: "These fields are managed by the server
    // and are ignored if they appear in creation or update data", common/data/fields.mjs).
    this._stats = { createdTime: world.serverNow() };
    // ChatMessage#author (v12+): the User who posted it; Foundry fills it with the current user.
    this.author = world.users.get(data.author ?? world.currentUserId) ?? null;
  }
  getFlag(scope, key) { return this.flags[scope]?.[key]; }
  // Foundry v13's client ChatMessage getters (client/documents/chat-message.mjs, v13): `isAuthor` is
  // `game.user === this.author`; `isRoll` is `rolls.length > 0`; `visible` and `isContentVisible`
  // as document-rules.js decides them for the current user.
  get isAuthor() { return Boolean(this.author) && this.author.id === this.world.currentUserId; }
  get isRoll() { return this.rolls.length > 0; }
  #audience() { return { whisper: this.whisper, blind: this.blind, authorId: this.author?.id ?? null, isRoll: this.isRoll }; }
  get visible() { return messageVisibleTo(this.#audience(), this.world.currentUserId); }
  get isContentVisible() { return messageContentVisibleTo(this.#audience(), this.world.currentUserId); }
  async setFlag(scope, key, value) {
    this.world.flagWrites.push({ messageId: this.id, key, value });
    (this.flags[scope] ??= {})[key] = structuredClone(value);
  }
  async update(data) {
    if (data.content !== undefined) this.content = data.content;
    // Dice So Nice animates only the Rolls an update adds (preUpdateChatMessage counts them,
    // updateChatMessage throws `rolls.slice(before)`); an update of content or flags throws nothing.
    const before = this.rolls.length;
    if (Array.isArray(data.rolls)) this.rolls = data.rolls;
    if (this.rolls.length > before) this.world.rollsAdded?.(this, before);
    for (const [scope, values] of Object.entries(data.flags ?? {})) Object.assign((this.flags[scope] ??= {}), structuredClone(values));
    this.world.messageUpdates.push({ messageId: this.id, data });
  }
}

/**
 * Install fresh fakes on globalThis.
 *
 * @param {object} [options]
 * @param {Function} [options.WebSocket] the WebSocket class the module gets
 * @param {boolean} [options.diceSoNice] pretend Dice So Nice is active
 * @param {object} [options.settings] what every browser reads for a setting nobody set,
 *   `namespace.key` -> value, whatever its scope (before its registered default)
 * @param {Record<string, object>} [options.userSettings] user id -> {`namespace.key`: value}: the
 *   `user`-scope Setting documents Foundry's server keeps for that user
 * @param {Record<string, Record<string, string>>} [options.clientStorage] user id -> what that
 *   user's browser's localStorage holds (`game.settings.storage.get("client")`, where `client`
 *   settings live, as JSON text)
 * @param {boolean} [options.everyUsersSettings] Foundry's server sends every user's `user`
 *   settings to every browser (false: each browser gets its own user's only)
 * @returns the world handle used by tests
 */
export function installFakeFoundry({ WebSocket, diceSoNice = false, settings = {}, userSettings = {}, clientStorage = {}, everyUsersSettings = false } = {}) {
  // Dice So Nice's world settings this fake reads, with its defaults (module/main.js of 5.1.6):
  // `hide3dDiceOnSecretRolls` true, `showGhostDice` "0" (off; "1" for all, "2" for the roll's author).
  // Foundry v13 registers `core.rollMode` with the default `CONST.DICE_ROLL_MODES.PUBLIC`
  // ("publicroll"; client/config.mjs registerSettings), so a user who never chose reads that.
  settings = { "dice-so-nice.hide3dDiceOnSecretRolls": true, "dice-so-nice.showGhostDice": "0", "core.rollMode": "publicroll", ...settings };
  const dom = new JSDOM("<!doctype html><body></body>");
  const hooks = new Map();
  const socketHandlers = [];
  const registered = new Map();
  const fallback = new Map(Object.entries(settings));
  /** Foundry's server's Setting documents: `user` null for a world setting, else its user's id. */
  const serverSettings = [];
  /** A Setting document as the client holds it: `value` parsed; `update({value: json})` as Foundry's server applies it. */
  const settingDocument = (key, user, value) => ({
    key, user, value,
    async update(changes) { if ("value" in changes) this.value = JSON.parse(changes.value); },
  });
  for (const [userId, own] of Object.entries(userSettings)) for (const [id, value] of Object.entries(own)) serverSettings.push(settingDocument(id, userId, value));
  /** Each browser's localStorage, by its user's id. */
  const localStorages = new Map(Object.entries(clientStorage).map(([userId, items]) => [userId, new Map(Object.entries(items))]));
  const localStorageOf = (userId) => {
    if (!localStorages.has(userId)) localStorages.set(userId, new Map());
    return localStorages.get(userId);
  };
  /** The Setting documents the server sent this browser: the world's, and its user's own (or, leaking, everyone's). */
  const sentSettings = () => serverSettings.filter((doc) => doc.user === null || everyUsersSettings || doc.user === world.currentUserId);
  let current = null;
  const users = new Collection();
  const world = {
    dom,
    notices: [],
    emitted: [],
    flagWrites: [],
    messageUpdates: [],
    itemUpdates: [],
    /** Dice So Nice's `showForRoll` calls, their arguments as passed. */
    diceShown: [],
    /**
     * Every 3D animation Dice So Nice plays, on each client (one entry per client and roll shown):
     * {viewerId, messageId (null for a direct showForRoll), userId (whose dice: their colours),
     * ghost (values hidden), dice: [{faces, results}]}. See fakeDiceSoNice.
     */
    diceAnimations: [],
    /** What the physical dice dialog (`DialogV2.prompt`) answers next, in order (null: closed); and what it was shown. */
    physicalAnswers: [],
    prompts: [],
    /** What user `id`'s browser's localStorage holds (client-scope settings, as JSON text). */
    localStorageOf,
    /** Every Setting document Foundry's server keeps (world and user scope). */
    serverSettings,
    /** Every module-socket delivery to a browser: {to (its user id), payload, senderId}. */
    deliveries: [],
    /** Files `foundry.utils.saveDataToFile` was asked to save: {data, type, filename}. */
    downloads: [],
    hooks,
    registered,
    menus: new Map(),
    users,
    actors: new Collection(),
    messages: new Collection(),
    /** "This client": the browser running now (asClient), else the one asUser chose. */
    get currentUserId() { return clientOf.getStore() ?? current; },
    set currentUserId(id) { current = id; },
    activeGMId: null,
    /** Each user's controlled tokens, in the order controlled (`canvas.tokens.controlled` of that client). */
    controlled: new Map(),
    addUser({ id = fakeId("user"), name, isGM = false, active = true }) {
      // User#active: "Is this User currently connected?"
      users.set(id, { id, name, isGM, active, get isSelf() { return world.currentUserId === id; } });
      return id;
    },
    /** Run `fn` as user `id`'s own browser (see the file's comment); returns what `fn` returns. */
    asClient(id, fn) { return clientOf.run(id, fn); },
    /**
     * `clock`'s timers for a browser: a callback runs as the browser that set it (pass to
     * install({timers}) inside asClient).
     */
    clientTimers(clock) {
      return {
        setTimeout: (fn, ms) => clock.setTimeout(AsyncLocalStorage.bind(fn), ms),
        clearTimeout: (id) => clock.clearTimeout(id),
        now: () => clock.now,
      };
    },
    /**
     * User `id` connects or leaves, as Foundry reports it: `User#active` changes, `activeGM` is
     * chosen again (the types: "one User who is an active Gamemaster (non-assistant if possible)";
     * here the lowest id among the connected GMs), then the `userConnected` hook runs `(user,
     * connected)` on every other connected browser (hooks.d.mts: "fires whenever some other User
     * joins or leaves the game session").
     */
    connectUser(id, connected) {
      users.get(id).active = connected;
      world.activeGMId = users.filter((user) => user.isGM && user.active).map((user) => user.id).sort()[0] ?? null;
      callHooks("userConnected", users.get(id), connected);
    },
    asUser(id) { world.currentUserId = id; },
    /** The current user controls (selects) a token of `actor`; returns the token. */
    controlToken(actor) {
      const token = { id: fakeId("token"), actor };
      if (!world.controlled.has(world.currentUserId)) world.controlled.set(world.currentUserId, []);
      world.controlled.get(world.currentUserId).push(token);
      return token;
    },
    /** The current user releases `token`. */
    releaseToken(token) {
      const tokens = world.controlled.get(world.currentUserId) ?? [];
      if (tokens.includes(token)) tokens.splice(tokens.indexOf(token), 1);
    },
    addActor({ id = fakeId("actor"), name, type = "character", system = {}, hasPlayerOwner = false, ownership = {}, statuses = [], items = [] }) {
      const itemMap = new Collection(items.map((data) => { const item = new FakeItem(data, world.itemUpdates); return [item.id, item]; }));
      const actor = {
        id, uuid: `Actor.${id}`, name, type, system: structuredClone(system), hasPlayerOwner, statuses: new Set(statuses), items: itemMap, ownership,
        testUserPermission: (user, level) => level === "OWNER" && (user.isGM || (ownership[user.id] ?? 0) >= OWNER),
        get isOwner() { return actor.testUserPermission(users.get(world.currentUserId), "OWNER"); },
      };
      world.actors.set(id, actor);
      return actor;
    },
    /** Per user: how far their browser's clock is off (ms added to Date.now for the `timestamp` of what they create). */
    clientClockSkewMs: new Map(),
    /** The Foundry server's clock (ms since the epoch): `_stats.createdTime` of a new message. */
    serverNow: () => Date.now(),
    /**
     * Create a message as ChatMessage.create does, firing createChatMessage. Like Foundry v13's
     * `BaseChatMessage.#canCreate` (common/documents/chat-message.mjs): a GM may create a message
     * for any author; anyone else only as themself ("You cannot impersonate a different user"),
     * or the creation is refused. Outside any user (a test setting up the world's log, e.g. a
     * captured message with its own author) nothing is checked.
     */
    async createMessage(data) {
      const creator = users.get(world.currentUserId);
      if (creator && data.author !== undefined && data.author !== creator.id && !creator.isGM) {
        throw new Error(`User ${creator.name} lacks permission to create ChatMessage as another author`);
      }
      const message = new FakeMessage(world, data);
      world.messages.set(message.id, message);
      callHooks("createChatMessage", message, {}, world.currentUserId);
      // Foundry fires createChatMessage on every connected client: Dice So Nice's own handler runs
      // on each of them (this one process plays them all).
      if (diceSoNice) dice3d.interceptOnEveryClient(message);
      return message;
    },
    /** Rolls an update added to `message` (FakeMessage#update): Dice So Nice throws those on every client. */
    rollsAdded(message, from) {
      if (diceSoNice) dice3d.interceptOnEveryClient(message, from);
    },
    /**
     * Render a message as the current user, as Foundry v13's chat log does: null when the message
     * is not `visible` to them (the log leaves it out); when its content is not visible (a
     * whispered roll), Foundry's "rolled privately" stub in place of the content
     * (`ChatMessage#renderHTML`: flavor `CHAT.PrivateRollContent`, the rolls rendered private);
     * `renderChatMessageHTML` runs either way. Returns the element after the hook.
     */
    render(messageId) {
      const message = world.messages.get(messageId);
      if (!message.visible) return null;
      const li = dom.window.document.createElement("li");
      li.className = "chat-message";
      const content = dom.window.document.createElement("div");
      content.className = "message-content";
      if (message.isContentVisible) content.innerHTML = message.content;
      else {
        const stub = dom.window.document.createElement("span");
        stub.className = "flavor-text";
        stub.textContent = `${message.author?.name ?? "Unknown User"} rolled privately`;
        const dice = dom.window.document.createElement("div");
        dice.className = "dice-roll";
        dice.textContent = "?";
        content.append(stub, dice);
      }
      li.append(content);
      callHooks("renderChatMessageHTML", message, li, {});
      return li;
    },
    /**
     * Dice So Nice's animations per client: `{userId: count}` for every user of the world (0 for
     * those who saw none), of `messageId`'s dice when given, else of every animation.
     */
    animationsPerClient(messageId) {
      const counts = Object.fromEntries([...users.keys()].map((id) => [id, 0]));
      for (const shown of world.diceAnimations) if (messageId === undefined || shown.messageId === messageId) counts[shown.viewerId] += 1;
      return counts;
    },
    /** Run a hook as `Hooks.call` does: false when a handler returned false. */
    callHook: (name, ...args) => callHooks(name, ...args),
    /** Deliver every emitted socket payload to the handlers, as Foundry would to the other clients. */
    deliverSocket() {
      const batch = world.emitted.splice(0);
      for (const { payload, extra = [], senderId } of batch) {
        for (const handler of socketHandlers) {
          if (handler.owner === senderId) continue;
          if (handler.owner !== undefined && users.get(handler.owner)?.active !== false) world.deliveries.push({ to: handler.owner, payload, senderId });
          handler(payload, ...extra, senderId);
        }
      }
      return batch;
    },
    /** `deliverSocket()` while `userId` is "this client"; returns the delivered payloads. */
    deliverAs(userId) {
      world.asUser(userId);
      return world.deliverSocket().map((e) => e.payload);
    },
  };

  const dice3d = fakeDiceSoNice(world, callThisClientsHooks);

  /** Hooks.callAll as the browser running now does: its own handlers and those registered outside any browser. */
  function callThisClientsHooks(name, ...args) {
    const client = world.currentUserId;
    for (const entry of [...(hooks.get(name) ?? [])]) if (entry.fn.owner === undefined || entry.fn.owner === client) entry.fn(...args);
  }

  function callHooks(name, ...args) {
    let result = true;
    for (const entry of [...(hooks.get(name) ?? [])]) {
      if (entry.fn(...args) === false) result = false;
      if (entry.once) hooks.get(name).splice(hooks.get(name).indexOf(entry), 1);
    }
    return result;
  }
  const addHook = (once) => (name, fn) => { if (!hooks.has(name)) hooks.set(name, []); hooks.get(name).push({ fn: asOwner(fn), once }); };
  /** A browser's handler runs as that browser, and not at all once its user left. */
  function asOwner(fn) {
    const owner = clientOf.getStore();
    if (owner === undefined) return fn;
    const run = (...args) => (users.get(owner)?.active === false ? undefined : clientOf.run(owner, () => fn(...args)));
    run.owner = owner;
    return run;
  }
  const format = (key, data = {}) => (EN[key] ?? key).replace(/\{(\w+)\}/g, (_, name) => String(data[name] ?? `{${name}}`));

  globalThis.Hooks = { on: addHook(false), once: addHook(true) };
  globalThis.ui = {
    notifications: Object.fromEntries(["info", "warn", "error"].map((level) => [level, (text) => world.notices.push({ level, text, userId: world.currentUserId })])),
  };
  globalThis.game = {
    world: { id: "e2e-world" },
    version: "14.359",
    system: { id: "sohl", version: "0.8.2" },
    get user() { return users.get(world.currentUserId); },
    users: Object.defineProperty(users, "activeGM", { get: () => users.get(world.activeGMId) ?? null }),
    messages: world.messages,
    actors: world.actors,
    modules: new Map([["fate-bridge", { active: true, version: "0.1.0" }], ...(diceSoNice ? [["dice-so-nice", { active: true }]] : [])]),
    dice3d: diceSoNice ? dice3d : undefined,
    settings: {
      settings: registered,
      register: (namespace, key, config) => registered.set(`${namespace}.${key}`, config),
      registerMenu: (namespace, key, config) => world.menus.set(`${namespace}.${key}`, config),
      // ClientSettings#storage: "client" is this browser's localStorage; "world" and "user" the one
      // WorldSettings collection of the Setting documents the server sent this browser.
      storage: new Map([["client", {
        getItem: (key) => localStorageOf(world.currentUserId).get(key) ?? null,
        setItem: (key, value) => localStorageOf(world.currentUserId).set(key, String(value)),
        removeItem: (key) => localStorageOf(world.currentUserId).delete(key),
      }], ...["world", "user"].map((scope) => [scope, {
        get contents() { return sentSettings(); },
        getSetting: (key, user = null) => sentSettings().find((doc) => doc.key === key && doc.user === user),
      }])]),
      get: (namespace, key) => {
        const id = `${namespace}.${key}`;
        const scope = registered.get(id)?.scope ?? "world";
        if (scope === "client") {
          const text = localStorageOf(world.currentUserId).get(id);
          if (text !== undefined) return JSON.parse(text);
        } else {
          const doc = globalThis.game.settings.storage.get("world").getSetting(id, scope === "user" ? world.currentUserId : null);
          if (doc) return doc.value;
        }
        return fallback.has(id) ? fallback.get(id) : registered.get(id)?.default;
      },
      set: async (namespace, key, value) => {
        const id = `${namespace}.${key}`;
        const scope = registered.get(id)?.scope ?? "world";
        if (scope === "client") localStorageOf(world.currentUserId).set(id, JSON.stringify(value));
        else {
          const user = scope === "user" ? world.currentUserId : null;
          const doc = serverSettings.find((d) => d.key === id && d.user === user);
          if (doc) doc.value = value;
          else serverSettings.push(settingDocument(id, user, value));
        }
        registered.get(id)?.onChange?.(value);
      },
    },
    socket: {
      // Like Foundry's server: whatever the client emitted, then the sender's id appended last.
      emit: (name, payload, ...extra) => { if (name === "module.fate-bridge") world.emitted.push({ payload: structuredClone(payload), senderId: world.currentUserId, ...(extra.length ? { extra: structuredClone(extra) } : {}) }); },
      on: (name, fn) => { if (name === "module.fate-bridge") socketHandlers.push(asOwner(fn)); },
    },
    i18n: { lang: "en", localize: (key) => EN[key] ?? key, format },
  };
  globalThis.ChatMessage = { create: (data) => world.createMessage(data) };
  // Roll#dice: the roll's Die terms (what Dice So Nice throws).
  globalThis.Roll = { fromData: (data) => ({ fromData: data, total: data.total, dice: (data.terms ?? []).filter((term) => term.class === "Die") }) };
  globalThis.canvas = { tokens: { get controlled() { return [...(world.controlled.get(world.currentUserId) ?? [])]; } } };
  globalThis.foundry = { utils: {
    randomID: () => fakeId("ev"),
    deepClone: (value) => structuredClone(value),
    getProperty: (object, key) => key.split(".").reduce((value, part) => value?.[part], object),
    setProperty: (object, key, value) => setPath(object, key, value),
    saveDataToFile: (data, type, filename) => world.downloads.push({ data, type, filename }),
  }, applications: { api: {
    ApplicationV2: FakeApplicationV2,
    DialogV2: {
      // Foundry's DialogV2.prompt resolves with the ok button's callback result, null when closed (rejectClose false).
      prompt: async (options) => {
        world.prompts.push({ user: world.currentUserId, title: options.window?.title, content: options.content });
        return world.physicalAnswers.length ? world.physicalAnswers.shift() : null;
      },
    },
  } } };
  globalThis.fromUuidSync = (uuid) => {
    const match = /(?:^|\.)Actor\.([^.]+)$/.exec(uuid);
    return match ? world.actors.get(match[1]) ?? null : null;
  };
  globalThis.DOMParser = dom.window.DOMParser;
  globalThis.document = dom.window.document;
  globalThis.WebSocket = WebSocket;
  return world;
}

/**
 * Dice So Nice as 5.1.6 behaves (module/main.js, module/Dice3D.js), for counting animations:
 * - Its `createChatMessage` handler (`shouldInterceptMessage`) runs on every client and animates a
 *   new message locally, unsynchronized, when the message carries a Roll with dice
 *   (`message.isRoll`, `roll.dice.length > 0`), its content is visible to that client's user
 *   (`isContentVisible`), or the world shows secret rolls anyway (`hide3dDiceOnSecretRolls` off) or
 *   as ghost dice (`showGhostDice` "1", or "2" for the message's author), and no
 *   `diceSoNiceMessageProcessed` handler set `willTrigger3DRoll` false. `renderRolls` shows it as
 *   the message's author (`chatMessage.author`); `showForRoll` fires `diceSoNiceRollStart(messageId,
 *   context)` and `show` plays it with `context.user`'s appearance.
 * - Its `updateChatMessage` handler throws only the Rolls an update added (`preUpdateChatMessage`
 *   counts them); an update of content or flags throws nothing.
 * - `showForRoll(roll, user, synchronize, users, blind)` called directly: this client plays it
 *   unless `blind`; with `synchronize`, every other client in `users` (all when null) plays it.
 */
function fakeDiceSoNice(world, callHooks) {
  const setting = (key) => globalThis.game.settings.get("dice-so-nice", key);
  const diceOf = (rolls) => rolls.flatMap((roll) => roll.dice.map((die) => ({ faces: die.faces, results: die.results.map((r) => r.result) })));
  /** One animation of `rolls` on this client (renderRolls throws a message's dice together, with no `rollOrder`). */
  function play(rolls, user, { messageId = null, ghost = false } = {}) {
    const context = { roll: rolls[0], user, users: null, blind: false };
    callHooks("diceSoNiceRollStart", messageId, context); // Hooks.callAll, on this browser
    world.diceAnimations.push({ viewerId: world.currentUserId, messageId, userId: context.user?.id ?? null, ghost, dice: diceOf(rolls) });
  }
  /** `fn(userId)` as each connected user's browser (world.asClient). */
  function asEachClient(fn) {
    for (const [userId, user] of world.users) if (user.active !== false) world.asClient(userId, () => fn(userId));
  }
  return {
    messageHookDisabled: false,
    async showForRoll(roll, user, synchronize, users = null, blind) {
      world.diceShown.push([roll, user, synchronize, users, blind]);
      const caller = world.currentUserId;
      if (!blind) play([roll], user);
      if (synchronize) {
        // Dice3D#show emits {type: "show", users}; each other client plays it when listed (or all).
        const ids = users?.map((u) => (typeof u === "string" ? u : u.id)) ?? null;
        asEachClient((id) => { if (id !== caller && (!ids || ids.includes(id))) play([roll], user); });
      }
      return true;
    },
    /**
     * What Dice So Nice's createChatMessage handler (and, for the rolls an update added from
     * index `from` on, its updateChatMessage handler) does on each client.
     */
    interceptOnEveryClient(message, from = 0) {
      asEachClient((userId) => {
        const secretHidden = setting("hide3dDiceOnSecretRolls");
        const ghostSetting = setting("showGhostDice");
        const ghost = ghostSetting === "1" || (ghostSetting === "2" && message.author?.id === userId && secretHidden);
        const interception = {
          willTrigger3DRoll: message.isRoll && (message.isContentVisible || ghost || !secretHidden) && !this.messageHookDisabled
            && message.rolls.slice(from).some((roll) => roll.dice.length > 0),
        };
        callHooks("diceSoNiceMessageProcessed", message.id, interception); // Hooks.callAll, on this browser
        if (!interception.willTrigger3DRoll) return;
        play(message.rolls.slice(from).filter((roll) => roll.dice.length), message.author, { messageId: message.id, ghost: !message.isContentVisible });
      });
    },
  };
}

/** Remove the fakes (call in afterEach). */
export function uninstallFakeFoundry() {
  for (const name of ["Hooks", "ui", "game", "ChatMessage", "Roll", "foundry", "fromUuidSync", "canvas", "DOMParser", "WebSocket", "document"]) delete globalThis[name];
}
