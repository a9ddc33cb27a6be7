import { test, describe, beforeEach } from "node:test";
import assert from "node:assert/strict";
import {
  RELAY_LIMITS,
  createRelayHub,
  createRelayInbox,
  createRelayTracker,
  isRelayName,
  isRequestId,
  relayErrorPayload,
} from "../scripts/logic/relay.js";
import { BridgeError } from "../scripts/logic/errors.js";
import { FakeClock, flush } from "./helpers/fake-socket.js";

let clock, tracker, events;
beforeEach(() => {
  clock = new FakeClock();
  let n = 0;
  tracker = createRelayTracker({ timers: clock, newId: () => `req${++n}` });
  events = [];
});

/** Record how a relayed request's promise settles. */
function watch(name, settled) {
  settled.then((result) => events.push(`${name}:ok:${JSON.stringify(result)}`), (error) => events.push(`${name}:${error.code}`));
}

describe("the requester's deadlines", () => {
  test("no ack: rejected gm_no_answer after ACK_TIMEOUT_MS exactly, once", async () => {
    const { requestId, settled } = tracker.start();
    watch("a", settled);
    clock.advance(RELAY_LIMITS.ACK_TIMEOUT_MS - 1);
    await flush();
    assert.deepEqual(events, []);
    clock.advance(1);
    await flush();
    assert.deepEqual(events, ["a:gm_no_answer"]);
    assert.equal(tracker.ack(requestId), false, "a late ack is ignored");
    assert.equal(tracker.done(requestId, { ok: true }), false);
    clock.advance(RELAY_LIMITS.DONE_TIMEOUT_MS);
    await flush();
    assert.deepEqual(events, ["a:gm_no_answer"]);
  });

  test("done ok:true resolves with the result; done ok:false rejects with the GM's code and field", async () => {
    const a = tracker.start();
    const b = tracker.start();
    watch("a", a.settled);
    b.settled.catch((error) => events.push(error));
    assert.equal(tracker.ack(a.requestId), true);
    assert.equal(tracker.ack(a.requestId), false, "a repeated ack sends no second go");
    assert.equal(tracker.done(a.requestId, { ok: true, result: { drawn: 3 } }), true);
    assert.equal(tracker.done(b.requestId, { ok: false, error: { code: "forbidden", message: "not yours", field: "actor_id" } }), true);
    clock.advance(RELAY_LIMITS.DONE_TIMEOUT_MS * 2);
    await flush();
    assert.equal(events[0], 'a:ok:{"drawn":3}');
    assert.ok(events[1] instanceof BridgeError);
    assert.deepEqual([events[1].code, events[1].message, events[1].field, events[1].ref], ["forbidden", "not yours", "actor_id", b.requestId]);
    assert.equal(tracker.pending(), 0);
  });

  test("acked but never done: rejected gm_unfinished after DONE_TIMEOUT_MS", async () => {
    const { requestId, settled } = tracker.start();
    watch("a", settled);
    clock.advance(RELAY_LIMITS.ACK_TIMEOUT_MS - 1);
    tracker.ack(requestId);
    clock.advance(RELAY_LIMITS.DONE_TIMEOUT_MS - 1);
    await flush();
    assert.deepEqual(events, []);
    clock.advance(1);
    await flush();
    assert.deepEqual(events, ["a:gm_unfinished"]);
  });

  test("a done without a usable error code reads as internal", async () => {
    const { requestId, settled } = tracker.start();
    tracker.done(requestId, { ok: "yes", error: { code: "<b>", message: 42 } });
    await assert.rejects(settled, (error) => error.code === "internal" && error.message === "42");
  });

  test("unknown ids are ignored; clear drops every deadline silently", async () => {
    assert.equal(tracker.ack("nope"), false);
    assert.equal(tracker.done(undefined, { ok: true }), false);
    watch("a", tracker.start().settled);
    tracker.clear();
    clock.advance(RELAY_LIMITS.DONE_TIMEOUT_MS * 2);
    await flush();
    assert.deepEqual(events, []);
    assert.deepEqual(clock.pending(), []);
  });
});

describe("the GM's held requests", () => {
  test("go runs a held request once; a second go finds nothing", () => {
    const inbox = createRelayInbox({ timers: clock });
    inbox.hold("p:1", () => events.push("run"));
    assert.equal(inbox.go("p:1"), true);
    assert.equal(inbox.go("p:1"), false);
    assert.deepEqual(events, ["run"]);
  });

  test("a request with no go within GO_TIMEOUT_MS is dropped without running", () => {
    const inbox = createRelayInbox({ timers: clock });
    inbox.hold("p:1", () => events.push("run"));
    clock.advance(RELAY_LIMITS.GO_TIMEOUT_MS - 1);
    inbox.hold("p:2", () => events.push("run2"));
    clock.advance(1);
    assert.equal(inbox.go("p:1"), false);
    assert.equal(inbox.go("p:2"), true);
    assert.deepEqual(events, ["run2"]);
  });

  test("at most MAX_HELD requests are held, the oldest dropped first", () => {
    const inbox = createRelayInbox({ timers: clock, limits: { MAX_HELD: 2 } });
    for (const key of ["a", "b", "c"]) inbox.hold(key, () => events.push(key));
    assert.deepEqual(["a", "b", "c"].map((key) => inbox.go(key)), [false, true, true]);
    assert.deepEqual(clock.pending(), []);
  });
});

/**
 * Two clients on one fake socket: the GM's hub and a player's hub. `deliver()` hands what was
 * sent to the other client with the sender's id, as Foundry's socket does.
 */
function twoClients({ gmOnline = true } = {}) {
  const users = { gm: { id: "gm", isGM: true }, player: { id: "player", isGM: false }, mallory: { id: "mallory", isGM: false } };
  const wire = [];
  const hubs = {};
  const bugs = [];
  for (const name of ["gm", "player", "mallory"]) {
    let n = 0;
    hubs[name] = createRelayHub({
      timers: clock,
      newId: () => `${name}-req${++n}`,
      port: {
        send: (payload) => wire.push({ payload: structuredClone(payload), senderId: users[name].id }),
        isLinkHolder: () => name === "gm",
        linkHolderId: () => (gmOnline ? "gm" : null),
        currentUser: () => users[name],
        isGMUser: (id) => Boolean(users[id]?.isGM),
      },
      onHandlerBug: (error) => bugs.push(error),
    });
  }
  /** Deliver everything on the wire to every other client; returns the payloads delivered. */
  function deliver() {
    const batch = wire.splice(0);
    for (const { payload, senderId } of batch) {
      for (const [name, hub] of Object.entries(hubs)) if (users[name].id !== senderId) hub.receive(payload, senderId);
    }
    return batch.map(({ payload }) => payload);
  }
  return { hubs, wire, deliver, bugs };
}

describe("the hub: one relay for SoHL and every ruleset", () => {
  test("a player's request runs on the GM with Foundry's sender id, never the payload's", async () => {
    const { hubs, deliver } = twoClients();
    const seen = [];
    hubs.gm.on("hmtw", "draw", (data, sender) => {
      seen.push({ data, sender });
      return { card: "The Tower" };
    });
    const result = hubs.player.request("hmtw", "draw", { deck: "major", user_id: "gm" });
    assert.deepEqual(deliver(), [{ type: "request", request_id: "player-req1", ruleset: "hmtw", action: "draw", data: { deck: "major", user_id: "gm" } }]);
    assert.deepEqual(deliver(), [{ type: "ack", to: "player", request_id: "player-req1" }]);
    assert.deepEqual(seen, [], "held until go");
    assert.deepEqual(deliver(), [{ type: "go", request_id: "player-req1", to: "gm" }], "the go names the GM that acked");
    assert.deepEqual(seen, [{ data: { deck: "major", user_id: "gm" }, sender: { userId: "player", isGM: false } }]);
    await flush();
    assert.deepEqual(deliver(), [{ type: "done", to: "player", request_id: "player-req1", ok: true, result: { card: "The Tower" } }]);
    assert.deepEqual(await result, { card: "The Tower" });
  });

  test("the handler's refusal reaches the requester as a BridgeError with the bridge's code", async () => {
    const { hubs, deliver, bugs } = twoClients();
    hubs.gm.on("pool", "reroll", async () => {
      throw new BridgeError("forbidden", "only the roller may reroll", { field: "user_id" });
    });
    const result = hubs.player.request("pool", "reroll", {});
    deliver();
    deliver();
    deliver();
    await flush();
    deliver();
    await assert.rejects(result, (error) => error instanceof BridgeError && error.code === "forbidden" && error.field === "user_id");
    assert.deepEqual(bugs, [], "a coded refusal is not a bug");
  });

  test("a handler bug is logged on the GM and reaches the requester as internal", async () => {
    const { hubs, deliver, bugs } = twoClients();
    hubs.gm.on("pool", "reroll", () => {
      throw new TypeError("oops");
    });
    const result = hubs.player.request("pool", "reroll", {});
    deliver();
    deliver();
    deliver();
    await flush();
    deliver();
    await assert.rejects(result, { code: "internal", message: "oops" });
    assert.equal(bugs.length, 1);
  });

  test("on the active GM's own client the handler runs directly as that user", async () => {
    const { hubs, wire } = twoClients();
    hubs.gm.on("mythic", "ask", (data, sender) => ({ data, sender }));
    assert.deepEqual(await hubs.gm.request("mythic", "ask", { q: 1 }), { data: { q: 1 }, sender: { userId: "gm", isGM: true } });
    assert.deepEqual(wire, [], "nothing on the socket");
    await assert.rejects(hubs.gm.request("mythic", "other", {}), { code: "no_handler" });
  });

  test("issue 24: an ack only counts from the link holder; when the holder changes, unacked requests go again under the same id", async () => {
    const sent = [];
    let holder = "gmOld";
    const player = createRelayHub({
      timers: clock,
      newId: (() => { let n = 0; return () => `req${++n}`; })(),
      port: {
        send: (payload) => sent.push(structuredClone(payload)),
        isLinkHolder: () => false,
        linkHolderId: () => holder,
        currentUser: () => ({ id: "player", isGM: false }),
        isGMUser: (id) => id.startsWith("gm"),
      },
    });
    const first = player.request("hmtw", "draw", { n: 1 });
    const second = player.request("hmtw", "draw", { n: 2 });
    player.receive({ type: "ack", to: "player", request_id: "req1" }, "gmOther");
    assert.deepEqual(sent.map((p) => p.type), ["request", "request"], "an ack from a GM that does not hold the link sends no go");
    player.receive({ type: "ack", to: "player", request_id: "req1" }, "gmOld");
    assert.deepEqual(sent.at(-1), { type: "go", request_id: "req1", to: "gmOld" });
    holder = "gmNew";
    player.holderChanged();
    assert.deepEqual(sent.slice(3).map((p) => [p.type, p.request_id, p.data]), [["request", "req2", { n: 2 }]], "only the unacked one goes again, same id and data");
    player.receive({ type: "ack", to: "player", request_id: "req2" }, "gmNew");
    assert.deepEqual(sent.at(-1), { type: "go", request_id: "req2", to: "gmNew" });
    player.receive({ type: "done", to: "player", request_id: "req2", ok: true, result: "b" }, "gmNew");
    player.receive({ type: "done", to: "player", request_id: "req1", ok: true, result: "a" }, "gmOld");
    assert.deepEqual([await first, await second], ["a", "b"]);
  });

  test("issue 24: a go addressed to another GM is not run here", async () => {
    const { hubs, deliver, wire } = twoClients();
    const seen = [];
    hubs.gm.on("hmtw", "draw", () => seen.push("ran"));
    hubs.player.request("hmtw", "draw", {});
    deliver();
    wire.length = 0;
    wire.push({ payload: { type: "go", request_id: "player-req1", to: "someoneElse" }, senderId: "player" });
    deliver();
    await flush();
    assert.deepEqual(seen, []);
    assert.deepEqual(wire, [], "not even an expiry notice: it was not addressed here");
  });

  test("no GM online: rejected no_gm at once, nothing sent", async () => {
    const { hubs, wire } = twoClients({ gmOnline: false });
    await assert.rejects(hubs.player.request("hmtw", "draw", {}), (error) => error instanceof BridgeError && error.code === "no_gm");
    assert.deepEqual(wire, []);
  });

  test("no handler on the GM: done at once with no_handler, no ack", async () => {
    const { hubs, deliver } = twoClients();
    const result = hubs.player.request("hmtw", "draw", {});
    deliver();
    const [done] = deliver();
    assert.deepEqual([done.type, done.ok, done.error.code], ["done", false, "no_handler"]);
    await assert.rejects(result, { code: "no_handler" });
  });

  test("acks and dones from a non-GM, or for someone else, are ignored", async () => {
    const { hubs, wire, deliver } = twoClients();
    watch("p", hubs.player.request("hmtw", "draw", {}));
    wire.length = 0;
    wire.push({ payload: { type: "done", to: "player", request_id: "player-req1", ok: true, result: "forged" }, senderId: "mallory" });
    wire.push({ payload: { type: "ack", to: "player", request_id: "player-req1" }, senderId: "mallory" });
    deliver();
    assert.deepEqual(wire, [], "no go for a non-GM's ack");
    clock.advance(RELAY_LIMITS.ACK_TIMEOUT_MS);
    await flush();
    assert.deepEqual(events, ["p:gm_no_answer"]);
  });

  test("only the sender's go runs a held request; another go is answered relay_expired", async () => {
    const { hubs, wire, deliver } = twoClients();
    let runs = 0;
    hubs.gm.on("hmtw", "draw", () => {
      runs += 1;
    });
    hubs.player.request("hmtw", "draw", {});
    deliver();
    wire.length = 0; // the ack never reaches the player
    wire.push({ payload: { type: "go", request_id: "player-req1" }, senderId: "mallory" });
    const [done] = (deliver(), deliver());
    assert.equal(runs, 0);
    assert.deepEqual([done.to, done.ok, done.error.code], ["mallory", false, "relay_expired"]);
  });

  test("bad names are refused on both sides", async () => {
    const { hubs } = twoClients();
    await assert.rejects(hubs.player.request("HMTW", "draw", {}), TypeError);
    assert.throws(() => hubs.gm.on("hmtw", "", () => {}), TypeError);
    hubs.gm.on("hmtw", "draw", () => {});
    assert.throws(() => hubs.gm.on("hmtw", "draw", () => {}), /already has a relay handler/);
    assert.throws(() => hubs.gm.on("hmtw", "shuffle", "nope"), /not a function/);
  });
});

test("relay names, request ids and error payloads", () => {
  assert.deepEqual(["ev0000000000001a", "", "x".repeat(65), 42, null].map(isRequestId), [true, false, false, false, false]);
  assert.deepEqual(["sohl", "spend", "gm_no_answer", "a-b", "Sohl", "1x", "", "x".repeat(65)].map(isRelayName), [true, true, true, true, false, false, false, false]);
  assert.deepEqual(relayErrorPayload(new BridgeError("no_charges", "none left", { field: "point_id" })), { code: "no_charges", message: "none left", field: "point_id" });
  assert.deepEqual(relayErrorPayload("boom"), { code: "internal", message: "boom", field: null });
  assert.equal(relayErrorPayload(new Error("x".repeat(2000))).message.length, RELAY_LIMITS.MAX_ERROR_MESSAGE);
});
