/**
 * A small fake Foundry *server* for real browser pages (the click bench, bench/click.js). Over
 * HTTP it serves the page, which loads the fake client (foundry-page.js) and then the module's real
 * entry point (scripts/module.js, as Foundry loads it); over one WebSocket per page
 * (`/foundry?user=ID`, standing in for Foundry's socket.io connection) it relays between the pages
 * what Foundry's server relays:
 * - the module socket: what one client emits on `module.fate-bridge` goes to every OTHER connected
 *   client, the sender's user id appended ("the initial requester ... and all other connected
 *   clients who receive a broadcast": foundryvtt.wiki/en/development/api/sockets; as fake-foundry.js);
 * - ChatMessage creation and update: the server gives a new message its id, its author (the
 *   creating user unless the data names one) and its `timestamp` (server time), keeps it, and
 *   sends it to every connected client whose user sees it, the creator included: its
 *   `ChatMessage.create` resolves when its own copy arrives. Foundry's server source is not
 *   public: who sees a message is its client's rule, `ChatMessage#visible` (document-rules.js);
 * - an actor's item update and a world setting's new value: to every connected client;
 * - a page connecting or leaving: `userConnected` to every other page.
 * A client that connects gets the world first: users (who is connected), actors, the messages it
 * sees, the world settings and its user's own settings.
 * It also answers `sync` with its clock (`performance.timeOrigin + performance.now()`, ms), so the
 * bench can put every page's times on one clock.
 */
import { readFileSync } from "node:fs";
import { createServer } from "node:http";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { WebSocketServer } from "ws";
import { applyUpdate, messageVisibleTo } from "./document-rules.js";

const HELPERS = path.dirname(fileURLToPath(import.meta.url));
const MODULE = path.resolve(HELPERS, "../..");
/** Files the page may load: the module's runtime folders, and the two helpers the page runs. */
const SERVED_FOLDERS = ["scripts", "lang", "styles"];
const PAGE_HELPERS = new Set(["foundry-page.js", "document-rules.js"]);
const TYPES = { ".js": "text/javascript", ".json": "application/json", ".css": "text/css", ".html": "text/html" };
const PAGE = '<!doctype html><html lang="en"><head><meta charset="utf-8"><title>Foundry (fake)</title>'
  + '<link rel="stylesheet" href="/styles/fate-bridge.css"></head>'
  + '<body><ol id="chat-log" class="chat-log"></ol><script type="module" src="/helpers/foundry-page.js"></script></body></html>';

/** Where a client's WebSocket connects (`?user=ID`); foundry-page.js connects there. */
const SOCKET_PATH = "/foundry";
/** This server's clock, ms (the time `sync` answers with). */
export const serverNow = () => performance.timeOrigin + performance.now();

/** The file a request path names, or null when it is not one the page may load. */
function servedFile(pathname) {
  const [, top, ...rest] = path.posix.normalize(pathname).split("/");
  if (top === "helpers") return rest.length === 1 && PAGE_HELPERS.has(rest[0]) ? path.join(HELPERS, rest[0]) : null;
  return SERVED_FOLDERS.includes(top) && rest.length ? path.join(MODULE, top, ...rest) : null;
}

/**
 * Start the server on a free port of 127.0.0.1.
 *
 * @param {object} world
 * @param {string} world.worldId `game.world.id`
 * @param {Array<{id: string, name: string, isGM: boolean}>} world.users
 * @param {object[]} world.actors actors as plain data ({id, name, type, system, hasPlayerOwner,
 *   ownership, items: [{id, name, type, system, flags, masteryLevel?}]})
 * @param {Record<string, unknown>} world.settings world settings, `namespace.key` -> value
 * @param {Record<string, Record<string, unknown>>} world.userSettings user id -> its user-scope settings
 *   (read when that user's client connects)
 * @returns {Promise<{url: string, pageUrl(userId: string): string, socketUrl(userId: string): string,
 *   setWorldSetting(key: string, value: unknown): void, close(): Promise<void>}>} `pageUrl`: the page
 *   of that user; `socketUrl`: the WebSocket a client of that user connects to; `setWorldSetting`:
 *   a world setting changed (as a GM's client changes it): kept and sent to every connected client
 */
export async function startFoundryServer({ worldId, users, actors, settings, userSettings }) {
  const clients = new Map();
  const messages = new Map();
  const actorData = structuredClone(actors);
  const worldSettings = { ...settings };
  let created = 0;

  const http = createServer((request, response) => {
    const { pathname } = new URL(request.url, "http://page");
    const file = pathname === "/" ? null : servedFile(pathname);
    let body = pathname === "/" ? PAGE : null;
    if (file) {
      try {
        body = readFileSync(file);
      } catch {
        body = null;
      }
    }
    const type = file ? TYPES[path.extname(file)] ?? "application/octet-stream" : TYPES[".html"];
    response.writeHead(body === null ? 404 : 200, { "content-type": type });
    response.end(body ?? "not found");
  });
  const sockets = new WebSocketServer({ server: http, path: SOCKET_PATH });

  const send = (ws, message) => ws.send(JSON.stringify(message));
  const audience = (data) => ({ whisper: data.whisper, blind: data.blind, authorId: data.author, isRoll: data.rolls.length > 0 });
  /** Every connected client whose user sees `data`. */
  const readers = (data) => [...clients].filter(([id]) => messageVisibleTo(audience(data), id));
  const others = (userId) => [...clients].filter(([id]) => id !== userId);

  /** Keep a world setting's new value and send it to every connected client (`asker` gets its request id). */
  function setWorldSetting(key, value, asker = null, requestId = undefined) {
    worldSettings[key] = value;
    for (const [id, peer] of clients) send(peer, { type: "settingChanged", key, value, ...(id === asker ? { requestId } : {}) });
  }

  function receive(userId, ws, message) {
    const { type, requestId } = message;
    if (type === "module") {
      for (const [, peer] of others(userId)) send(peer, { type: "module", name: message.name, args: [...message.args, userId] });
    } else if (type === "createMessage") {
      created += 1;
      const data = {
        content: "", speaker: {}, whisper: [], blind: false, rolls: [], flags: {}, ...structuredClone(message.data),
        _id: `msg${String(created).padStart(13, "0")}`, timestamp: Date.now(),
      };
      data.author ??= userId;
      messages.set(data._id, data);
      for (const [id, peer] of readers(data)) send(peer, { type: "messageCreated", data, userId, ...(id === userId ? { requestId } : {}) });
    } else if (type === "updateMessage") {
      const data = messages.get(message.id);
      applyUpdate(data, message.changes);
      for (const [id, peer] of readers(data)) send(peer, { type: "messageUpdated", id: message.id, changes: message.changes, userId, ...(id === userId ? { requestId } : {}) });
    } else if (type === "updateItem") {
      const item = actorData.find((actor) => actor.id === message.actorId)?.items.find((entry) => entry.id === message.itemId);
      if (item) applyUpdate(item, message.changes);
      for (const [id, peer] of clients) send(peer, { type: "itemUpdated", actorId: message.actorId, itemId: message.itemId, changes: message.changes, ...(id === userId ? { requestId } : {}) });
    } else if (type === "setSetting") {
      setWorldSetting(message.key, message.value, userId, requestId);
    } else if (type === "sync") {
      send(ws, { type: "sync", requestId, now: serverNow() });
    }
  }

  sockets.on("connection", (ws, request) => {
    const userId = new URL(request.url, "http://page").searchParams.get("user");
    if (!users.some((user) => user.id === userId)) {
      ws.close(4004, "no such user");
      return;
    }
    clients.set(userId, ws);
    send(ws, {
      type: "world", worldId, userId, actors: actorData, settings: worldSettings, userSettings: userSettings[userId] ?? {},
      users: users.map((user) => ({ ...user, active: clients.has(user.id) })),
      messages: [...messages.values()].filter((data) => messageVisibleTo(audience(data), userId)),
    });
    for (const [, peer] of others(userId)) send(peer, { type: "userConnected", userId, connected: true });
    ws.on("message", (text) => receive(userId, ws, JSON.parse(String(text))));
    ws.on("close", () => {
      clients.delete(userId);
      for (const [, peer] of clients) send(peer, { type: "userConnected", userId, connected: false });
    });
  });

  await new Promise((resolve) => http.listen(0, "127.0.0.1", resolve));
  const url = `http://127.0.0.1:${http.address().port}`;
  return {
    url,
    pageUrl: (userId) => `${url}/?user=${encodeURIComponent(userId)}`,
    setWorldSetting: (key, value) => setWorldSetting(key, value),
    socketUrl: (userId) => `${url.replace("http:", "ws:")}${SOCKET_PATH}?user=${encodeURIComponent(userId)}`,
    close: () => new Promise((resolve) => {
      for (const ws of sockets.clients) ws.terminate();
      sockets.close();
      http.close(() => resolve());
    }),
  };
}
