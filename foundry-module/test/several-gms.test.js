/**
 * Issue 24: every GM, every moment. Several browsers on one fake world, each running its own copy
 * of the real module (main.js) as its own user (fake-foundry.js `asClient`): GMs with and without
 * the bridge token, joining and leaving, a player clicking, and a fake bridge that keeps one link
 * per world and answers a repeated event_id with its stored reply. The link holder is elected as
 * logic/link-holder.js says; tests rolled while no link was up are caught up (rulesets/sohl
 * CATCH_UP). No real time passes: one FakeClock drives every browser's timers.
 */
import { test, describe, afterEach } from "node:test";
import assert from "node:assert/strict";
import { install } from "../scripts/main.js";
import * as sohl from "../scripts/rulesets/sohl/index.js";
import { CATCH_UP } from "../scripts/rulesets/sohl/index.js";
import { firstGradingEventId } from "../scripts/rulesets/sohl/messages.js";
import { LINK_LIMITS, LINK_TYPES, createLinkElection } from "../scripts/logic/link-holder.js";
import { PAIRING_TYPES, TOKEN_SEAL_INFO } from "../scripts/logic/token-pairing.js";
import { createReplyKey, sealReply } from "../scripts/logic/sealed-reply.js";
import { clientWebSocketClass, installFakeFoundry, uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { FakeClock, fakeWebSocketClass, flush, until } from "./helpers/fake-socket.js";
import { archeryCard, basicFolk, basicFolkItems } from "./helpers/sohl-fixtures.js";

/** User ids: GM A sorts before GM B, GM B before GM C (the election's tie-break is the lower id; the fake's activeGM too). */
const GM_A = "gmA0000000000001";
const GM_B = "gmB0000000000002";
const GM_C = "gmC0000000000003";
const PLAYER = "playerUser00001";
const NAMES = { [GM_A]: "GM Ada", [GM_B]: "GM Bo", [GM_C]: "GM Cy", [PLAYER]: "Player One" };
/** A player's own WebCrypto (Node's), to forge with. */
const { subtle } = globalThis.crypto;
const randomValues = (bytes) => globalThis.crypto.getRandomValues(bytes);

/**
 * The bridge's side of every browser's WebSocket, as bridge/server.py and docs/protocol.md say:
 * `hello` gets `welcome`; a second link for the world closes the older one with 4003 "superseded
 * by NAME (Foundry VERSION)" (server.py: one link per world); a `test_rolled` whose event_id was
 * handled before gets the stored reply and is not handled again ("Sending the same `event_id`
 * again returns the stored reply ... and does nothing twice"). Other frames are left unanswered.
 */
function fakeBridge(Socket) {
  /** @type {Map<string, object>} event_id -> stored reply */
  const stored = new Map();
  const read = new Map();
  let holder = null;
  const bridge = {
    /** Message ids graded (each handled once), in order. */
    graded: [],
    /** Every `test_rolled` frame received, on any link. */
    rolled: [],
    /**
     * Open each new socket and answer what each live one sent since the last call.
     * @param {{answer?: boolean}} [options] answer false: handle the requests but send no reply
     *   (the browser is gone before it reads it)
     */
    serve({ answer = true } = {}) {
      for (const socket of Socket.instances) {
        if (socket.readyState === 0 && !socket.closed) socket.open();
        if (socket.readyState !== 1) continue;
        const frames = socket.sent.slice(read.get(socket) ?? 0);
        read.set(socket, socket.sent.length);
        for (const frame of frames) {
          if (frame.type === "hello") {
            if (holder && holder !== socket && holder.readyState === 1) holder.drop(4003, `superseded by ${frame.client.user_name} (Foundry ${frame.client.foundry_version})`);
            holder = socket;
            socket.receive({ type: "welcome", v: 1, world_id: frame.world_id, bridge_version: "0.1.0", protocol_version: 1, rulesets: ["sohl"], settings: { fate_option: "everyone" } });
          } else if (frame.type === "test_rolled") {
            bridge.rolled.push(frame);
            if (!stored.has(frame.event_id)) {
              bridge.graded.push(frame.message_id);
              stored.set(frame.event_id, {
                type: "test_graded", v: 1, event_id: frame.event_id, message_id: frame.message_id, level: 0, label: "MF", success: false,
                critical: false, fate: { eligible: true, reasons: [], fate_ml: 77, points: ["mystery00000000"] }, mismatch: null,
              });
            }
            if (answer) socket.receive(stored.get(frame.event_id));
          }
        }
      }
    },
  };
  return bridge;
}

let env;

/**
 * A world with three GMs (A and B have the bridge token, C has none), a player owning the Basic
 * Folk actor, nobody connected yet, and a probe ruleset whose relayed action records which
 * browser ran it for whom.
 */
function severalGMs({ tokens = { [GM_A]: "secret", [GM_B]: "secret" }, userSettings = {}, everyUsersSettings = false } = {}) {
  const Socket = fakeWebSocketClass();
  // each GM's token in that GM's browser (a client setting: localStorage, as JSON text)
  const clientStorage = Object.fromEntries(Object.entries(tokens).map(([id, token]) => [id, { "fate-bridge.token": JSON.stringify(token) }]));
  const world = installFakeFoundry({ WebSocket: clientWebSocketClass(Socket), userSettings, clientStorage, everyUsersSettings });
  for (const id of [GM_A, GM_B, GM_C]) world.addUser({ id, name: NAMES[id], isGM: true, active: false });
  world.addUser({ id: PLAYER, name: NAMES[PLAYER], active: false });
  world.activeGMId = null;
  world.addActor({ id: basicFolk()._id, name: basicFolk().name, hasPlayerOwner: true, ownership: { [PLAYER]: 3 }, items: basicFolkItems({ auraEml: 55 }) });
  const clock = new FakeClock();
  const runs = [];
  const apis = new Map();
  const probe = {
    id: "probe",
    install(api) {
      apis.set(globalThis.game.user.id, api);
      api.onRelay("act", (data, sender) => {
        runs.push({ on: globalThis.game.user.id, sender: sender.userId, data });
        return "acted";
      });
    },
  };
  const handles = new Map();
  env = { world, Socket, clock, runs, apis, handles, bridge: fakeBridge(Socket) };

  /** User `id` logs in: Foundry tells the others (userConnected), then their browser starts the module. */
  env.join = (id) => {
    world.connectUser(id, true);
    handles.set(id, world.asClient(id, () => {
      const handle = install({ rulesets: [sohl, probe], timers: world.clientTimers(clock) });
      for (const hook of ["init", "setup", "ready"]) world.callHook(hook);
      return handle;
    }));
  };
  /** User `id` closes their browser: its link closes, it sends nothing more, Foundry tells the others. */
  env.leave = (id) => {
    world.asClient(id, () => handles.get(id).dispose());
    world.emitted.splice(0, world.emitted.length, ...world.emitted.filter((e) => e.senderId !== id));
    world.connectUser(id, false);
  };
  /** Socket deliveries, bridge answers and promise callbacks, a few rounds (no clock time passes). */
  env.pump = async (options) => {
    for (let round = 0; round < 6; round += 1) {
      world.deliverSocket();
      env.bridge.serve(options);
      await flush();
    }
  };
  /** Every browser's token pairing is done with WebCrypto for now (it settles outside the microtask queue). */
  env.pairingIdle = () => Promise.all([...handles.values()].map((handle) => handle.pairingIdle()));
  /** Pump, letting each browser's WebCrypto work settle, until `check()` gives a truthy value; returns it. */
  env.pumpUntil = async (check, what) => {
    for (let turn = 0; turn < 20; turn += 1) {
      const value = check();
      if (value) return value;
      await env.pairingIdle();
      await env.pump();
    }
    throw new Error(`never happened: ${what}`);
  };
  /** The bridge token as user `id`'s browser reads it. */
  env.tokenOf = (id) => world.asClient(id, () => globalThis.game.settings.get("fate-bridge", "token"));
  /**
   * Everything user `id`'s browser holds or was handed, as text: every registered setting as it
   * reads it, every Setting document Foundry's server sent it, its localStorage, every module
   * socket payload it received, every notice it showed.
   */
  env.seenBy = (id) => world.asClient(id, () => JSON.stringify({
    settings: [...world.registered.keys()].map((key) => globalThis.game.settings.get(key.slice(0, key.indexOf(".")), key.slice(key.indexOf(".") + 1))),
    sent: globalThis.game.settings.storage.get("world").contents,
    localStorage: [...world.localStorageOf(id)],
    received: world.deliveries.filter((delivery) => delivery.to === id),
    notices: world.notices.filter((notice) => notice.userId === id),
  }));
  /** The user names that said hello on each link, in order. */
  env.hellos = () => env.Socket.instances.map((socket) => socket.sent.find((frame) => frame.type === "hello")?.client.user_name);
  /** Whose browser holds the link, as `id`'s own browser sees it. */
  env.holderSeenBy = (id) => world.asClient(id, () => apis.get(id).isActiveGM());
  /** The player's card: the Archery test, posted by the player. */
  env.postArchery = async (extra = {}) => {
    world.asUser(PLAYER);
    const message = await world.createMessage({ ...structuredClone(archeryCard().message), author: PLAYER, ...extra });
    return message.id;
  };
  return env;
}

afterEach(() => {
  for (const [id, handle] of env?.handles ?? []) env.world.asClient(id, () => handle.dispose());
  env = null;
  uninstallFakeFoundry();
});

describe("any GM with the token holds the link", () => {
  test("a GM without the token never blocks one who has it: the GM with the token connects and runs the players' clicks", async () => {
    severalGMs({ tokens: { [GM_B]: "secret" } });
    env.join(GM_A);
    env.join(PLAYER);
    env.join(GM_B);
    assert.equal(env.world.activeGMId, GM_A, "Foundry's active GM is the one without a token: the old rule would have stalled here");
    await env.pump();
    env.clock.advance(LINK_LIMITS.CLAIM_DELAY_MS);
    await env.pump();
    assert.deepEqual(env.hellos(), [NAMES[GM_B]], "one link, held by the GM with the token");
    assert.equal(env.handles.get(GM_A).connection(), null);
    assert.equal(env.holderSeenBy(GM_B), true);
    assert.equal(env.holderSeenBy(GM_A), false);

    const settled = env.world.asClient(PLAYER, () => env.apis.get(PLAYER).relay("probe", "act", { n: 1 }));
    await env.pump();
    assert.equal(await settled, "acted");
    assert.deepEqual(env.runs, [{ on: GM_B, sender: PLAYER, data: { n: 1 } }], "run once, on the link holder's browser, as the player");
  });

  test("no GM with a token online: a player's click is refused at once with no_gm, and the tokenless GM is told to enter it", async () => {
    severalGMs({ tokens: {} });
    env.join(GM_A);
    env.join(PLAYER);
    await env.pump();
    const outcome = env.world.asClient(PLAYER, () => env.apis.get(PLAYER).relay("probe", "act", {}).catch((error) => error.code));
    assert.equal(await outcome, "no_gm");
    assert.deepEqual(env.Socket.instances, []);
    const gmNotices = env.world.notices.filter((notice) => notice.userId === GM_A).map((notice) => notice.text);
    assert.deepEqual(gmNotices, ["Fate Bridge: no bridge token set. Enter it in the module settings to enable Fate."]);
  });

  test("a GM who joins while another holds the link does not take it, even with a lower user id", async () => {
    severalGMs();
    env.join(GM_B);
    await env.pump();
    assert.deepEqual(env.hellos(), [NAMES[GM_B]], "alone among the GMs: B claims at once");
    env.join(GM_A);
    await env.pump();
    env.clock.advance(LINK_LIMITS.CLAIM_DELAY_MS);
    await env.pump();
    assert.deepEqual(env.hellos(), [NAMES[GM_B]], "no second link: A heard that B holds it");
    assert.equal(env.holderSeenBy(GM_A), false);
    assert.equal(env.holderSeenBy(GM_B), true);
    assert.equal(env.Socket.instances[0].closed, null, "B's link was never superseded");
  });

  test("two GMs claiming at once: the lower user id keeps the link, the other lets go before the bridge sees it", async () => {
    severalGMs();
    env.world.connectUser(GM_A, true);
    env.join(GM_B);
    env.join(GM_A);
    env.clock.advance(LINK_LIMITS.CLAIM_DELAY_MS); // both claim before hearing each other
    assert.equal(env.Socket.instances.length, 2);
    await env.pump();
    assert.deepEqual(env.hellos(), [undefined, NAMES[GM_A]], "B's socket closed before it said hello");
    assert.deepEqual(env.Socket.instances[0].closed, { code: 1000, reason: "module stopped" });
    assert.equal(env.holderSeenBy(GM_A), true);
    assert.equal(env.holderSeenBy(GM_B), false);
  });
});

describe("two GMs claiming at once, the bridge's 4003 first", () => {
  /** Both claim before hearing each other; the bridge takes A's hello, then B's, and closes A's link 4003 before A hears B. */
  async function raceLostByA() {
    severalGMs();
    env.world.connectUser(GM_B, true);
    env.join(GM_A);
    env.join(GM_B);
    env.clock.advance(LINK_LIMITS.CLAIM_DELAY_MS);
    assert.equal(env.Socket.instances.length, 2, "both claimed");
    env.bridge.serve(); // A's hello, then B's: A is superseded before any announcement is read
    assert.deepEqual(env.Socket.instances[0].closed, null);
    assert.equal(env.handles.get(GM_A).connection().isStopped(), true, "A's link was taken (4003)");
    await env.pump();
  }
  /** The sockets still open, by the user name that said hello on each. */
  const live = () => env.Socket.instances.filter((socket) => socket.readyState === 1).map((socket) => socket.sent.find((frame) => frame.type === "hello")?.client.user_name);

  test("one link stays, B's; A, who lost the race, is not left out: when B leaves, A takes over at once", async () => {
    await raceLostByA();
    assert.deepEqual(live(), [NAMES[GM_B]], "one link");
    assert.equal(env.holderSeenBy(GM_B), true);
    assert.equal(env.holderSeenBy(GM_A), false);
    const sockets = env.Socket.instances.length;
    await env.pump(); // the fake bridge answers no ping: no clock time may pass
    assert.equal(env.Socket.instances.length, sockets, "settled: nobody claims again while B holds it");

    env.leave(GM_B);
    await env.pump();
    assert.deepEqual(live(), [NAMES[GM_A]], "the hand-over reached A, who had yielded");
    assert.equal(env.holderSeenBy(GM_A), true);
    assert.equal(env.handles.get(GM_A).connection().isStopped(), false);
  });

  test("A, who lost the race, holds a player's click no more than B: the click runs once, on B's browser", async () => {
    await raceLostByA();
    env.join(PLAYER);
    await env.pump();
    const settled = env.world.asClient(PLAYER, () => env.apis.get(PLAYER).relay("probe", "act", { n: 3 }));
    await env.pump();
    assert.equal(await settled, "acted");
    assert.deepEqual(env.runs, [{ on: GM_B, sender: PLAYER, data: { n: 3 } }]);
  });
});

describe("hand-over when the link's GM leaves", () => {
  test("another GM with the token takes over at once; a click the old holder never acked is sent again and runs once", async () => {
    severalGMs();
    env.join(GM_A);
    env.join(PLAYER);
    env.join(GM_B);
    await env.pump();
    env.clock.advance(LINK_LIMITS.CLAIM_DELAY_MS);
    await env.pump();
    assert.deepEqual(env.hellos(), [NAMES[GM_A]]);

    const settled = env.world.asClient(PLAYER, () => env.apis.get(PLAYER).relay("probe", "act", { n: 2 }));
    env.world.deliverSocket(); // every browser reads the click: B ignores it (not the holder), A acks it...
    assert.deepEqual(env.world.emitted.map((e) => [e.payload.type, e.senderId]), [["ack", GM_A]]);
    const startedAt = env.clock.now;
    env.leave(GM_A); // ...but its browser closes before the ack goes out
    assert.equal(env.Socket.instances.length, 2, "B connects the moment Foundry reports A gone");
    assert.equal(env.clock.now, startedAt, "no waiting: within the same moment");
    await env.pump();
    assert.deepEqual(env.hellos(), [NAMES[GM_A], NAMES[GM_B]]);
    assert.equal(await settled, "acted");
    assert.deepEqual(env.runs, [{ on: GM_B, sender: PLAYER, data: { n: 2 } }], "sent again to B, run once there");
    assert.deepEqual(env.Socket.instances[0].closed, { code: 1000, reason: "module stopped" }, "A's browser closed its link");
  });

  test("a grading in flight when its GM leaves is sent again under the same event_id: the bridge grades the test once", async () => {
    severalGMs();
    env.join(GM_A);
    env.join(PLAYER);
    env.join(GM_B);
    await env.pump();
    env.clock.advance(LINK_LIMITS.CLAIM_DELAY_MS);
    await env.pump();
    const messageId = await env.postArchery();
    await env.pump({ answer: false }); // A sent test_rolled; the bridge handled it; A leaves before the reply
    assert.deepEqual(env.bridge.rolled.map((frame) => frame.event_id), [firstGradingEventId(messageId)]);
    env.leave(GM_A);
    await env.pump();
    assert.deepEqual(env.hellos(), [NAMES[GM_A], NAMES[GM_B]]);
    assert.deepEqual(env.bridge.rolled.map((frame) => frame.event_id), [firstGradingEventId(messageId), firstGradingEventId(messageId)], "B caught it up under the same event_id");
    assert.deepEqual(env.bridge.graded, [messageId], "graded once: the repeat got the stored reply");
    const graded = await until(() => env.world.messages.get(messageId).flags["fate-bridge"]?.graded, "the graded flag");
    assert.equal(graded.fate_ml, 77);
  });

  test("a GM whose token the bridge refuses (4001) withdraws: the other GM with the token holds the link", async () => {
    severalGMs({ tokens: { [GM_A]: "wrong", [GM_B]: "secret" } });
    env.join(GM_A);
    env.join(GM_B);
    await env.pump();
    env.clock.advance(LINK_LIMITS.CLAIM_DELAY_MS);
    await env.pump();
    assert.deepEqual(env.hellos(), [NAMES[GM_A]]);
    env.Socket.instances[0].drop(4001);
    await env.pump();
    assert.deepEqual(env.hellos(), [NAMES[GM_A], NAMES[GM_B]]);
    assert.equal(env.holderSeenBy(GM_B), true);
    env.clock.advance(60_000);
    await env.pump();
    assert.deepEqual(env.hellos().slice(1).filter((name) => name !== NAMES[GM_B]), [], "A does not come back and fight");
    assert.equal(env.handles.get(GM_A).connection().isStopped(), true);
  });
});

describe("tests rolled while no link was up", () => {
  test("graded once when a GM with the token comes: the recent ones only, within the bound", async () => {
    severalGMs();
    env.join(PLAYER);
    env.world.serverNow = () => Date.now() - CATCH_UP.maxAgeMs - 60_000; // posted in an earlier session
    const old = await env.postArchery();
    env.world.serverNow = () => Date.now();
    const recent = [];
    for (let n = 0; n <= CATCH_UP.limit; n += 1) recent.push(await env.postArchery());
    assert.equal(recent.length, CATCH_UP.limit + 1);
    env.join(GM_A);
    // The catch-up sends one grading after the other, in the order posted (rulesets/sohl/index.js):
    // a bridge round trip each.
    for (let round = 0; round <= CATCH_UP.limit && env.bridge.graded.length < CATCH_UP.limit; round += 1) await env.pump();
    assert.deepEqual(env.hellos(), [NAMES[GM_A]]);
    const expected = recent.slice(-CATCH_UP.limit);
    assert.deepEqual(env.bridge.graded, expected, `the last ${CATCH_UP.limit}, in order; neither the oldest recent one nor the one from an earlier session`);
    assert.deepEqual(env.bridge.rolled.map((frame) => frame.event_id), expected.map(firstGradingEventId), "each sent once");
    assert.equal(env.world.messages.get(expected[0]).flags["fate-bridge"].graded.fate_ml, 77);
    assert.equal(env.world.messages.get(old).flags["fate-bridge"]?.graded, undefined);

    env.Socket.instances[0].drop(1006); // the link drops and comes back: nothing is sent again
    env.clock.advance(1_000);
    await env.pump();
    assert.equal(env.Socket.instances.length, 2);
    assert.equal(env.bridge.rolled.length, CATCH_UP.limit);
  });

  test("a player's clock decides nothing: age and order are the server's (`_stats.createdTime`), not the message's timestamp", async () => {
    severalGMs();
    env.join(PLAYER);
    const HOUR = 60 * 60 * 1000;
    env.world.serverNow = () => Date.now() - CATCH_UP.maxAgeMs - HOUR; // an earlier session...
    env.world.clientClockSkewMs.set(PLAYER, CATCH_UP.maxAgeMs + HOUR); // ...by a browser whose clock runs hours ahead
    const lastSession = await env.postArchery();
    const now = Date.now();
    env.world.serverNow = () => now - 2_000;
    env.world.clientClockSkewMs.set(PLAYER, 30 * 60 * 1000); // 30 min fast
    const first = await env.postArchery();
    env.world.serverNow = () => now - 1_000;
    env.world.clientClockSkewMs.set(PLAYER, -5 * HOUR); // 5 h slow
    const second = await env.postArchery();
    env.world.serverNow = () => Date.now();
    const timestamps = (id) => env.world.messages.get(id).timestamp;
    assert.ok(timestamps(lastSession) > Date.now() && timestamps(second) < Date.now() - CATCH_UP.maxAgeMs && timestamps(first) > timestamps(second));
    // However the world's collection lists them (here: by those timestamps), the server's order holds.
    const byTimestamp = [...env.world.messages.values()].sort((a, b) => a.timestamp - b.timestamp);
    env.world.messages.clear();
    for (const message of byTimestamp) env.world.messages.set(message.id, message);
    env.join(GM_A);
    for (let round = 0; round < 4; round += 1) await env.pump();
    assert.deepEqual(env.bridge.graded, [first, second], "the recent two, in the order the server created them; not the earlier session's");
  });

  test("a test rolled while the holder's link is down is sent once, not once more by the catch-up", async () => {
    severalGMs();
    env.join(GM_A);
    await env.pump();
    env.Socket.instances[0].drop(1006);
    const messageId = await env.postArchery();
    env.clock.advance(1_000);
    await env.pump();
    assert.deepEqual(env.bridge.rolled.map((frame) => frame.message_id), [messageId]);
  });
});

describe("where the bridge token lives (issue 36): in the GMs' browsers, whatever Foundry's server sends", () => {
  const TOKEN = "Wz0rld-T0ken_kept-in-the-GMs-browsers-0123";
  const pairingDeliveries = (to) => env.world.deliveries.filter((d) => d.to === to && Object.values(PAIRING_TYPES).includes(d.payload.type));

  test("a GM's browser without the token gets it, sealed, from the link holder's; a player's browser never sees it", async () => {
    severalGMs({ tokens: { [GM_B]: TOKEN }, everyUsersSettings: true });
    env.join(GM_B);
    env.join(PLAYER);
    env.join(GM_A);
    await env.pump();
    env.clock.advance(LINK_LIMITS.CLAIM_DELAY_MS);
    assert.equal(await env.pumpUntil(() => env.tokenOf(GM_A), "GM A's browser keeps the token"), TOKEN);
    assert.deepEqual(env.hellos(), [NAMES[GM_B]], "B keeps the link; A only got the token");
    assert.equal(env.world.notices.filter((n) => n.userId === GM_A).at(-1).text, "Fate Bridge: this browser got the bridge token from GM Bo's browser and keeps it here.");
    assert.deepEqual(pairingDeliveries(PLAYER).map((d) => [d.payload.type, d.senderId]), [[PAIRING_TYPES.ASK, GM_A], [PAIRING_TYPES.GIVE, GM_B]], "the exchange reached the player's browser too");

    env.leave(GM_B);
    await env.pump();
    assert.deepEqual(env.hellos(), [NAMES[GM_B], NAMES[GM_A]], "A holds the link when B leaves");
    assert.equal(env.Socket.instances[1].sent[0].token, TOKEN);

    assert.equal(env.seenBy(PLAYER).includes(TOKEN), false, "no setting, Setting document, storage, payload or notice of the player's holds the token");
    assert.equal(env.seenBy(GM_A).includes(TOKEN), true, "the same look finds it in GM A's browser");
    assert.equal(JSON.stringify(env.world.serverSettings).includes(TOKEN), false, "Foundry's server keeps no copy");
  });

  test("a player who asks for the token gets nothing; a token_give a player forged is not taken", async () => {
    severalGMs({ tokens: { [GM_B]: TOKEN }, everyUsersSettings: true });
    env.join(GM_B); // its link is not welcomed yet: asks wait for it
    env.join(PLAYER);
    const playerKey = await createReplyKey(subtle, TOKEN_SEAL_INFO);
    env.world.asClient(PLAYER, () => globalThis.game.socket.emit("module.fate-bridge", { type: PAIRING_TYPES.ASK, to: GM_B, request_id: "playerAsk0000001", reply_key: playerKey.replyKey }));
    env.join(GM_A);
    /** Socket deliveries and WebCrypto's work, the bridge not answering (B's link stays unwelcomed). */
    const settle = async () => {
      for (let round = 0; round < 6; round += 1) {
        env.world.deliverSocket();
        await env.pairingIdle();
        await flush();
      }
    };
    await settle();
    const ask = pairingDeliveries(PLAYER).find((d) => d.payload.type === PAIRING_TYPES.ASK && d.senderId === GM_A)?.payload;
    assert.ok(ask, "GM A's ask reached the player's browser");
    assert.deepEqual(env.world.deliveries.filter((d) => d.payload.type === PAIRING_TYPES.GIVE), [], "B gives nothing before its link is welcomed, nor to the player");
    // The player seals a token of its own to the key it saw, for GM A and A's request.
    const sealed = await sealReply(subtle, ask.reply_key, { token: "forged-by-the-player" }, { to: GM_A, requestId: ask.request_id }, randomValues, TOKEN_SEAL_INFO);
    env.world.asClient(PLAYER, () => globalThis.game.socket.emit("module.fate-bridge", { type: PAIRING_TYPES.GIVE, to: GM_A, request_id: ask.request_id, sealed }));
    await settle();
    assert.equal(env.tokenOf(GM_A), "", "the forged answer was refused: not from the GM asked");

    await env.pumpUntil(() => env.tokenOf(GM_A), "GM B's real answer, once its link is welcomed");
    assert.equal(env.tokenOf(GM_A), TOKEN);
    const gives = env.world.deliveries.filter((d) => d.payload.type === PAIRING_TYPES.GIVE && d.senderId === GM_B);
    assert.deepEqual([...new Set(gives.map((d) => d.payload.to))], [GM_A], "B answered GM A only, never the player");
  });

  test("a token an earlier release kept with the GM's user moves into that GM's browser, and the server's copy is cleared", async () => {
    severalGMs({ tokens: {}, everyUsersSettings: true, userSettings: { [GM_A]: { "fate-bridge.token": TOKEN } } });
    env.join(PLAYER);
    assert.equal(env.seenBy(PLAYER).includes(TOKEN), true, "the old place: a server that sends every user's settings hands it to the player");
    env.join(GM_A);
    await env.pumpUntil(() => env.Socket.instances.length, "GM A's link");
    await env.pump();
    assert.equal(env.Socket.instances[0].sent[0].token, TOKEN);
    assert.deepEqual([...env.world.localStorageOf(GM_A)], [["fate-bridge.token", JSON.stringify(TOKEN)]]);
    assert.deepEqual(env.world.serverSettings.map((doc) => [doc.key, doc.user, doc.value]), [["fate-bridge.token", GM_A, ""]]);
    assert.equal(env.seenBy(PLAYER).includes(TOKEN), false, "and from then on nothing the player's browser gets holds it");
    assert.deepEqual(env.world.notices.filter((notice) => /no bridge token/.test(notice.text)), [], "no false alarm while it moves");
  });

  test("a browser that has a token keeps it; the server's old copy is cleared all the same", async () => {
    severalGMs({ tokens: { [GM_A]: "pasted-after-the-upgrade" }, userSettings: { [GM_A]: { "fate-bridge.token": TOKEN } } });
    env.join(GM_A);
    await env.pumpUntil(() => env.Socket.instances.length, "GM A's link");
    await env.pump();
    assert.equal(env.Socket.instances[0].sent[0].token, "pasted-after-the-upgrade");
    assert.deepEqual(env.world.serverSettings.map((doc) => [doc.key, doc.user, doc.value]), [["fate-bridge.token", GM_A, ""]]);
  });
});

describe("the election itself (logic/link-holder.js)", () => {
  /** One browser's election with its socket and users in plain arrays. */
  function election({ self = GM_B, gms = [GM_A, GM_B], active = [GM_A, GM_B], token = true } = {}) {
    const sent = [];
    const clock = new FakeClock();
    const changes = [];
    const e = createLinkElection({
      selfId: () => self, selfIsGM: () => gms.includes(self), activeGMIds: () => active.filter((id) => gms.includes(id)), activeGMId: () => active.filter((id) => gms.includes(id)).sort()[0] ?? null,
      hasToken: () => token, isGMUser: (id) => gms.includes(id), send: (payload) => sent.push(payload), timers: clock, onChange: (id) => changes.push(id),
    });
    return { e, sent, clock, changes };
  }

  test("a player cannot pose as a GM holding the link: only GMs' announcements count (Foundry's sender id)", () => {
    const { e } = election({ self: PLAYER, gms: [GM_A], active: [GM_A, PLAYER] });
    e.start();
    e.receive({ type: LINK_TYPES.STATE, has_token: true, holding: false }, GM_A);
    assert.equal(e.holderId(), GM_A);
    e.receive({ type: LINK_TYPES.STATE, has_token: true, holding: true }, PLAYER);
    assert.equal(e.holderId(), GM_A);
  });

  test("a GM offers itself only after the claim delay when another GM is connected, at once when alone", () => {
    const shared = election();
    shared.e.start();
    assert.deepEqual(shared.sent, [{ type: LINK_TYPES.QUERY }, { type: LINK_TYPES.STATE, has_token: false, holding: false }]);
    assert.equal(shared.e.holderId(), GM_A, "nothing heard yet: Foundry's active GM is assumed, as before");
    shared.e.receive({ type: LINK_TYPES.STATE, has_token: false, holding: false }, GM_A);
    assert.equal(shared.e.holderId(), null, "A has no token");
    shared.clock.advance(LINK_LIMITS.CLAIM_DELAY_MS);
    assert.equal(shared.e.holderId(), GM_B);
    assert.deepEqual(shared.sent.at(-1), { type: LINK_TYPES.STATE, has_token: true, holding: false });
    assert.deepEqual(shared.changes, [GM_A, null, GM_B]);

    const alone = election({ active: [GM_B] });
    alone.e.start();
    assert.equal(alone.e.holderId(), GM_B);
  });

  test("the holder keeps the link; a GM that leaves is forgotten; one that withdraws is not offered until reset", () => {
    const active = [GM_A, GM_B, GM_C];
    const { e, clock, sent } = election({ self: GM_C, gms: [GM_A, GM_B, GM_C], active });
    e.start();
    clock.advance(LINK_LIMITS.CLAIM_DELAY_MS);
    e.receive({ type: LINK_TYPES.STATE, has_token: true, holding: true }, GM_B);
    e.receive({ type: LINK_TYPES.STATE, has_token: true, holding: false }, GM_A);
    assert.equal(e.holderId(), GM_B, "the holder keeps it though A's id is lower");
    active.splice(active.indexOf(GM_B), 1);
    e.usersChanged();
    assert.equal(e.holderId(), GM_A, "B left: the lowest id with a token");
    e.withdraw();
    assert.deepEqual(sent.at(-1), { type: LINK_TYPES.STATE, has_token: false, holding: false });
    e.receive({ type: LINK_TYPES.STATE, has_token: false, holding: false }, GM_A);
    assert.equal(e.holderId(), null, "C withdrew, A has no token any more");
    e.reset();
    assert.equal(e.holderId(), GM_C);
    assert.deepEqual(sent.at(-1), { type: LINK_TYPES.STATE, has_token: true, holding: false });
  });

  test("yielded after a 4003: out while another GM offers or holds the link, back once none does", () => {
    const active = [GM_A, GM_B];
    const { e, clock, sent } = election({ self: GM_A, active });
    e.start();
    clock.advance(LINK_LIMITS.CLAIM_DELAY_MS);
    e.setHolding(true);
    e.withdraw({ yielded: true }); // the 4003 came before any word from B
    assert.deepEqual(sent.at(-1), { type: LINK_TYPES.STATE, has_token: false, holding: false });
    e.receive({ type: LINK_TYPES.STATE, has_token: true, holding: true }, GM_B);
    assert.equal(e.holderId(), GM_B);
    e.receive({ type: LINK_TYPES.STATE, has_token: true, holding: false }, GM_B); // B lets go a moment (it heard A's old claim)
    assert.equal(e.holderId(), GM_B, "A stays out while B offers: no second claim");
    active.splice(active.indexOf(GM_B), 1);
    e.usersChanged();
    assert.equal(e.holderId(), GM_A, "B left: A offers itself again");
    assert.deepEqual(sent.at(-1), { type: LINK_TYPES.STATE, has_token: true, holding: false });
  });

  test("yielded with no other GM ever seen (the same GM's other window took it): out until reset", () => {
    const { e, clock } = election({ self: GM_A, active: [GM_A] });
    e.start();
    clock.advance(LINK_LIMITS.CLAIM_DELAY_MS);
    e.withdraw({ yielded: true });
    e.receive({ type: LINK_TYPES.STATE, has_token: true, holding: true }, GM_A); // its own user's other window: not counted
    e.usersChanged();
    assert.equal(e.holderId(), null);
    e.reset();
    assert.equal(e.holderId(), GM_A);
  });

  test("a refused token (4001) is not lifted by a later yield", () => {
    const active = [GM_A, GM_B];
    const { e, clock } = election({ self: GM_A, active });
    e.start();
    clock.advance(LINK_LIMITS.CLAIM_DELAY_MS);
    e.withdraw();
    e.withdraw({ yielded: true });
    e.receive({ type: LINK_TYPES.STATE, has_token: true, holding: true }, GM_B);
    active.splice(active.indexOf(GM_B), 1);
    e.usersChanged();
    assert.equal(e.holderId(), null);
  });
});
