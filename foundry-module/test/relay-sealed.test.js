/**
 * Issue 24: "relay replies and notices that carry a GM-only or blind answer reach only their
 * recipient where Foundry allows it, or carry nothing private." Foundry's server hands a module
 * socket payload to every other connected client (fake-foundry.js cites it), so the answer of a
 * sealed relay action (the pool ledger a GM reads: GM-only entries) travels encrypted to the
 * requester's per-request key (logic/sealed-reply.js, logic/relay.js "Sealed replies").
 * WebCrypto is Node 20's own `globalThis.crypto.subtle` (the same API browsers have).
 */
import { test, describe, afterEach } from "node:test";
import assert from "node:assert/strict";
import { install } from "../scripts/main.js";
import * as pool from "../scripts/rulesets/pool/index.js";
import { LINK_LIMITS } from "../scripts/logic/link-holder.js";
import { createRelayHub } from "../scripts/logic/relay.js";
import { createReplyKey, isReplyKey, REPLY_KEY_LENGTH, sealReply } from "../scripts/logic/sealed-reply.js";
import { clientWebSocketClass, installFakeFoundry, uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { FakeClock, fakeWebSocketClass, flush } from "./helpers/fake-socket.js";

const subtle = globalThis.crypto.subtle;
const randomValues = (bytes) => globalThis.crypto.getRandomValues(bytes);

describe("sealed-reply.js: ECDH P-256, HKDF-SHA-256, AES-GCM", () => {
  const context = { to: "gmA0000000000001", requestId: "req0000000000001" };

  test("what the holder seals to a reply key, only that key's holder opens, for that recipient and request", async () => {
    const key = await createReplyKey(subtle);
    assert.equal(isReplyKey(key.replyKey), true);
    assert.equal(key.replyKey.length, REPLY_KEY_LENGTH);
    const outcome = { ok: true, result: { characters: [{ name: "Grimsnag", stamina: 37 }] } };
    const sealed = await sealReply(subtle, key.replyKey, outcome, context, randomValues);
    assert.deepEqual(Object.keys(sealed).sort(), ["data", "iv", "key"]);
    assert.doesNotMatch(JSON.stringify(sealed), /Grimsnag|stamina|characters/);
    assert.deepEqual(await key.open(sealed, context), outcome);

    const eavesdropper = await createReplyKey(subtle);
    await assert.rejects(eavesdropper.open(sealed, context), "another key cannot open it");
    await assert.rejects(key.open(sealed, { ...context, to: "playerUser00001" }), "sealed for another recipient");
    await assert.rejects(key.open(sealed, { ...context, requestId: "req0000000000002" }), "sealed for another request");
    const flipped = sealed.data[0] === "A" ? "B" : "A";
    await assert.rejects(key.open({ ...sealed, data: flipped + sealed.data.slice(1) }, context), "altered ciphertext");
  });

  test("a reply key that is not one is refused by name", async () => {
    await assert.rejects(sealReply(subtle, "not-a-key", {}, context, randomValues), /reply_key/);
    assert.equal(isReplyKey("A".repeat(REPLY_KEY_LENGTH)), true, "shaped like a key (the point is checked on import)");
    await assert.rejects(sealReply(subtle, "A".repeat(REPLY_KEY_LENGTH), {}, context, randomValues), "not a point on P-256");
    const key = await createReplyKey(subtle);
    await assert.rejects(key.open({ key: key.replyKey, iv: "***", data: "" }, context), /sealed\.iv/);
  });
});

/**
 * Three hubs on one fake socket, each with its own WebCrypto (null: a browser outside a secure
 * context). `deliver()` hands what was sent to every other client with the sender's id.
 */
function hubs({ crypto = {} } = {}) {
  const users = { gm: { id: "gm", isGM: true }, gm2: { id: "gm2", isGM: true }, player: { id: "player", isGM: false } };
  const wire = [];
  const clock = new FakeClock();
  const runs = [];
  const all = {};
  for (const name of Object.keys(users)) {
    let n = 0;
    all[name] = createRelayHub({
      timers: clock,
      newId: () => `${name}-req${++n}`,
      port: {
        send: (payload) => wire.push({ payload: structuredClone(payload), senderId: users[name].id }),
        isLinkHolder: () => name === "gm",
        linkHolderId: () => "gm",
        currentUser: () => users[name],
        isGMUser: (id) => Boolean(users[id]?.isGM),
      },
      crypto: name in crypto ? crypto[name] : { subtle, randomValues },
    });
    all[name].on("pool", "ledger", (_data, who) => {
      runs.push(who.userId);
      return { characters: [{ name: who.isGM ? "Grimsnag" : "Lilly", stamina: 37 }] };
    }, { sealed: (who) => who.isGM });
    all[name].on("pool", "roll", () => true);
  }
  async function deliver() {
    for (const hub of Object.values(all)) await hub.idle();
    const batch = wire.splice(0);
    for (const { payload, senderId } of batch) {
      for (const [name, hub] of Object.entries(all)) if (users[name].id !== senderId) hub.receive(payload, senderId);
    }
    await flush();
    for (const hub of Object.values(all)) await hub.idle();
    return batch.map(({ payload }) => payload);
  }
  /** Deliver until the wire is quiet; every payload delivered, in order. */
  async function exchange() {
    const seen = [];
    for (let round = 0; round < 6; round += 1) seen.push(...(await deliver()));
    return seen;
  }
  return { all, wire, runs, deliver, exchange };
}

describe("the hub seals the answers of sealed actions", () => {
  test("a GM's sealed request: the done every browser receives holds only ciphertext; the GM reads the answer", async () => {
    const { all, runs, exchange } = hubs();
    const answer = all.gm2.request("pool", "ledger", {});
    const seen = await exchange();
    assert.deepEqual(seen.map((p) => p.type), ["request", "ack", "go", "done"]);
    assert.equal(isReplyKey(seen[0].reply_key), true, "the request carries its reply key");
    const done = seen[3];
    assert.deepEqual(Object.keys(done).sort(), ["request_id", "sealed", "to", "type"]);
    // (Digits are not checked in the ciphertext: random base64 may hold any.)
    assert.doesNotMatch(JSON.stringify(done), /Grimsnag|Lilly|characters|result/);
    assert.deepEqual(runs, ["gm2"]);
    assert.deepEqual(await answer, { characters: [{ name: "Grimsnag", stamina: 37 }] });
  });

  test("an action not registered sealed carries no key and answers in clear, as before", async () => {
    const { all, exchange } = hubs();
    const answer = all.player.request("pool", "roll", {});
    const seen = await exchange();
    assert.equal("reply_key" in seen[0], false);
    assert.deepEqual(seen.at(-1), { type: "done", to: "player", request_id: "player-req1", ok: true, result: true });
    assert.equal(await answer, true);
  });

  test("a GM's browser without WebCrypto: refused needs_secure_context, and the handler never runs", async () => {
    const { all, runs, exchange } = hubs({ crypto: { gm2: null } });
    const answer = all.gm2.request("pool", "ledger", {}).catch((error) => error.code);
    const seen = await exchange();
    assert.equal("reply_key" in seen[0], false);
    assert.deepEqual(seen.map((p) => p.type), ["request", "done"], "answered at once, never held");
    assert.equal(seen[1].error.code, "needs_secure_context");
    assert.doesNotMatch(JSON.stringify(seen), /Grimsnag/);
    assert.deepEqual(runs, []);
    assert.equal(await answer, "needs_secure_context");
  });

  test("a player's browser without WebCrypto still gets its own ledger (sealed for GMs only)", async () => {
    const { all, exchange } = hubs({ crypto: { player: null } });
    const answer = all.player.request("pool", "ledger", {});
    await exchange();
    assert.deepEqual(await answer, { characters: [{ name: "Lilly", stamina: 37 }] });
  });

  test("a player's browser with WebCrypto gets even its own ledger sealed", async () => {
    const { all, exchange } = hubs();
    const answer = all.player.request("pool", "ledger", {});
    const seen = await exchange();
    assert.deepEqual(Object.keys(seen.at(-1)).sort(), ["request_id", "sealed", "to", "type"]);
    assert.doesNotMatch(JSON.stringify(seen), /Lilly/);
    assert.deepEqual(await answer, { characters: [{ name: "Lilly", stamina: 37 }] });
  });

  test("a sealed option that is neither a boolean nor a function is refused by name", () => {
    const { all } = hubs();
    assert.throws(() => all.gm.on("pool", "peek", () => null, { sealed: "yes" }), { name: "TypeError", message: /sealed of pool peek/ });
  });

  test("a holder that cannot seal answers internal, never the answer in clear", async () => {
    const { all, exchange } = hubs({ crypto: { gm: null } });
    const answer = all.gm2.request("pool", "ledger", {}).catch((error) => error.code);
    const seen = await exchange();
    assert.equal(seen.at(-1).error.code, "internal");
    assert.doesNotMatch(JSON.stringify(seen), /Grimsnag/);
    assert.equal(await answer, "internal");
  });

  test("a sealed request answered in clear, or with a seal that does not open, is refused, not shown", async () => {
    for (const forged of [
      () => ({ ok: true, result: { characters: ["in clear"] } }),
      () => ({ sealed: { key: "A".repeat(REPLY_KEY_LENGTH), iv: "AAAAAAAAAAAAAAAA", data: "AAAA" } }),
    ]) {
      const { all, wire } = hubs();
      const answer = all.gm2.request("pool", "ledger", {}).catch((error) => error.code);
      await all.gm2.idle();
      const requestId = wire.splice(0)[0].payload.request_id;
      all.gm2.receive({ type: "done", to: "gm2", request_id: requestId, ...forged(requestId) }, "gm");
      await all.gm2.idle();
      assert.equal(await answer, "internal");
    }
  });
});

/** User ids: GM A (no token) asks, GM B (token) holds the link, the player watches. */
const GM_A = "gmA0000000000001";
const GM_B = "gmB0000000000002";
const PLAYER = "playerUser00001";
const LILLY = { character_id: "actorLilly000001", name: "Lilly", kind: "pc", owner_user_ids: [PLAYER], level: 3, tier: 2, stamina: 4, session_fate: 3, earned_fate: 1, destiny: 2, fate: 4 };
/** Another player's character (GM A sees it, the player does not), with numbers found nowhere else in the exchange. */
const GRIMSNAG = { character_id: "actorGrimsnag001", name: "Grimsnag", kind: "pc", owner_user_ids: ["strangerUser001"], level: 7, tier: 3, stamina: 713, session_fate: 641, earned_fate: 529, destiny: 887, fate: 1170 };

/**
 * A world where GM B holds the bridge link and GM A, without the token, opens the pool ledger;
 * each browser runs the real module (main.js) with the pool ruleset. The bridge answers `hello`
 * with `welcome` and `pool_ledger_query` with the whole ledger (docs/protocol.md "pool").
 */
async function ledgerWorld() {
  const Socket = fakeWebSocketClass();
  const world = installFakeFoundry({ WebSocket: clientWebSocketClass(Socket), clientStorage: { [GM_B]: { "fate-bridge.token": JSON.stringify("secret") } } });
  world.addUser({ id: GM_A, name: "GM Ada", isGM: true, active: false });
  world.addUser({ id: GM_B, name: "GM Bo", isGM: true, active: false });
  world.addUser({ id: PLAYER, name: "Player One", active: false });
  world.activeGMId = null;
  const clock = new FakeClock();
  const handles = new Map();
  const queries = [];
  /** Everything the player's browser receives on the module socket, as Foundry hands it over. */
  const playerReceived = [];
  const read = new Map();
  const serve = () => {
    for (const socket of Socket.instances) {
      if (socket.readyState === 0 && !socket.closed) socket.open();
      if (socket.readyState !== 1) continue;
      const frames = socket.sent.slice(read.get(socket) ?? 0);
      read.set(socket, socket.sent.length);
      for (const frame of frames) {
        if (frame.type === "hello") {
          socket.receive({ type: "welcome", v: 1, world_id: frame.world_id, bridge_version: "0.1.0", protocol_version: 1, rulesets: ["pool"], settings: {} });
        } else if (frame.type === "pool_ledger_query") {
          queries.push(frame);
          socket.receive({ type: "pool_ledger", v: 1, event_id: frame.event_id, action: "query", session_open: true, characters: [LILLY, GRIMSNAG], card: null });
        }
      }
    }
  };
  const env = {
    world, handles, queries, playerReceived,
    join(id) {
      world.connectUser(id, true);
      handles.set(id, world.asClient(id, () => {
        const handle = install({ rulesets: [pool], timers: world.clientTimers(clock) });
        for (const hook of ["init", "setup", "ready"]) world.callHook(hook);
        return handle;
      }));
    },
    /** Socket deliveries, bridge answers, promise callbacks and sealing, a few rounds (no clock time passes). */
    async pump() {
      for (let round = 0; round < 8; round += 1) {
        world.deliverSocket();
        serve();
        await flush();
        for (const [id, handle] of handles) await world.asClient(id, () => handle.relayIdle());
      }
    },
    /** `text` typed in the chat of `id`'s browser (its own chatMessage hook only). */
    chat(id, text) {
      for (const entry of world.hooks.get("chatMessage")) if (entry.fn.owner === id) entry.fn(null, text);
    },
    panel: () => world.dom.window.document.querySelector("#fate-bridge-pool-ledger"),
  };
  for (const id of [GM_B, GM_A, PLAYER]) env.join(id);
  world.asClient(PLAYER, () => globalThis.game.socket.on("module.fate-bridge", (...args) => playerReceived.push(structuredClone(args))));
  await env.pump();
  clock.advance(LINK_LIMITS.CLAIM_DELAY_MS);
  await env.pump();
  assert.notEqual(handles.get(GM_B).connection(), null, "GM B holds the link");
  assert.equal(handles.get(GM_A).connection(), null, "GM A has no link");
  playerReceived.length = 0;
  return env;
}

describe("the pool ledger a GM without the link opens (issue 24)", () => {
  let env;
  afterEach(() => {
    for (const [id, handle] of env?.handles ?? []) env.world.asClient(id, () => handle.dispose());
    env = null;
    uninstallFakeFoundry();
  });

  test("the player's browser receives the relayed reply and can read none of its entries; GM A's panel shows the ledger", async () => {
    env = await ledgerWorld();
    env.chat(GM_A, "/pool ledger");
    await env.pump();

    assert.deepEqual(env.queries.map((q) => [q.user_id, q.user_is_gm]), [[GM_A, true]], "asked once, for GM A");
    const rows = [...env.panel().querySelectorAll(".pool-ledger-row")];
    assert.deepEqual(rows.map((row) => row.dataset.characterId), [LILLY.character_id, GRIMSNAG.character_id]);
    assert.match(rows[1].textContent, /^Grimsnag7 \(Tier 3\)641 session \+ 529 earned887/);
    assert.equal(rows[1].querySelector("input").value, "713");

    const payloads = env.playerReceived.map(([payload]) => payload);
    const done = payloads.find((p) => p.type === "done" && p.to === GM_A);
    assert.ok(done, "the reply did reach the player's browser (Foundry broadcasts)");
    assert.deepEqual(Object.keys(done).sort(), ["request_id", "sealed", "to", "type"]);
    // Everything but the ciphertext, read as text; the ciphertext decoded, read as bytes.
    const clear = JSON.stringify(env.playerReceived, (key, value) => (key === "sealed" ? "<sealed>" : value));
    // Each as a whole token: random ids and keys (base64url) may hold "887" by chance.
    for (const secret of ["Grimsnag", "actorGrimsnag001", "Lilly", "713", "641", "529", "887", "1170", "characters", "session_fate"]) {
      const token = new RegExp(`(?<![A-Za-z0-9_-])${secret}(?![A-Za-z0-9_-])`);
      assert.equal(token.test(clear), false, `the player received ${secret}`);
    }
    const bytes = Buffer.from(done.sealed.data, "base64url").toString("latin1");
    for (const secret of ["Grimsnag", "actorGrimsnag001", "characters"]) assert.equal(bytes.includes(secret), false, `${secret} in the ciphertext`);
    // The player saw GM A's reply key in the request: it still cannot open what was sealed to it.
    const eavesdropper = await createReplyKey(subtle);
    await assert.rejects(eavesdropper.open(done.sealed, { to: GM_A, requestId: done.request_id }));
  });

  test("a forged reply from a player is refused, even sealed to the key it saw; the GM's real answer is shown", async () => {
    env = await ledgerWorld();
    env.chat(GM_A, "/pool ledger");
    // Deliver the request alone (sent once GM A's browser made its key): the player's browser sees it, reply key included.
    await env.handles.get(GM_A).relayIdle();
    env.world.deliverSocket();
    const request = env.playerReceived.map(([payload]) => payload).find((p) => p.type === "request" && p.ruleset === "pool");
    assert.equal(isReplyKey(request.reply_key), true);
    const forgedEntries = { ok: true, result: { session_open: false, characters: [{ ...GRIMSNAG, name: "Forged", stamina: 1 }] } };
    const sealed = await sealReply(subtle, request.reply_key, forgedEntries, { to: GM_A, requestId: request.request_id }, randomValues);
    env.world.asClient(PLAYER, () => globalThis.game.socket.emit("module.fate-bridge", { type: "done", to: GM_A, request_id: request.request_id, sealed }));
    await env.pump();
    const rows = [...env.panel().querySelectorAll(".pool-ledger-row")].map((row) => row.textContent);
    assert.equal(rows.some((row) => row.includes("Forged")), false, "the player's forged done was ignored");
    assert.equal(rows.length, 2);
    assert.match(rows[1], /^Grimsnag/, "GM B's real answer");
  });
});
