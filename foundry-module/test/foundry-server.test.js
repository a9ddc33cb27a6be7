/**
 * The fake Foundry server of the click bench (helpers/foundry-server.js) relays as Foundry's
 * server does: a module socket payload to every OTHER connected client with the sender's id
 * appended; a created or updated ChatMessage to every connected client that sees it (the creator
 * with its request id); `userConnected` to the others. Driven here by plain `ws` clients.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { WebSocket } from "ws";
import { startFoundryServer } from "./helpers/foundry-server.js";
import { applyUpdate } from "./helpers/document-rules.js";

const USERS = [
  { id: "gm00000000000001", name: "GM", isGM: true },
  { id: "player0000000001", name: "Player One", isGM: false },
  { id: "player0000000002", name: "Player Two", isGM: false },
];
const [GM, ONE, TWO] = USERS.map((user) => user.id);

/** A client connected as `userId`: its inbox, `next(type, match)` (the next message of that type `match` accepts), `send`. */
async function connect(foundry, userId) {
  const ws = new WebSocket(foundry.socketUrl(userId));
  const inbox = [];
  const waiters = [];
  ws.on("message", (data) => {
    inbox.push(JSON.parse(String(data)));
    for (const waiter of waiters.splice(0)) waiter();
  });
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  const next = async (type, match = () => true) => {
    for (;;) {
      const index = inbox.findIndex((message) => message.type === type && match(message));
      if (index >= 0) return inbox.splice(index, 1)[0];
      await new Promise((resolve) => waiters.push(resolve));
    }
  };
  return { inbox, next, send: (message) => ws.send(JSON.stringify(message)), close: () => ws.close() };
}

async function world(t) {
  const foundry = await startFoundryServer({
    worldId: "w", users: USERS, actors: [{ id: "actor00000000001", name: "A", items: [{ id: "item000000000001", name: "I", system: { charges: { value: 2 } } }] }],
    settings: { "fate-bridge.bridgeUrl": "ws://127.0.0.1:1" }, userSettings: { [GM]: { "fate-bridge.token": "t" } },
  });
  t.after(() => foundry.close());
  const clients = {};
  for (const id of [GM, ONE, TWO]) {
    clients[id] = await connect(foundry, id);
    t.after(() => clients[id].close());
  }
  for (const id of [GM, ONE, TWO]) await clients[id].next("world");
  return { foundry, clients };
}

test("a client gets the world: who is connected, the actors, the world settings and its own user settings", async (t) => {
  const foundry = await startFoundryServer({ worldId: "w", users: USERS, actors: [], settings: { "fate-bridge.bridgeUrl": "u" }, userSettings: { [GM]: { "fate-bridge.token": "t" } } });
  t.after(() => foundry.close());
  const gm = await connect(foundry, GM);
  t.after(() => gm.close());
  const first = await gm.next("world");
  assert.deepEqual(first.users.map((user) => [user.id, user.active]), [[GM, true], [ONE, false], [TWO, false]]);
  assert.deepEqual([first.settings, first.userSettings, first.messages], [{ "fate-bridge.bridgeUrl": "u" }, { "fate-bridge.token": "t" }, []]);
  const one = await connect(foundry, ONE);
  t.after(() => one.close());
  assert.deepEqual((await one.next("world")).userSettings, {}, "another user's settings stay with that user");
  assert.deepEqual(await gm.next("userConnected"), { type: "userConnected", userId: ONE, connected: true });
});

test("a module socket payload reaches every other client, the sender's id appended, never the sender", async (t) => {
  const { clients } = await world(t);
  clients[ONE].send({ type: "module", name: "module.fate-bridge", args: [{ type: "request", request_id: "r1" }] });
  for (const id of [GM, TWO]) {
    assert.deepEqual(await clients[id].next("module"), { type: "module", name: "module.fate-bridge", args: [{ type: "request", request_id: "r1" }, ONE] });
  }
  // The sender's next message is its own sync answer, not its payload.
  clients[ONE].send({ type: "sync", requestId: 7 });
  assert.equal((await clients[ONE].next("sync")).requestId, 7);
  assert.deepEqual(clients[ONE].inbox.filter((message) => message.type === "module"), []);
});

test("a created message reaches those who see it; the creator's copy carries its request id", async (t) => {
  const { clients } = await world(t);
  clients[ONE].send({ type: "createMessage", requestId: 1, data: { content: "<p>hi</p>" } });
  const mine = await clients[ONE].next("messageCreated");
  assert.equal(mine.requestId, 1);
  assert.match(mine.data._id, /^msg\d{13}$/);
  assert.equal(mine.data.author, ONE, "the creating user is the author");
  assert.ok(Number.isInteger(mine.data.timestamp), "the server sets the timestamp");
  for (const id of [GM, TWO]) assert.deepEqual(await clients[id].next("messageCreated"), { type: "messageCreated", data: mine.data, userId: ONE });

  // Whispered to the GM without rolls: the author and the GM only (Foundry v13's `visible`).
  clients[ONE].send({ type: "createMessage", requestId: 2, data: { content: "<p>psst</p>", whisper: [GM] } });
  const whisper = await clients[ONE].next("messageCreated");
  assert.equal((await clients[GM].next("messageCreated")).data._id, whisper.data._id);
  // With a roll it is in everyone's log (the others read Foundry's "rolled privately" stub).
  clients[ONE].send({ type: "createMessage", requestId: 3, data: { content: "<p>roll</p>", whisper: [GM], rolls: [{ total: 3 }] } });
  const roll = await clients[ONE].next("messageCreated");
  assert.equal((await clients[TWO].next("messageCreated")).data._id, roll.data._id, "player two's next message is the roll, not the whisper");

  // An update goes to the same readers, merged as Foundry merges it.
  clients[GM].send({ type: "updateMessage", requestId: 9, id: whisper.data._id, changes: { flags: { "fate-bridge": { graded: { level: 0 } } } } });
  assert.equal((await clients[GM].next("messageUpdated")).requestId, 9);
  assert.deepEqual((await clients[ONE].next("messageUpdated")).changes, { flags: { "fate-bridge": { graded: { level: 0 } } } });
  clients[TWO].send({ type: "sync", requestId: 10 });
  await clients[TWO].next("sync");
  assert.deepEqual(clients[TWO].inbox.filter((message) => message.type === "messageUpdated"), []);
});

test("an item update and a world setting reach every client; a leaving client is announced", async (t) => {
  const { clients } = await world(t);
  clients[GM].send({ type: "updateItem", requestId: 4, actorId: "actor00000000001", itemId: "item000000000001", changes: { "system.charges.value": 1 } });
  assert.equal((await clients[GM].next("itemUpdated")).requestId, 4);
  for (const id of [ONE, TWO]) assert.deepEqual((await clients[id].next("itemUpdated")).changes, { "system.charges.value": 1 });
  clients[GM].send({ type: "setSetting", requestId: 5, key: "fate-bridge.diceSettings", value: { provable: false } });
  for (const id of [GM, ONE, TWO]) assert.deepEqual((await clients[id].next("settingChanged")).value, { provable: false });
  clients[TWO].close();
  assert.deepEqual(await clients[GM].next("userConnected", (message) => !message.connected), { type: "userConnected", userId: TWO, connected: false });
});

test("an update merges objects key by key and replaces arrays and values, dotted keys naming nested fields", () => {
  const data = { flags: { "fate-bridge": { graded: { level: 0, points: [1, 2] }, test_of: "a" } }, system: { charges: { value: 2, max: 3 } } };
  applyUpdate(data, { flags: { "fate-bridge": { graded: { points: [3] }, fated: null } }, "system.charges.value": 1 });
  assert.deepEqual(data, { flags: { "fate-bridge": { graded: { level: 0, points: [3] }, test_of: "a", fated: null } }, system: { charges: { value: 1, max: 3 } } });
});
