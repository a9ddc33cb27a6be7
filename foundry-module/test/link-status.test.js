/**
 * "The GM sees the link" (issue 13): the link badge's states and the GM's notices, driven by the
 * real BridgeConnection on a fake clock and fake WebSocket.
 */
import { test, describe, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { BridgeConnection, LIMITS } from "../scripts/logic/connection.js";
import { createLinkStatus, linkBadge, likelyCause, compareVersions, permissionMatters, LINK, CAUSE, DEVICE_PERMISSIONS, PERMISSION } from "../scripts/logic/link-status.js";
import { messageBuilders } from "../scripts/logic/messages.js";
import { FakeClock, fakeWebSocketClass } from "./helpers/fake-socket.js";

const URL = "ws://127.0.0.1:8765";
const WELCOME = { type: "welcome", v: 1, world_id: "w", bridge_version: "0.1.0", protocol_version: 1, max_frame_bytes: 65_536, rulesets: ["sohl"], settings: { fate_option: "everyone" } };
/** Localize as `key|data` so tests see which text and which values. */
const t = (key, data) => (data ? `${key}|${JSON.stringify(data)}` : key);

let clock, Socket, notices, views, connection;
function setup({ url = URL, pageProtocol = "http:", pageHost = "localhost", moduleVersion = "0.1.0", permissionState } = {}) {
  clock = new FakeClock();
  Socket = fakeWebSocketClass();
  notices = [];
  views = [];
  const link = createLinkStatus({
    url, pageProtocol, pageHost, moduleVersion, protocolVersion: 1, permissionState,
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
/** Every promise settled so far has run its callbacks (the browser's permission answer). */
const settled = () => new Promise((resolve) => setImmediate(resolve));
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

  test("likely causes: ws:// to another computer from an https:// page, a bad address, nothing there", () => {
    assert.equal(likelyCause({ url: "ws://192.168.1.5:8765", pageProtocol: "https:", reason: "unreachable" }), CAUSE.MIXED_CONTENT);
    assert.equal(likelyCause({ url: "ws://bridge.example:8765", pageProtocol: "https:", pageHost: "foundry.example", reason: "unreachable", permission: "granted" }), CAUSE.MIXED_CONTENT);
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

describe("a bridge on this computer, the Foundry page https:// from elsewhere (issue 34)", () => {
  const HOSTED = { pageProtocol: "https:", pageHost: "table.forge-vtt.com" };

  test("loopback is not mixed content: the cause follows the browser's local-network permission", () => {
    for (const url of ["ws://127.0.0.1:8765", "ws://127.8.9.10:8765", "ws://localhost:8765", "ws://bridge.localhost:8765", "ws://[::1]:8765", "wss://localhost:8765"]) {
      const cause = (permission, reason = "unreachable") => likelyCause({ url, ...HOSTED, reason, permission });
      assert.equal(cause(PERMISSION.DENIED), CAUSE.DEVICE_BLOCKED, url);
      assert.equal(cause(PERMISSION.PROMPT), CAUSE.DEVICE_ASK, url);
      assert.equal(cause(PERMISSION.GRANTED), CAUSE.NOTHING_THERE, `${url}: granted, so the permission is not why`);
      assert.equal(cause(null), CAUSE.DEVICE_MAYBE, `${url}: a browser that does not say`);
      assert.equal(cause(PERMISSION.DENIED, "socket_error"), CAUSE.DEVICE_BLOCKED, `${url}: the constructor threw`);
      // The socket opened: the browser let it through, whatever the permission says.
      assert.equal(cause(PERMISSION.DENIED, "no_welcome"), CAUSE.NOT_THE_BRIDGE, url);
      assert.equal(cause(PERMISSION.DENIED, "closed"), CAUSE.DROPPED, url);
    }
  });

  test("the permission matters only for an https:// page not itself on this computer, and a socket that never opened", () => {
    const matters = (args) => permissionMatters({ url: URL, reason: "unreachable", ...HOSTED, ...args });
    assert.equal(matters({}), true);
    assert.equal(matters({ pageProtocol: "http:" }), false, "an http:// page is never asked (a same-computer table)");
    for (const pageHost of ["localhost", "127.0.0.1", "[::1]", "foundry.localhost"]) assert.equal(matters({ pageHost }), false, pageHost);
    assert.equal(matters({ url: "wss://bridge.example.org" }), false, "a bridge on another computer");
    assert.equal(matters({ url: "ws://localhost.example.org:8765" }), false);
    assert.equal(matters({ reason: "no_welcome" }), false);
    assert.equal(likelyCause({ url: URL, pageProtocol: "https:", pageHost: "localhost", reason: "unreachable", permission: PERMISSION.DENIED }), CAUSE.NOTHING_THERE);
  });

  test("blocked: the outage's one notice names the block and how to undo it, after asking the browser by its names", async () => {
    const asked = [];
    setup({ ...HOSTED, permissionState: async (names) => { asked.push(names); return PERMISSION.DENIED; } });
    nothingAnswers();
    assert.deepEqual(notices, [], "told once the browser has answered");
    await settled();
    assert.deepEqual(asked, [DEVICE_PERMISSIONS]);
    assert.deepEqual(DEVICE_PERMISSIONS, ["loopback-network", "local-network-access"]);
    assert.deepEqual(notices, [{ level: "error", key: "FATE_BRIDGE.Link.Notice.Unreachable", data: { url: URL, cause: `FATE_BRIDGE.Link.Cause.${CAUSE.DEVICE_BLOCKED}` } }]);
    assert.equal(views.at(-1).cause, CAUSE.DEVICE_BLOCKED);
    assert.ok(linkBadge(views.at(-1), t).details.includes(`FATE_BRIDGE.Link.Cause.${CAUSE.DEVICE_BLOCKED}`));
    // The GM allows it: the next attempt connects, and the badge says so.
    clock.advance(LIMITS.BACKOFF_MIN_MS);
    Socket.instances.at(-1).open();
    Socket.instances.at(-1).receive(WELCOME);
    assert.deepEqual([views.at(-1).state, views.at(-1).cause, keys().at(-1)], [LINK.CONNECTED, null, "FATE_BRIDGE.Link.Notice.Back"]);
  });

  test("not asked yet, granted, or a browser that cannot say (the query rejects)", async () => {
    for (const [answer, cause] of [[async () => PERMISSION.PROMPT, CAUSE.DEVICE_ASK], [async () => PERMISSION.GRANTED, CAUSE.NOTHING_THERE],
      [async () => null, CAUSE.DEVICE_MAYBE], [() => Promise.reject(new TypeError("no such permission")), CAUSE.DEVICE_MAYBE], [undefined, CAUSE.DEVICE_MAYBE]]) {
      setup({ ...HOSTED, permissionState: answer });
      nothingAnswers();
      await settled();
      assert.deepEqual(notices.map((n) => n.data.cause), [`FATE_BRIDGE.Link.Cause.${cause}`], String(answer));
    }
  });

  test("an answer that arrives after the next attempt started tells the notice but leaves the badge to the newer state", async () => {
    let answer;
    setup({ ...HOSTED, permissionState: () => new Promise((resolve) => { answer = resolve; }) });
    nothingAnswers();
    clock.advance(LIMITS.BACKOFF_MIN_MS); // the next attempt is connecting
    answer(PERMISSION.DENIED);
    await settled();
    assert.deepEqual(notices.map((n) => n.data.cause), [`FATE_BRIDGE.Link.Cause.${CAUSE.DEVICE_BLOCKED}`]);
    assert.deepEqual([views.at(-1).state, views.at(-1).retryInMs], [LINK.CONNECTING, null]);
  });

  test("an http:// page on this computer never asks the browser", () => {
    let asked = 0;
    setup({ pageProtocol: "http:", pageHost: "localhost", permissionState: async () => { asked += 1; return PERMISSION.DENIED; } });
    nothingAnswers();
    assert.equal(asked, 0);
    assert.deepEqual(notices.map((n) => n.data.cause), [`FATE_BRIDGE.Link.Cause.${CAUSE.NOTHING_THERE}`]);
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
