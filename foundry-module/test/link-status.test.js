/**
 * "The GM sees the link" (issue 13): the link badge's states and the GM's notices, driven by the
 * real BridgeConnection on a fake clock and fake WebSocket.
 */
import { test, describe, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { BridgeConnection, LIMITS } from "../scripts/logic/connection.js";
import { createLinkStatus, linkBadge, likelyCause, compareVersions, LINK, CAUSE } from "../scripts/logic/link-status.js";
import { messageBuilders } from "../scripts/logic/messages.js";
import { FakeClock, fakeWebSocketClass } from "./helpers/fake-socket.js";

const URL = "ws://127.0.0.1:8765";
const WELCOME = { type: "welcome", v: 1, world_id: "w", bridge_version: "0.1.0", protocol_version: 1, max_frame_bytes: 65_536, rulesets: ["sohl"], settings: { fate_option: "everyone" } };
/** Localize as `key|data` so tests see which text and which values. */
const t = (key, data) => (data ? `${key}|${JSON.stringify(data)}` : key);

let clock, Socket, notices, views, connection;
function setup({ url = URL, pageProtocol = "http:", moduleVersion = "0.1.0" } = {}) {
  clock = new FakeClock();
  Socket = fakeWebSocketClass();
  notices = [];
  views = [];
  const link = createLinkStatus({
    url, pageProtocol, moduleVersion, protocolVersion: 1,
    notify: (level, key, data) => notices.push({ level, key, data }),
    localize: t,
    show: (view) => views.push(view),
  });
  const build = messageBuilders(() => "ev1");
  connection = new BridgeConnection({
    url,
    hello: () => build.hello({ worldId: "w", token: "secret", client: null }),
    ping: build.ping,
    WebSocket: Socket,
    timers: clock,
    onStatus: link.status,
    onWelcome: link.welcome,
    onRefused: link.refused,
  });
  connection.start();
  return link;
}
const keys = () => notices.map((n) => n.key);
/** Every pending socket fails to open (nothing listens at the address). */
const nothingAnswers = () => {
  for (const socket of Socket.instances) if (socket.readyState === 0) socket.drop(1006);
};

beforeEach(() => setup());

describe("the bridge cannot be reached", () => {
  test("one notice per outage naming the URL and the likely cause; the badge says connecting and when it retries", () => {
    for (let i = 0; i < 6; i += 1) {
      nothingAnswers();
      clock.advance(LIMITS.BACKOFF_MAX_MS);
    }
    const unreachable = notices.filter((n) => n.key === "FATE_BRIDGE.Link.Notice.Unreachable");
    assert.equal(unreachable.length, 1, "once, not once per attempt");
    assert.deepEqual(unreachable[0], { level: "error", key: "FATE_BRIDGE.Link.Notice.Unreachable", data: { url: URL, cause: `FATE_BRIDGE.Link.Cause.${CAUSE.NOTHING_THERE}` } });
    const badge = linkBadge(views.findLast((v) => v.retryInMs !== null), t);
    assert.equal(badge.state, LINK.CONNECTING);
    assert.equal(badge.label, "FATE_BRIDGE.Link.State.connecting");
    assert.ok(badge.details.includes(`FATE_BRIDGE.Link.Detail.Url|${JSON.stringify({ url: URL })}`));
    assert.ok(badge.details.includes(`FATE_BRIDGE.Link.Cause.${CAUSE.NOTHING_THERE}`));

    // It comes back: connected, "back" told once; a later outage is told again.
    Socket.instances.at(-1).open();
    Socket.instances.at(-1).receive(WELCOME);
    assert.equal(views.at(-1).state, LINK.CONNECTED);
    assert.equal(keys().at(-1), "FATE_BRIDGE.Link.Notice.Back");
    Socket.instances.at(-1).drop(1006);
    clock.advance(LIMITS.BACKOFF_MIN_MS);
    nothingAnswers();
    assert.equal(notices.filter((n) => n.key === "FATE_BRIDGE.Link.Notice.Unreachable").length, 2);
  });

  test("a link that drops and comes straight back is no notice", () => {
    Socket.instances[0].open();
    Socket.instances[0].receive(WELCOME);
    Socket.instances[0].drop(1001); // bridge restarting
    clock.advance(LIMITS.BACKOFF_MIN_MS);
    Socket.instances[1].open();
    Socket.instances[1].receive(WELCOME);
    assert.deepEqual(keys(), ["FATE_BRIDGE.Status.Connected", "FATE_BRIDGE.Status.Connected"]);
  });

  test("something answers but never says welcome: probably the wrong port", () => {
    Socket.instances[0].open();
    clock.advance(LIMITS.WELCOME_TIMEOUT_MS);
    assert.equal(notices[0].data.cause, `FATE_BRIDGE.Link.Cause.${CAUSE.NOT_THE_BRIDGE}`);
  });

  test("likely causes: ws:// from an https:// page, a bad address, nothing there", () => {
    assert.equal(likelyCause({ url: "ws://192.168.1.5:8765", pageProtocol: "https:", reason: "unreachable" }), CAUSE.MIXED_CONTENT);
    assert.equal(likelyCause({ url: "wss://bridge.example:8765", pageProtocol: "https:", reason: "unreachable" }), CAUSE.NOTHING_THERE);
    assert.equal(likelyCause({ url: "http://127.0.0.1:8765", pageProtocol: "http:", reason: "socket_error" }), CAUSE.BAD_URL);
    assert.equal(likelyCause({ url: "not a url", pageProtocol: "http:", reason: "socket_error" }), CAUSE.BAD_URL);
    assert.equal(likelyCause({ url: URL, pageProtocol: "http:", reason: "no_welcome" }), CAUSE.NOT_THE_BRIDGE);
  });

  test("the browser refuses ws:// from https:// (the constructor throws): the notice says so", () => {
    clock = new FakeClock();
    const notices2 = [];
    const link = createLinkStatus({ url: "ws://192.168.1.5:8765", pageProtocol: "https:", moduleVersion: "0.1.0", protocolVersion: 1, notify: (level, key, data) => notices2.push({ key, data }), localize: t, show: () => {} });
    const Throwing = class {
      constructor() {
        throw new DOMException("insecure", "SecurityError");
      }
    };
    new BridgeConnection({ url: "ws://192.168.1.5:8765", hello: () => ({}), ping: () => ({}), WebSocket: Throwing, timers: clock, onStatus: link.status }).start();
    assert.deepEqual(notices2, [{ key: "FATE_BRIDGE.Link.Notice.Unreachable", data: { url: "ws://192.168.1.5:8765", cause: `FATE_BRIDGE.Link.Cause.${CAUSE.MIXED_CONTENT}` } }]);
  });
});

describe("refused and superseded", () => {
  test("token refused (4001): badge refused, a notice naming the URL, no retry", () => {
    Socket.instances[0].open();
    Socket.instances[0].drop(4001);
    assert.equal(views.at(-1).state, LINK.REFUSED);
    assert.deepEqual(notices, [{ level: "error", key: "FATE_BRIDGE.Link.Notice.Refused", data: { url: URL } }]);
    clock.advance(LIMITS.BACKOFF_MAX_MS);
    assert.equal(Socket.instances.length, 1);
  });

  test("the token changed on an open link (4001 with words): the notice says why and asks for the new token", () => {
    Socket.instances[0].open();
    Socket.instances[0].receive(WELCOME);
    const said = "the world's token was changed (world rotate-token): paste the new token into the module settings";
    Socket.instances[0].drop(4001, said);
    assert.equal(views.at(-1).state, LINK.REFUSED);
    assert.deepEqual(notices.at(-1), { level: "error", key: "FATE_BRIDGE.Link.Notice.RefusedBecause", data: { url: URL, said } });
    assert.ok(linkBadge(views.at(-1), t).details.includes(`FATE_BRIDGE.Link.Detail.Said|${JSON.stringify({ said })}`));
    clock.advance(LIMITS.BACKOFF_MAX_MS);
    assert.equal(Socket.instances.length, 1);
  });

  test("another browser holds the link (4003): badge superseded, naming the holder", () => {
    Socket.instances[0].open();
    Socket.instances[0].drop(4003, "superseded by GM Bob (Foundry 13.346)");
    assert.equal(views.at(-1).state, LINK.SUPERSEDED);
    assert.equal(views.at(-1).holder, "GM Bob (Foundry 13.346)");
    assert.deepEqual(notices.at(-1), { level: "warn", key: "FATE_BRIDGE.Status.Superseded", data: { holder: "GM Bob (Foundry 13.346)" } });
    assert.ok(linkBadge(views.at(-1), t).details.some((line) => line.includes("GM Bob")));
  });
});

describe("versions", () => {
  test("another protocol: badge version mismatch and an error notice, told once across reconnects", () => {
    for (let i = 0; i < 2; i += 1) {
      const socket = Socket.instances.at(-1);
      socket.open();
      socket.receive({ ...WELCOME, bridge_version: "0.2.0", protocol_version: 2 });
      assert.equal(views.at(-1).state, LINK.VERSION_MISMATCH);
      socket.drop(1006);
      clock.advance(LIMITS.BACKOFF_MAX_MS);
    }
    const told = notices.filter((n) => n.key === "FATE_BRIDGE.Link.Notice.Protocol");
    assert.deepEqual(told, [{ level: "error", key: "FATE_BRIDGE.Link.Notice.Protocol", data: { module: "0.1.0", bridge: "0.2.0", moduleProtocol: "1", bridgeProtocol: "2" } }]);
  });

  test("same protocol, another release line: connected with a warning; a patch difference is silent", () => {
    assert.deepEqual(compareVersions({ moduleVersion: "0.1.0", protocolVersion: 1, welcome: { ...WELCOME, bridge_version: "0.1.7" } }).release, false);
    assert.deepEqual(compareVersions({ moduleVersion: "0.1.0", protocolVersion: 1, welcome: { ...WELCOME, bridge_version: "0.2.0" } }).release, true);
    assert.deepEqual(compareVersions({ moduleVersion: "1.2.0", protocolVersion: 1, welcome: { ...WELCOME, bridge_version: "1.4.1" } }).release, false);
    assert.deepEqual(compareVersions({ moduleVersion: "1.2.0", protocolVersion: 1, welcome: { ...WELCOME, bridge_version: "2.0.0" } }).release, true);
    // A bridge older than protocol_version speaks the `v` of its frames.
    assert.equal(compareVersions({ moduleVersion: "0.1.0", protocolVersion: 1, welcome: { ...WELCOME, protocol_version: undefined } }).protocol, false);
    Socket.instances[0].open();
    Socket.instances[0].receive({ ...WELCOME, bridge_version: "0.3.1" });
    assert.equal(views.at(-1).state, LINK.CONNECTED);
    assert.deepEqual(notices.map((n) => [n.level, n.key]), [["info", "FATE_BRIDGE.Status.Connected"], ["warn", "FATE_BRIDGE.Link.Notice.Release"]]);
  });
});

describe("requests refused in the browser", () => {
  test("too large: a notice naming the size and the bridge's limit; the badge counts it", async () => {
    Socket.instances[0].open();
    Socket.instances[0].receive(WELCOME);
    await assert.rejects(connection.request({ type: "test_rolled", event_id: "big", padding: "x".repeat(70_000) }), { code: "too_large" });
    const notice = notices.at(-1);
    assert.equal(notice.key, "FATE_BRIDGE.Link.Notice.TooLarge");
    assert.equal(notice.data.limit, "65536");
    assert.equal(notice.data.type, "test_rolled");
    assert.ok(Number(notice.data.bytes) > 70_000);
    assert.equal(views.at(-1).refused, 1);
  });

  test("too large for a bridge that never told its limit (closed 1009): told, not resent", () => {
    Socket.instances[0].open();
    Socket.instances[0].receive({ ...WELCOME, max_frame_bytes: null });
    connection.request({ type: "test_rolled", event_id: "big", padding: "x".repeat(70_000) }).catch(() => {});
    Socket.instances[0].drop(1009, "message too big");
    assert.deepEqual(notices.at(-1), { level: "error", key: "FATE_BRIDGE.Link.Notice.TooLargeClosed", data: { type: "test_rolled", bytes: notices.at(-1).data.bytes } });
    assert.ok(Number(notices.at(-1).data.bytes) > 70_000);
  });

  test("queue full: told once per outage, every refusal counted on the badge", async () => {
    nothingAnswers();
    for (let i = 0; i < LIMITS.MAX_QUEUED; i += 1) connection.request({ type: "test_rolled", event_id: `k${i}` });
    for (let i = 0; i < 3; i += 1) await assert.rejects(connection.request({ type: "test_rolled", event_id: `over${i}` }), { code: "queue_full" });
    assert.equal(notices.filter((n) => n.key === "FATE_BRIDGE.Link.Notice.QueueFull").length, 1);
    assert.equal(views.at(-1).refused, 3);
  });
});
