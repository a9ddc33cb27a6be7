import { test, describe, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { BridgeConnection, BridgeError, LIMITS, STATE, DOWN_REASONS, isInsecureRemote, supersededBy, refusedBecause } from "../scripts/logic/connection.js";
import { messageBuilders } from "../scripts/logic/messages.js";
import { FakeClock, fakeWebSocketClass } from "./helpers/fake-socket.js";

const WELCOME = { type: "welcome", v: 1, world_id: "w", bridge_version: "0.1.0", rulesets: ["sohl"], settings: { fate_option: "everyone" } };

let clock, Socket, statuses, unsolicited, connection, ids, build;
beforeEach(() => {
  clock = new FakeClock();
  Socket = fakeWebSocketClass();
  statuses = [];
  unsolicited = [];
  let n = 0;
  ids = () => `ev${++n}`;
  build = messageBuilders(ids);
  connection = new BridgeConnection({
    url: "ws://127.0.0.1:8765",
    hello: () => build.hello({ worldId: "w", token: "secret", client: { module_version: "0.1.0", foundry_version: "14", system_id: "sohl", system_version: "0.8.2" } }),
    ping: build.ping,
    WebSocket: Socket,
    timers: clock,
    onStatus: (status) => statuses.push(status),
    onUnsolicited: (message) => unsolicited.push(message),
    random: () => 0.5, // the reconnect jitter after 1012: half of RESTART_JITTER_MS
  });
});

function connectAndWelcome() {
  connection.start();
  const socket = Socket.instances.at(-1);
  socket.open();
  socket.receive(WELCOME);
  return socket;
}

describe("session", () => {
  test("hello is the first frame and nothing else goes before welcome", async () => {
    connection.start();
    const socket = Socket.instances[0];
    const reply = connection.request(build.settings({ fateOption: "pc_only" }));
    socket.open();
    assert.deepEqual(socket.sent.map((m) => m.type), ["hello"]);
    assert.equal(socket.sent[0].token, "secret");
    assert.equal(socket.sent[0].v, 1);
    assert.equal(connection.isReady(), false);
    socket.receive(WELCOME);
    assert.deepEqual(socket.sent.map((m) => m.type), ["hello", "settings"]);
    socket.receive({ type: "settings_applied", v: 1, ref: "ev1", settings: { fate_option: "pc_only" } });
    assert.deepEqual((await reply).settings, { fate_option: "pc_only" });
    assert.deepEqual(statuses.map((s) => s.state), [STATE.CONNECTING, STATE.CONNECTED]);
  });

  test("no welcome in time: drop and reconnect", () => {
    connection.start();
    Socket.instances[0].open();
    clock.advance(LIMITS.WELCOME_TIMEOUT_MS);
    assert.equal(Socket.instances[0].closed.code, 4000);
    assert.equal(statuses.at(-1).reason, DOWN_REASONS.NO_WELCOME);
    clock.advance(LIMITS.BACKOFF_MIN_MS);
    assert.equal(Socket.instances.length, 2);
  });
});

describe("heartbeat", () => {
  test("a ping every 20 s; answered pongs keep the link", () => {
    const socket = connectAndWelcome();
    clock.advance(LIMITS.HEARTBEAT_MS - 1);
    assert.equal(socket.sent.filter((m) => m.type === "ping").length, 0);
    clock.advance(1);
    assert.deepEqual(socket.sent.at(-1), { type: "ping", v: 1 });
    socket.receive({ type: "pong", v: 1 });
    clock.advance(LIMITS.HEARTBEAT_MS);
    assert.equal(socket.sent.filter((m) => m.type === "ping").length, 2);
    socket.receive({ type: "pong", v: 1 });
    assert.equal(socket.closed, null);
    assert.equal(connection.isReady(), true);
  });

  test("no pong: the link is dropped and a new one opened after the backoff", () => {
    const socket = connectAndWelcome();
    clock.advance(LIMITS.HEARTBEAT_MS + LIMITS.PONG_TIMEOUT_MS);
    assert.equal(socket.closed.code, 4000);
    assert.equal(connection.isReady(), false);
    assert.deepEqual(statuses.at(-1), { state: STATE.DOWN, reason: DOWN_REASONS.NO_PONG, retryInMs: 1000, holder: null, said: null });
    clock.advance(1000);
    assert.equal(Socket.instances.length, 2);
  });
});

describe("reconnect", () => {
  test("backoff doubles from 1 s and is capped at 30 s; welcome resets it", () => {
    connection.start();
    const delays = [];
    for (let i = 0; i < 8; i += 1) {
      Socket.instances.at(-1).drop();
      delays.push(statuses.at(-1).retryInMs);
      clock.advance(statuses.at(-1).retryInMs);
    }
    assert.deepEqual(delays, [1000, 2000, 4000, 8000, 16000, 30000, 30000, 30000]);
    const socket = Socket.instances.at(-1);
    socket.open();
    socket.receive(WELCOME);
    socket.drop();
    assert.equal(statuses.at(-1).retryInMs, 1000);
  });

  test("close code 1012 (a draining bridge process) on a welcomed link reconnects after the jitter alone", () => {
    const socket = connectAndWelcome();
    socket.drop(1012, "bridge restarting: reconnect now");
    assert.equal(statuses.at(-1).reason, DOWN_REASONS.CLOSED);
    assert.equal(statuses.at(-1).retryInMs, LIMITS.RESTART_JITTER_MS / 2);
    clock.advance(LIMITS.RESTART_JITTER_MS / 2);
    assert.equal(Socket.instances.length, 2);
    // no failure counted: a drop of the next link before its welcome waits the first backoff
    Socket.instances[1].drop(1012);
    assert.equal(statuses.at(-1).retryInMs, LIMITS.BACKOFF_MIN_MS, "1012 before welcome: the backoff, never a loop");
    clock.advance(LIMITS.BACKOFF_MIN_MS);
    Socket.instances[2].drop();
    assert.equal(statuses.at(-1).retryInMs, 2 * LIMITS.BACKOFF_MIN_MS);
  });

  test("a click queued while a draining process hands the link over is sent once, after the next welcome", async () => {
    const first = connectAndWelcome();
    const inFlight = connection.request(build.settings({ fateOption: "pc_only" }));
    first.receive({ type: "settings_applied", v: 1, ref: "ev1", settings: { fate_option: "pc_only" } }); // answered, then:
    first.drop(1012);
    const queued = connection.request(build.settings({ fateOption: "off" })); // the GM clicks meanwhile
    assert.deepEqual(first.sent.filter((m) => m.type === "settings").map((m) => m.event_id), ["ev1"]);
    clock.advance(LIMITS.RESTART_JITTER_MS);
    const second = Socket.instances[1];
    second.open();
    assert.deepEqual(second.sent.map((m) => m.type), ["hello"]);
    second.receive(WELCOME);
    assert.deepEqual(second.sent.filter((m) => m.type === "settings").map((m) => m.event_id), ["ev2"], "once, not ev1 again");
    second.receive({ type: "settings_applied", v: 1, ref: "ev2", settings: { fate_option: "off" } });
    assert.equal((await inFlight).settings.fate_option, "pc_only");
    assert.equal((await queued).settings.fate_option, "off");
    assert.equal(connection.pending.size, 0);
  });

  test("close code 4001 stops reconnecting and rejects what waits", async () => {
    connection.start();
    const waiting = connection.request(build.settings({ fateOption: "off" }));
    const socket = Socket.instances[0];
    socket.open();
    socket.receive({ type: "error", v: 1, code: "unauthorized", message: "bad token", ref: null, field: null });
    socket.drop(4001);
    await assert.rejects(waiting, (error) => error instanceof BridgeError && error.code === "unauthorized");
    assert.deepEqual(statuses.at(-1), { state: STATE.DOWN, reason: DOWN_REASONS.UNAUTHORIZED, retryInMs: null, holder: null, said: null });
    clock.advance(10 * LIMITS.BACKOFF_MAX_MS);
    assert.equal(Socket.instances.length, 1);
    await assert.rejects(connection.request(build.settings({ fateOption: "off" })), { code: "unauthorized" });
    assert.equal(unsolicited[0].code, "unauthorized");
  });

  test("a 4001 on an open link (the token changed) stops for good and says why, in the bridge's words", async () => {
    const socket = connectAndWelcome();
    const waiting = connection.request(build.settings({ fateOption: "off" }));
    const said = "the world's token was changed (world rotate-token): paste the new token into the module settings";
    socket.drop(4001, said);
    assert.deepEqual(statuses.at(-1), { state: STATE.DOWN, reason: DOWN_REASONS.UNAUTHORIZED, retryInMs: null, holder: null, said });
    await assert.rejects(waiting, { code: "unauthorized", message: `the bridge closed the link: ${said}` });
    clock.advance(10 * LIMITS.BACKOFF_MAX_MS);
    assert.equal(Socket.instances.length, 1);
  });

  test("the bridge's words of a 4001, or none for the plain refusal of a hello", () => {
    assert.equal(refusedBecause("unauthorized"), null);
    assert.equal(refusedBecause(""), null);
    assert.equal(refusedBecause(undefined), null);
    assert.equal(refusedBecause(" the world was removed from the bridge (world remove) "), "the world was removed from the bridge (world remove)");
  });

  test("close code 4003 (superseded) stops for good, names the holder, and refuses requests", async () => {
    const socket = connectAndWelcome();
    const waiting = connection.request(build.settings({ fateOption: "off" }));
    socket.drop(4003, "superseded by Gamemaster (Foundry 14.359)");
    await assert.rejects(waiting, (error) => error instanceof BridgeError && error.code === "superseded" && /Gamemaster \(Foundry 14\.359\)/.test(error.message));
    assert.deepEqual(statuses.at(-1), { state: STATE.DOWN, reason: DOWN_REASONS.SUPERSEDED, retryInMs: null, holder: "Gamemaster (Foundry 14.359)", said: null });
    assert.equal(connection.isReady(), false);
    clock.advance(10 * LIMITS.BACKOFF_MAX_MS);
    assert.equal(Socket.instances.length, 1, "no reconnect: the two browsers would fight");
    assert.deepEqual(clock.pending(), [], "no timer left running");
    await assert.rejects(connection.request(build.settings({ fateOption: "off" })), { code: "superseded" });
  });

  test("the holder is read from the close reason; a reason naming nobody gives null", () => {
    assert.equal(supersededBy("superseded by Ann (Foundry 13.351)"), "Ann (Foundry 13.351)");
    assert.equal(supersededBy("  superseded by Ann  "), "Ann");
    assert.equal(supersededBy("superseded by "), null);
    assert.equal(supersededBy(""), null);
    assert.equal(supersededBy(undefined), null);
  });

  test("stop() closes, rejects pending requests and never reconnects", async () => {
    const socket = connectAndWelcome();
    const waiting = connection.request(build.settings({ fateOption: "off" }));
    connection.stop();
    await assert.rejects(waiting, { code: "closed" });
    assert.equal(socket.closed.code, 1000);
    clock.advance(LIMITS.BACKOFF_MAX_MS);
    assert.equal(Socket.instances.length, 1);
  });
});

describe("requests", () => {
  test("queued while down, sent after welcome, replies matched by event_id", async () => {
    connection.start();
    Socket.instances[0].drop();
    const first = connection.request(build.settings({ fateOption: "off" }));
    const second = connection.request(build.settings({ fateOption: "everyone" }));
    clock.advance(1000);
    const socket = Socket.instances[1];
    socket.open();
    socket.receive(WELCOME);
    assert.deepEqual(socket.sent.map((m) => m.event_id ?? m.type), ["hello", "ev1", "ev2"]);
    socket.receive({ type: "settings_applied", v: 1, ref: "ev2", settings: { fate_option: "everyone" } });
    socket.receive({ type: "error", v: 1, code: "bad_message", message: "nope", ref: "ev1", field: "fate_option" });
    assert.equal((await second).settings.fate_option, "everyone");
    await assert.rejects(first, (error) => error.code === "bad_message" && error.field === "fate_option");
  });

  test("a request in flight when the link drops is sent again with the same event_id", async () => {
    const socket = connectAndWelcome();
    const waiting = connection.request(build.settings({ fateOption: "off" }));
    assert.equal(socket.sent.at(-1).event_id, "ev1");
    socket.drop();
    clock.advance(1000);
    const again = Socket.instances[1];
    again.open();
    again.receive(WELCOME);
    assert.equal(again.sent.at(-1).event_id, "ev1");
    again.receive({ type: "settings_applied", v: 1, ref: "ev1", settings: { fate_option: "off" } });
    assert.equal((await waiting).ref, "ev1");
  });

  test("killed mid-flow: the request is re-sent with its event_id after reconnect and resolved exactly once", async () => {
    const first = connectAndWelcome();
    const settled = [];
    const waiting = connection.request(build.settings({ fateOption: "pc_only" }));
    waiting.then((reply) => settled.push(reply), (error) => settled.push(error));
    assert.deepEqual(first.sent.filter((m) => m.event_id === "ev1").length, 1);
    first.drop(1006); // after the request went out, before any reply
    assert.equal(connection.isReady(), false);
    clock.advance(LIMITS.BACKOFF_MIN_MS);
    const second = Socket.instances[1];
    second.open();
    assert.deepEqual(second.sent.map((m) => m.type), ["hello"], "nothing before welcome");
    second.receive(WELCOME);
    assert.deepEqual(second.sent.filter((m) => m.type === "settings").map((m) => m.event_id), ["ev1"]);
    assert.deepEqual(second.sent.find((m) => m.event_id === "ev1"), first.sent.find((m) => m.event_id === "ev1"), "the very same message");
    const stored = { type: "settings_applied", v: 1, ref: "ev1", settings: { fate_option: "pc_only" } };
    second.receive(stored);
    second.receive(stored); // a second answer (e.g. the stored reply again) settles nothing more
    await waiting;
    await Promise.resolve();
    assert.deepEqual(settled, [stored]);
    assert.deepEqual(unsolicited, [stored]);
    assert.equal(connection.pending.size, 0);
  });

  test("rate_limited is not a refusal: the same event_id is sent again with backoff", async () => {
    const socket = connectAndWelcome();
    const waiting = connection.request(build.settings({ fateOption: "off" }));
    const limited = { type: "error", v: 1, code: "rate_limited", message: "slow down", ref: "ev1", field: null };
    const sends = () => socket.sent.filter((m) => m.event_id === "ev1").length;
    socket.receive(limited);
    clock.advance(LIMITS.RATE_RETRY_MS - 1);
    assert.equal(sends(), 1, "not before the backoff");
    clock.advance(1);
    assert.equal(sends(), 2);
    socket.receive(limited);
    clock.advance(2 * LIMITS.RATE_RETRY_MS - 1);
    assert.equal(sends(), 2, "the backoff doubles");
    clock.advance(1);
    assert.equal(sends(), 3);
    socket.receive({ type: "settings_applied", v: 1, ref: "ev1", settings: { fate_option: "off" } });
    assert.equal((await waiting).settings.fate_option, "off");
    assert.deepEqual(unsolicited, []);
  });

  test("rate_limited past RATE_RETRIES rejects with rate_limited", async () => {
    const socket = connectAndWelcome();
    const waiting = connection.request(build.settings({ fateOption: "off" }));
    const limited = { type: "error", v: 1, code: "rate_limited", message: "slow down", ref: "ev1", field: null };
    for (let retry = 0; retry < LIMITS.RATE_RETRIES; retry += 1) {
      socket.receive(limited);
      clock.advance(LIMITS.RATE_RETRY_MS * 2 ** retry);
    }
    assert.equal(socket.sent.filter((m) => m.event_id === "ev1").length, 1 + LIMITS.RATE_RETRIES);
    socket.receive(limited);
    await assert.rejects(waiting, { code: "rate_limited" });
    assert.deepEqual(clock.pending().length, 1, "only the heartbeat is left");
  });

  test("a retry waiting out its backoff when the link drops is sent once, after welcome", () => {
    const socket = connectAndWelcome();
    connection.request(build.settings({ fateOption: "off" })).catch(() => {});
    socket.receive({ type: "error", v: 1, code: "rate_limited", message: "slow down", ref: "ev1", field: null });
    socket.drop();
    clock.advance(LIMITS.BACKOFF_MIN_MS);
    const again = Socket.instances[1];
    again.open();
    again.receive(WELCOME);
    clock.advance(10 * LIMITS.RATE_RETRY_MS);
    assert.equal(again.sent.filter((m) => m.event_id === "ev1").length, 1);
    connection.stop();
  });

  test("unavailable keeps the request queued, its timeout stopped, and sends it again after retry_after_ms until stored", async () => {
    const socket = connectAndWelcome();
    const waiting = connection.request(build.settings({ fateOption: "off" }));
    const down = { type: "error", v: 1, code: "unavailable", message: "storage down", ref: "ev1", field: null, retry_after_ms: 500 };
    const sends = () => socket.sent.filter((m) => m.event_id === "ev1").length;
    for (let retry = 1; retry <= 50; retry += 1) { // a storage outage of 25 s: longer than REQUEST_TIMEOUT_MS
      socket.receive(down);
      clock.advance(499);
      assert.equal(sends(), retry, "not before the bridge's hint");
      clock.advance(1);
      assert.equal(sends(), retry + 1);
    }
    socket.receive({ type: "settings_applied", v: 1, ref: "ev1", settings: { fate_option: "off" } });
    assert.equal((await waiting).settings.fate_option, "off");
    assert.deepEqual(unsolicited, []);
    assert.equal(connection.pending.size, 0);
  });

  test("unavailable without a hint waits UNAVAILABLE_RETRY_MS; a hint is bounded", () => {
    const socket = connectAndWelcome();
    connection.request(build.settings({ fateOption: "off" })).catch(() => {});
    const sends = () => socket.sent.filter((m) => m.event_id === "ev1").length;
    socket.receive({ type: "error", v: 1, code: "unavailable", message: "storage down", ref: "ev1", field: null });
    clock.advance(LIMITS.UNAVAILABLE_RETRY_MS - 1);
    assert.equal(sends(), 1);
    clock.advance(1);
    assert.equal(sends(), 2);
    socket.receive({ type: "error", v: 1, code: "unavailable", message: "storage down", ref: "ev1", field: null, retry_after_ms: 0 });
    clock.advance(LIMITS.UNAVAILABLE_RETRY_MIN_MS - 1);
    assert.equal(sends(), 2, "never sooner than UNAVAILABLE_RETRY_MIN_MS");
    clock.advance(1);
    assert.equal(sends(), 3);
    connection.stop();
  });

  test("a refused audit_query is rejected at once: its error's ref is the query_id", async () => {
    const socket = connectAndWelcome();
    const query = connection.request({ type: "audit_query", v: 1, query_id: "q9", limit: 50 });
    socket.receive({ type: "error", v: 1, code: "bad_message", message: "bad since", ref: "q9", field: "since" });
    await assert.rejects(query, (error) => error.code === "bad_message" && error.field === "since");
    assert.equal(connection.pending.size, 0);
  });

  test("no reply within the timeout rejects with timeout; a late reply goes to onUnsolicited", async () => {
    const socket = connectAndWelcome();
    const waiting = connection.request(build.settings({ fateOption: "off" }));
    clock.advance(LIMITS.REQUEST_TIMEOUT_MS);
    await assert.rejects(waiting, { code: "timeout" });
    socket.receive({ type: "settings_applied", v: 1, ref: "ev1", settings: { fate_option: "off" } });
    assert.equal(unsolicited.at(-1).ref, "ev1");
  });

  test("the queue is bounded while down", async () => {
    connection.start();
    const queued = Array.from({ length: LIMITS.MAX_QUEUED }, () => connection.request(build.settings({ fateOption: "off" })));
    await assert.rejects(connection.request(build.settings({ fateOption: "off" })), { code: "queue_full" });
    connection.stop();
    const results = await Promise.allSettled(queued);
    assert.equal(results.every((r) => r.status === "rejected" && r.reason.code === "closed"), true);
  });

  test("an audit_query (no event_id) is answered by the audit_page with its query_id", async () => {
    const socket = connectAndWelcome();
    const older = connection.request({ type: "audit_query", v: 1, query_id: "q1", limit: 50 });
    const newer = connection.request({ type: "audit_query", v: 1, query_id: "q2", limit: 50 });
    assert.deepEqual(socket.sent.slice(-2).map((m) => m.query_id), ["q1", "q2"]);
    socket.receive({ type: "audit_page", v: 1, query_id: "q2", records: [], next_before: null });
    socket.receive({ type: "audit_page", v: 1, query_id: "q1", records: [{ seq: 7 }], next_before: 7 });
    assert.equal((await newer).query_id, "q2");
    assert.deepEqual((await older).records, [{ seq: 7 }]);
    socket.receive({ type: "audit_page", v: 1, query_id: "q1", records: [], next_before: null });
    assert.equal(unsolicited.at(-1).query_id, "q1", "an answered query id is not pending any more");
  });

  test("requests need a fresh event_id", async () => {
    await assert.rejects(connection.request({ type: "ping" }), TypeError);
    connectAndWelcome();
    const message = build.settings({ fateOption: "off" });
    connection.request(message).catch(() => {});
    await assert.rejects(connection.request(message), /already pending/);
    connection.stop();
  });
});

describe("address check", () => {
  test("plain ws:// is flagged only off this machine", () => {
    assert.equal(isInsecureRemote("ws://127.0.0.1:8765"), false);
    assert.equal(isInsecureRemote("ws://localhost:8765"), false);
    assert.equal(isInsecureRemote("ws://[::1]:8765"), false);
    assert.equal(isInsecureRemote("ws://bridge.localhost:8765"), false);
    assert.equal(isInsecureRemote("ws://127.3.2.1:8765"), false);
    assert.equal(isInsecureRemote("ws://localhost.example.org:8765"), true);
    assert.equal(isInsecureRemote("ws://192.0.2.10:8765"), true);
    assert.equal(isInsecureRemote("wss://bridge.example:8765"), false);
    assert.equal(isInsecureRemote("not a url"), false);
  });
});
