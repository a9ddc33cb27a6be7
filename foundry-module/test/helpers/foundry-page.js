/**
 * The fake Foundry client of a real browser page (served by foundry-server.js, for the click
 * bench, bench/click.js): the Foundry globals scripts/foundry.js reads, backed by the fake server
 * over one WebSocket, then the module's entry point (scripts/module.js) loaded as Foundry loads it
 * and Foundry's start-up hooks run in Foundry's order (init, i18nInit, setup, ready). This page's
 * user is `?user=ID`.
 *
 * Documents behave as Foundry v13's client documents do: `ChatMessage.create`, `message.update`,
 * `setFlag` and `item.update` go to the server and take effect on each client when the server
 * sends them back (the caller's promise resolves then, after the hooks); `createChatMessage` and
 * `updateChatMessage` run on every client that receives the message. The chat log (`#chat-log`)
 * holds the messages this user sees, rendered as Foundry v13's ChatLog does: an `li.chat-message`
 * with `data-message-id`, the content (or the "rolled privately" stub when this user does not read
 * it), handed to `renderChatMessageHTML`, then put into the log; on an update it is rendered again
 * and replaces the old one.
 *
 * `window.bench` records, on this page's clock (`performance.timeOrigin + performance.now()`, ms),
 * what the bench times: a click on a Spend Fate button (`click`, capture phase: before the module's
 * own handler), module socket payloads in and out (`module-in`, `module-out`), the bridge frames the
 * module sends and receives (`bridge-out`, `bridge-in`: the browser's WebSocket, wrapped), the
 * ChatMessage creations this page asks for (`create`) and each message as it goes into the log
 * (`shown`). `bench.sync()` measures this clock against the server's.
 */
import { applyUpdate, messageContentVisibleTo, messageVisibleTo } from "./document-rules.js";

const MODULE_ID = "fate-bridge";
/** Foundry's ownership level OWNER (CONST.DOCUMENT_OWNERSHIP_LEVELS). */
const OWNER = 3;
/** Clock-sync round trips; the one with the shortest round trip gives the offset. */
const SYNC_SAMPLES = 20;
const now = () => performance.timeOrigin + performance.now();
const BrowserWebSocket = globalThis.WebSocket;

const events = [];
const errors = [];
/** How many events of a kind carried a key (`shown:card:ID`, `shown:ping:N`, `module-in:done`): the bench's waits read these, not the list. */
const counts = new Map();
const count = (key) => counts.set(key, (counts.get(key) ?? 0) + 1);
const record = (kind, fields = {}) => events.push({ t: now(), kind, ...fields });
window.addEventListener("error", (event) => errors.push(String(event.error ?? event.message)));
window.addEventListener("unhandledrejection", (event) => errors.push(String(event.reason?.stack ?? event.reason)));

const en = await (await fetch("/lang/en.json")).json();
const selfId = new URLSearchParams(location.search).get("user");
const server = new BrowserWebSocket(`ws://${location.host}/foundry?user=${encodeURIComponent(selfId)}`);
const world = await new Promise((resolve) => server.addEventListener("message", (event) => resolve(JSON.parse(event.data)), { once: true }));

// ---- requests to the server: resolved when the server's answer for this client arrives ----
const waiting = new Map();
let requests = 0;
function ask(message) {
  requests += 1;
  const requestId = requests;
  server.send(JSON.stringify({ ...message, requestId }));
  return new Promise((resolve) => waiting.set(requestId, resolve));
}

// ---- hooks (Hooks.callAll: every handler, an error in one logged, the others still run) ----
const hooks = new Map();
const addHook = (once) => (name, fn) => {
  if (!hooks.has(name)) hooks.set(name, []);
  hooks.get(name).push({ fn, once });
};
function callAll(name, ...args) {
  for (const entry of [...(hooks.get(name) ?? [])]) {
    if (entry.once) hooks.get(name).splice(hooks.get(name).indexOf(entry), 1);
    try {
      entry.fn(...args);
    } catch (error) {
      console.error(`hook ${name} failed`, error);
      errors.push(`hook ${name}: ${error?.stack ?? error}`);
    }
  }
  return true;
}

/** Foundry's Collection: a Map with the array methods scripts/foundry.js calls on `game.users`, `game.messages`, `game.actors`. */
class Collection extends Map {
  filter(fn) { return [...this.values()].filter(fn); }
  map(fn) { return [...this.values()].map(fn); }
}

// ---- users: `activeGM` is one connected GM (here the lowest id, as fake-foundry.js) ----
const users = new Collection(world.users.map(({ id, name, isGM, active }) => [id, { id, name, isGM, active, get isSelf() { return id === selfId; } }]));
Object.defineProperty(users, "activeGM", {
  get: () => users.filter((user) => user.isGM && user.active).sort((a, b) => (a.id < b.id ? -1 : 1))[0] ?? null,
});

// ---- actors and their items ----
class Item {
  constructor(actorId, data) {
    this.actorId = actorId;
    this.id = data.id;
    this.name = data.name;
    this.type = data.type;
    this.system = structuredClone(data.system ?? {});
    this.flags = structuredClone(data.flags ?? {});
    // SoHL's prepared (runtime) values live beside the stored ones, never in toObject().
    if (data.masteryLevel) this.system.logic = { masteryLevel: data.masteryLevel };
  }
  toObject() {
    const { logic, ...system } = this.system;
    return { _id: this.id, name: this.name, type: this.type, system: structuredClone(system) };
  }
  update(changes) { return ask({ type: "updateItem", actorId: this.actorId, itemId: this.id, changes }); }
}
const actors = new Collection(world.actors.map((data) => {
  const actor = {
    id: data.id, uuid: `Actor.${data.id}`, name: data.name, type: data.type ?? "character", system: structuredClone(data.system ?? {}),
    hasPlayerOwner: Boolean(data.hasPlayerOwner), ownership: data.ownership ?? {}, statuses: new Set(data.statuses ?? []),
    items: new Collection((data.items ?? []).map((item) => [item.id, new Item(data.id, item)])),
    testUserPermission: (user, level) => level === "OWNER" && (user.isGM || (actor.ownership[user.id] ?? 0) >= OWNER),
    get isOwner() { return actor.testUserPermission(users.get(selfId), "OWNER"); },
  };
  return [data.id, actor];
}));

// ---- Rolls and chat messages ----
class Roll {
  /** Roll#dice: the roll's Die terms; `toJSON` gives back the data (what Foundry stores). */
  static fromData(data) {
    return { fromData: data, total: data.total, dice: (data.terms ?? []).filter((term) => term.class === "Die"), toJSON: () => data };
  }
}

const messages = new Collection();
class ChatMessage {
  #source;
  constructor(data) {
    this.#source = structuredClone(data);
    this.id = data._id;
    this.timestamp = data.timestamp;
    this.author = users.get(data.author) ?? null;
    this.#read();
  }
  #read() {
    const source = this.#source;
    Object.assign(this, { content: source.content, speaker: source.speaker, whisper: source.whisper, blind: source.blind, flavor: source.flavor, flags: source.flags });
    this.rolls = source.rolls.map((roll) => Roll.fromData(typeof roll === "string" ? JSON.parse(roll) : roll));
  }
  /** Take an update the server sent. */
  applyChanges(changes) {
    applyUpdate(this.#source, changes);
    this.#read();
  }
  #audience() { return { whisper: this.whisper, blind: this.blind, authorId: this.author?.id ?? null, isRoll: this.isRoll }; }
  get isAuthor() { return this.author?.id === selfId; }
  get isRoll() { return this.rolls.length > 0; }
  get visible() { return messageVisibleTo(this.#audience(), selfId); }
  get isContentVisible() { return messageContentVisibleTo(this.#audience(), selfId); }
  getFlag(scope, key) { return this.flags?.[scope]?.[key]; }
  setFlag(scope, key, value) { return this.update({ flags: { [scope]: { [key]: value } } }); }
  async update(changes) {
    await ask({ type: "updateMessage", id: this.id, changes });
    return this;
  }
  static async create(data) {
    const flags = data.flags ?? {};
    record("create", { cardFor: flags[MODULE_ID]?.card_for ?? null, ping: flags.bench?.ping ?? null });
    const reply = await ask({ type: "createMessage", data });
    return messages.get(reply.data._id);
  }
}

// ---- the chat log ----
const log = document.getElementById("chat-log");
function renderMessage(message) {
  const li = document.createElement("li");
  li.className = "chat-message message";
  li.dataset.messageId = message.id;
  const header = document.createElement("header");
  header.className = "message-header";
  header.textContent = message.author?.name ?? "";
  const content = document.createElement("div");
  content.className = "message-content";
  if (message.isContentVisible) content.innerHTML = message.content;
  else content.textContent = `${message.author?.name ?? "Unknown User"} rolled privately`;
  li.append(header, content);
  callAll("renderChatMessageHTML", message, li, {});
  return li;
}
function postOne(message) {
  if (!message.visible) return;
  log.append(renderMessage(message));
  const cardFor = message.flags?.[MODULE_ID]?.card_for ?? null;
  const ping = message.flags?.bench?.ping ?? null;
  record("shown", { id: message.id, cardFor, ping });
  if (cardFor !== null) count(`shown:card:${cardFor}`);
  if (ping !== null) count(`shown:ping:${ping}`);
}
function updateOne(message) {
  const shown = log.querySelector(`li[data-message-id="${message.id}"]`);
  if (shown) shown.replaceWith(renderMessage(message));
}

// ---- settings: world values from the server, user values of this user, client values in localStorage ----
const registered = new Map([["core.rollMode", { scope: "client", default: "publicroll" }]]);
const worldValues = new Map(Object.entries(world.settings));
const userValues = new Map(Object.entries(world.userSettings));
const scopeOf = (id) => registered.get(id)?.scope ?? "world";
const settings = {
  settings: registered,
  register: (namespace, key, config) => registered.set(`${namespace}.${key}`, config),
  registerMenu: () => {},
  storage: new Map([["client", localStorage]]),
  get(namespace, key) {
    const id = `${namespace}.${key}`;
    const scope = scopeOf(id);
    if (scope === "client") {
      const stored = localStorage.getItem(id);
      return stored === null ? registered.get(id)?.default : JSON.parse(stored);
    }
    const values = scope === "user" ? userValues : worldValues;
    return values.has(id) ? values.get(id) : registered.get(id)?.default;
  },
  async set(namespace, key, value) {
    const id = `${namespace}.${key}`;
    const scope = scopeOf(id);
    if (scope === "world") {
      await ask({ type: "setSetting", key: id, value });
      return;
    }
    if (scope === "client") localStorage.setItem(id, JSON.stringify(value));
    else userValues.set(id, value);
    registered.get(id)?.onChange?.(value);
  },
};

// ---- the module socket ----
const socketHandlers = [];

// ---- what the server sends ----
function onServer(message) {
  switch (message.type) {
    case "module":
      record("module-in", { payload: message.args[0]?.type ?? null });
      count(`module-in:${message.args[0]?.type ?? null}`);
      for (const { name, fn } of socketHandlers) if (name === message.name) fn(...message.args);
      break;
    case "messageCreated": {
      const created = new ChatMessage(message.data);
      messages.set(created.id, created);
      callAll("createChatMessage", created, {}, message.userId);
      postOne(created);
      break;
    }
    case "messageUpdated": {
      const updated = messages.get(message.id);
      if (!updated) break;
      updated.applyChanges(message.changes);
      callAll("updateChatMessage", updated, message.changes, {}, message.userId);
      updateOne(updated);
      break;
    }
    case "itemUpdated": {
      const item = actors.get(message.actorId)?.items.get(message.itemId);
      if (item) applyUpdate(item, message.changes);
      break;
    }
    case "settingChanged":
      worldValues.set(message.key, message.value);
      registered.get(message.key)?.onChange?.(message.value);
      break;
    case "userConnected": {
      const user = users.get(message.userId);
      user.active = message.connected;
      callAll("userConnected", user, message.connected);
      break;
    }
    default:
      break;
  }
  if (message.requestId !== undefined) {
    waiting.get(message.requestId)?.(message);
    waiting.delete(message.requestId);
  }
}
server.addEventListener("message", (event) => onServer(JSON.parse(event.data)));
for (const data of world.messages) {
  const message = new ChatMessage(data);
  messages.set(message.id, message);
}

// ---- the bridge link: the browser's WebSocket, each frame recorded ----
const frameFields = (text) => {
  try {
    const frame = JSON.parse(text);
    return { type: frame.type ?? null, eventId: frame.event_id ?? null, messageId: frame.message_id ?? null };
  } catch {
    return { type: null };
  }
};
globalThis.WebSocket = class extends BrowserWebSocket {
  constructor(...args) {
    super(...args);
    this.addEventListener("message", (event) => record("bridge-in", frameFields(event.data)));
  }
  send(data) {
    record("bridge-out", frameFields(data));
    super.send(data);
  }
};

// ---- the Foundry globals ----
const format = (key, data = {}) => (en[key] ?? key).replace(/\{(\w+)\}/g, (_, name) => String(data[name] ?? `{${name}}`));
const notices = [];
const randomID = (length = 16) => {
  const chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  return Array.from(crypto.getRandomValues(new Uint8Array(length)), (byte) => chars[byte % chars.length]).join("");
};
globalThis.Hooks = { on: addHook(false), once: addHook(true), callAll };
globalThis.ui = { notifications: Object.fromEntries(["info", "warn", "error"].map((level) => [level, (text) => notices.push({ level, text })])) };
globalThis.game = {
  world: { id: world.worldId },
  version: "13.345",
  system: { id: "sohl", version: "0.9.0" },
  get user() { return users.get(selfId); },
  users,
  messages,
  actors,
  modules: new Map([[MODULE_ID, { active: true, version: "0.1.0" }]]),
  settings,
  socket: {
    emit: (name, ...args) => {
      record("module-out", { payload: args[0]?.type ?? null });
      server.send(JSON.stringify({ type: "module", name, args }));
    },
    on: (name, fn) => socketHandlers.push({ name, fn }),
  },
  i18n: { lang: "en", localize: (key) => en[key] ?? key, format },
  clipboard: { copyPlainText: async () => {} },
};
globalThis.ChatMessage = ChatMessage;
globalThis.Roll = Roll;
globalThis.canvas = { tokens: { controlled: [] } };
globalThis.fromUuidSync = (uuid) => {
  const match = /(?:^|\.)Actor\.([^.]+)$/.exec(uuid);
  return match ? actors.get(match[1]) ?? null : null;
};
class ApplicationV2 {
  static DEFAULT_OPTIONS = {};
  constructor(options = {}) { this.options = options; }
  async render() { return this; }
  async close() {}
}
globalThis.foundry = {
  utils: {
    randomID,
    deepClone: (value) => structuredClone(value),
    getProperty: (object, key) => key.split(".").reduce((value, part) => value?.[part], object),
    setProperty: (object, key, value) => applyUpdate(object, { [key]: value }),
    saveDataToFile: () => {},
  },
  applications: { api: { ApplicationV2, DialogV2: { prompt: async () => null } } },
};

// A Spend Fate click, seen before the module's own handler runs.
document.addEventListener("click", (event) => {
  if (!event.target.closest?.(".fate-bridge-spend button")) return;
  record("click", { id: event.target.closest("li[data-message-id]")?.dataset.messageId ?? null });
}, true);

window.bench = {
  userId: selfId,
  events,
  errors,
  notices,
  ready: false,
  /** Post a chat message as this user; resolves with its id once this page has it. */
  post: async (data) => (await ChatMessage.create(data)).id,
  /** How many messages of the log are Fate cards of `messageId` (flag card_for). */
  cardsFor: (messageId) => messages.filter((message) => message.flags?.[MODULE_ID]?.card_for === messageId
    && log.querySelector(`li[data-message-id="${message.id}"]`)).length,
  /** How many events carried `key`: `shown:card:ID` (Fate cards of test ID shown), `shown:ping:N`, `module-in:TYPE`. */
  count: (key) => counts.get(key) ?? 0,
  /**
   * This page's clock against the server's: `{offset, rtt}`, ms, from the sync with the
   * shortest round trip (server time = page time + offset, within rtt / 2).
   */
  async sync() {
    let best = null;
    for (let sample = 0; sample < SYNC_SAMPLES; sample += 1) {
      const sent = now();
      const reply = await ask({ type: "sync" });
      const back = now();
      if (!best || back - sent < best.rtt) best = { rtt: back - sent, offset: reply.now - (sent + back) / 2 };
    }
    return best;
  },
};

await import("/scripts/module.js");
for (const hook of ["init", "i18nInit", "setup", "ready"]) callAll(hook);
for (const message of messages.values()) postOne(message);
window.bench.ready = true;
