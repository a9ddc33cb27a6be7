/**
 * "Nothing lost while the bridge is away" (issue 13), on the real BridgeConnection with an
 * injected clock: a 30 s outage while tests are rolled and clicks made, the request timeout
 * counted from sending, the bounded queue reported, and a request over the bridge's frame limit
 * (`welcome.max_frame_bytes`) refused once, in the browser, never sent.
 */
import { test, describe, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { BridgeConnection, LIMITS, DOWN_REASONS, CLOSE_TOO_BIG, utf8Length } from "../scripts/logic/connection.js";
import { messageBuilders } from "../scripts/logic/messages.js";
import { FakeClock, fakeWebSocketClass, flush } from "./helpers/fake-socket.js";

const MAX_FRAME = 65_536;
const WELCOME = {
  type: "welcome", v: 1, world_id: "w", bridge_version: "0.1.0", protocol_version: 1,
  max_frame_bytes: MAX_FRAME, rulesets: ["sohl"], settings: { fate_option: "everyone" },
};

let clock, Socket, statuses, refused, connection, build;
beforeEach(() => {
  clock = new FakeClock();
  Socket = fakeWebSocketClass();
  statuses = [];
  refused = [];
  let n = 0;
  build = messageBuilders(() => `ev${String(++n).padStart(2, "0")}`);
  connection = new BridgeConnection({
    url: "ws://127.0.0.1:8765",
    hello: () => build.hello({ worldId: "w", token: "secret", client: { module_version: "0.1.0", foundry_version: "13", system_id: "sohl", system_version: "0.8.2" } }),
    ping: build.ping,
    WebSocket: Socket,
    timers: clock,
    onStatus: (status) => statuses.push(status),
    onRefused: (refusal) => refused.push(refusal),
  });
});

function welcomed() {
  const socket = Socket.instances.at(-1);
  socket.open();
  socket.receive(WELCOME);
  return socket;
}

/** A test rolled (what the GM's browser sends for a new SoHL card) and a Spend Fate click. */
const rolled = (id) => ({ type: "test_rolled", v: 1, event_id: id, message_id: `msg-${id}` });
const spend = (id) => ({ type: "fate_spend", v: 1, event_id: id, message_id: `msg-${id}`, point_id: "p1" });

/** Answer every request the socket carries, in the order it carried them; returns their ids. */
function answerAll(socket) {
  const ids = socket.sent.filter((m) => m.event_id).map((m) => m.event_id);
  for (const id of ids) socket.receive({ type: "answer", v: 1, event_id: id });
  return ids;
}

describe("a 30 s outage", () => {
  test("tests rolled and clicks made while the bridge is away are each sent once, in order, after welcome, and answered once", async () => {
    const first = (connection.start(), welcomed());
    const inFlight = connection.request(rolled("before"));
    first.drop(1006); // the bridge goes away with one request in flight

    const made = ["before"];
    const settled = [];
    const promises = [inFlight];
    // 30 s of outage: every 5 s a test is rolled and a player clicks; reconnects fail meanwhile.
    for (let second = 0; second < 30; second += 5) {
      for (const message of [rolled(`r${second}`), spend(`s${second}`)]) {
        made.push(message.event_id);
        promises.push(connection.request(message));
      }
      clock.advance(5_000);
      for (const socket of Socket.instances.slice(1)) if (socket.readyState === 0) socket.drop(1006); // nothing answers
    }
    promises.forEach((promise, i) => promise.then((reply) => settled.push(["ok", made[i], reply.event_id]), (error) => settled.push(["error", made[i], error.code])));
    await flush();
    assert.deepEqual(settled, [], "nothing times out or is refused while the bridge is away");
    assert.ok(statuses.some((s) => s.reason === DOWN_REASONS.UNREACHABLE), "failed attempts report an unreachable bridge");
    assert.ok(Socket.instances.length > 3, "it kept trying");
    assert.equal(Socket.instances.slice(1).every((s) => s.sent.length === 0), true, "nothing sent on sockets that never opened");

    // The bridge is back: the next attempt opens; welcome releases the queue in order.
    clock.advance(LIMITS.BACKOFF_MAX_MS);
    const back = welcomed();
    assert.deepEqual(back.sent.map((m) => m.event_id ?? m.type), ["hello", ...made]);
    assert.deepEqual(answerAll(back), made);
    await flush();
    assert.deepEqual(settled, made.map((id) => ["ok", id, id]), "each answered once, in order");
    back.receive({ type: "answer", v: 1, event_id: "r0" }); // a repeated answer settles nothing more
    await flush();
    assert.equal(settled.length, made.length);
    assert.equal(connection.pending.size, 0);
  });

  test("the timeout counts from sending: a request queued longer than REQUEST_TIMEOUT_MS still gets its full wait once sent", async () => {
    connection.start();
    Socket.instances[0].drop(1006);
    let outcome = null;
    connection.request(rolled("q1")).then((reply) => (outcome = reply.event_id), (error) => (outcome = error.code));
    for (let waited = 0; waited < 3 * LIMITS.REQUEST_TIMEOUT_MS; waited += 1_000) {
      clock.advance(1_000);
      for (const socket of Socket.instances) if (socket.readyState === 0) socket.drop(1006);
    }
    await flush();
    assert.equal(outcome, null, "45 s in the queue is no timeout");
    clock.advance(LIMITS.BACKOFF_MAX_MS);
    const back = welcomed();
    clock.advance(LIMITS.REQUEST_TIMEOUT_MS - 1);
    await flush();
    assert.equal(outcome, null, "not before REQUEST_TIMEOUT_MS after the send");
    clock.advance(1);
    await flush();
    assert.equal(outcome, "timeout");
    assert.equal(back.sent.filter((m) => m.event_id === "q1").length, 1);
  });

  test("a request in flight when the link drops stops its clock until it is sent again", async () => {
    connection.start();
    const first = welcomed();
    let outcome = null;
    connection.request(rolled("f1")).then((reply) => (outcome = reply.event_id), (error) => (outcome = error.code));
    clock.advance(LIMITS.REQUEST_TIMEOUT_MS - 1_000);
    first.drop(1006);
    clock.advance(20_000);
    for (const socket of Socket.instances.slice(1)) if (socket.readyState === 0) socket.drop(1006);
    clock.advance(LIMITS.BACKOFF_MAX_MS);
    const back = welcomed();
    clock.advance(LIMITS.REQUEST_TIMEOUT_MS - 1_000);
    back.receive({ type: "answer", v: 1, event_id: "f1" });
    await flush();
    assert.equal(outcome, "f1");
  });
});

describe("the bounded queue", () => {
  test("beyond MAX_QUEUED a request is refused queue_full and reported; those kept are all sent", async () => {
    connection.start();
    Socket.instances[0].drop(1006);
    const kept = [];
    for (let i = 0; i < LIMITS.MAX_QUEUED; i += 1) kept.push(connection.request(rolled(`k${i}`)));
    await assert.rejects(connection.request(rolled("over")), { code: "queue_full" });
    assert.deepEqual(refused, [{ code: "queue_full", type: "test_rolled", bytes: null, limit: LIMITS.MAX_QUEUED }]);
    clock.advance(LIMITS.BACKOFF_MIN_MS);
    const back = welcomed();
    assert.equal(back.sent.filter((m) => m.type === "test_rolled").length, LIMITS.MAX_QUEUED);
    assert.equal(back.sent.some((m) => m.event_id === "over"), false);
    answerAll(back);
    assert.equal((await Promise.all(kept)).length, LIMITS.MAX_QUEUED);
  });
});

describe("the frame limit", () => {
  /** A test_rolled whose JSON is `bytes` long in UTF-8 (an actor with a very long item list). */
  function oversized(id, bytes) {
    const message = { ...rolled(id), padding: "" };
    message.padding = "é".repeat(Math.ceil((bytes - utf8Length(JSON.stringify(message))) / 2));
    return message;
  }

  test("welcome tells the limit; a larger request is refused once with its size and the limit, never sent", async () => {
    connection.start();
    const socket = welcomed();
    const big = oversized("big", 70 * 1024);
    const bytes = utf8Length(JSON.stringify(big));
    assert.ok(JSON.stringify(big).length < MAX_FRAME && bytes > MAX_FRAME, "counted in UTF-8 bytes, not characters");
    await assert.rejects(connection.request(big), (error) => error.code === "too_large" && error.message.includes(String(MAX_FRAME)));
    assert.deepEqual(refused, [{ code: "too_large", type: "test_rolled", bytes, limit: MAX_FRAME }]);
    assert.equal(socket.sent.some((m) => m.event_id === "big"), false);
    assert.equal(socket.readyState, 1, "the link stays up");
  });

  test("queued before any welcome: refused when welcome tells the limit, the others still sent", async () => {
    connection.start();
    Socket.instances[0].drop(1006);
    const small = connection.request(rolled("small"));
    const big = connection.request(oversized("big", 70 * 1024));
    clock.advance(LIMITS.BACKOFF_MIN_MS);
    const socket = welcomed();
    await assert.rejects(big, { code: "too_large" });
    assert.deepEqual(socket.sent.map((m) => m.event_id ?? m.type), ["hello", "small"]);
    answerAll(socket);
    assert.equal((await small).event_id, "small");
    assert.equal(refused.length, 1);
  });

  test("a bridge that closes 1009 without telling its limit: the largest request in flight is refused, not resent in a loop", async () => {
    connection.start();
    const socket = Socket.instances[0];
    socket.open();
    socket.receive({ ...WELCOME, max_frame_bytes: undefined });
    const small = connection.request(rolled("small"));
    const big = connection.request(oversized("big", 70 * 1024));
    socket.drop(CLOSE_TOO_BIG, "message too big");
    await assert.rejects(big, { code: "too_large" });
    assert.equal(refused.length, 1);
    clock.advance(LIMITS.BACKOFF_MIN_MS);
    const back = welcomed();
    assert.deepEqual(back.sent.map((m) => m.event_id ?? m.type), ["hello", "small"], "the big one is not sent again");
    answerAll(back);
    assert.equal((await small).event_id, "small");
  });
});
