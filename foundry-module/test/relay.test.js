import { test, describe, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { RELAY_LIMITS, createRelayInbox, createRelayTracker, isRequestId } from "../scripts/logic/relay.js";
import { FakeClock } from "./helpers/fake-socket.js";

let clock, tracker, events;
beforeEach(() => {
  clock = new FakeClock();
  let n = 0;
  tracker = createRelayTracker({ timers: clock, newId: () => `req${++n}` });
  events = [];
});
const handlers = (name) => ({
  onNoAnswer: (id) => events.push(`${name}:no-answer:${id}`),
  onUnfinished: () => events.push(`${name}:unfinished`),
  release: () => events.push(`${name}:release`),
});

describe("the player's deadlines", () => {
  test("no ack: after ACK_TIMEOUT_MS exactly, no-answer then release, once", () => {
    const id = tracker.start(handlers("a"));
    clock.advance(RELAY_LIMITS.ACK_TIMEOUT_MS - 1);
    assert.deepEqual(events, []);
    clock.advance(1);
    assert.deepEqual(events, [`a:no-answer:${id}`, "a:release"]);
    assert.equal(tracker.ack(id), false, "a late ack is ignored");
    clock.advance(RELAY_LIMITS.DONE_TIMEOUT_MS);
    assert.deepEqual(events.length, 2);
  });

  test("ack then done ok:false releases; done ok:true ends quietly", () => {
    const a = tracker.start(handlers("a"));
    const b = tracker.start(handlers("b"));
    assert.equal(tracker.ack(a), true);
    assert.equal(tracker.ack(b), true);
    assert.equal(tracker.done(a, false), true);
    assert.equal(tracker.done(b, true), true);
    clock.advance(RELAY_LIMITS.DONE_TIMEOUT_MS * 2);
    assert.deepEqual(events, ["a:release"]);
    assert.equal(tracker.pending(), 0);
  });

  test("acked but never done: unfinished after DONE_TIMEOUT_MS", () => {
    const id = tracker.start(handlers("a"));
    clock.advance(RELAY_LIMITS.ACK_TIMEOUT_MS - 1);
    tracker.ack(id);
    clock.advance(RELAY_LIMITS.DONE_TIMEOUT_MS - 1);
    assert.deepEqual(events, []);
    clock.advance(1);
    assert.deepEqual(events, ["a:unfinished", "a:release"]);
  });

  test("unknown ids are ignored; clear drops every deadline silently", () => {
    assert.equal(tracker.ack("nope"), false);
    assert.equal(tracker.done(undefined, false), false);
    tracker.start(handlers("a"));
    tracker.clear();
    clock.advance(RELAY_LIMITS.DONE_TIMEOUT_MS * 2);
    assert.deepEqual(events, []);
    assert.deepEqual(clock.pending(), []);
  });
});

describe("the GM's held clicks", () => {
  test("go runs a held click once; a second go finds nothing", () => {
    const inbox = createRelayInbox({ timers: clock });
    inbox.hold("p:1", () => events.push("run"));
    assert.equal(inbox.go("p:1"), true);
    assert.equal(inbox.go("p:1"), false);
    assert.deepEqual(events, ["run"]);
  });

  test("a click with no go within GO_TIMEOUT_MS is dropped without running", () => {
    const inbox = createRelayInbox({ timers: clock });
    inbox.hold("p:1", () => events.push("run"));
    clock.advance(RELAY_LIMITS.GO_TIMEOUT_MS - 1);
    inbox.hold("p:2", () => events.push("run2"));
    clock.advance(1);
    assert.equal(inbox.go("p:1"), false);
    assert.equal(inbox.go("p:2"), true);
    assert.deepEqual(events, ["run2"]);
  });

  test("at most MAX_HELD clicks are held, the oldest dropped first", () => {
    const inbox = createRelayInbox({ timers: clock, limits: { MAX_HELD: 2 } });
    for (const key of ["a", "b", "c"]) inbox.hold(key, () => events.push(key));
    assert.deepEqual(["a", "b", "c"].map((key) => inbox.go(key)), [false, true, true]);
    assert.deepEqual(clock.pending(), []);
  });
});

test("request ids from the socket: non-empty strings up to 64 characters", () => {
  assert.deepEqual(["ev0000000000001a", "", "x".repeat(65), 42, null].map(isRequestId), [true, false, false, false, false]);
});
