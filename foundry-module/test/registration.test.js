/**
 * Registering the world with a shared bridge through an invite code (issue 34): the retry rules of
 * logic/registration.js on a fake socket and clock, then the real module (main.js on the fake
 * Foundry, `ws` as the WebSocket) against a REAL bridge process: the GM's settings (address and
 * code, no token) -> `register` -> the token kept in the token setting -> `hello` -> `welcome`;
 * with an approval code, "waiting for the host's approval" until `world pending approve`.
 * Python: $FATE_BRIDGE_PYTHON, else <repo>/.venv/bin/python.
 */
import { test, describe, before, after } from "node:test";
import assert from "node:assert/strict";
import { WebSocket } from "ws";
import { LIMITS, newRequestSecret, registerMessage, startRegistration } from "../scripts/logic/registration.js";
import { install } from "../scripts/main.js";
import { BridgeProcess } from "./helpers/bridge-process.js";
import { uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { FakeClock, fakeWebSocketClass } from "./helpers/fake-socket.js";
import { sampleWorld } from "./helpers/world-setup.js";

const SECRET = "s".repeat(43);
const CLIENT = { module_version: "1", foundry_version: "13", system_id: "sohl", system_version: "1" };

/** A registration on a fake socket and clock, recording what it reports. */
function fakeRegistration() {
  const Socket = fakeWebSocketClass();
  const clock = new FakeClock();
  const told = { tokens: [], waiting: [], refused: [], unreachable: 0 };
  const message = () => registerMessage({ worldId: "w", inviteCode: " abcdefgh.code ", requestSecret: SECRET, client: CLIENT });
  const handle = startRegistration({
    url: "ws://bridge", message, WebSocket: Socket, timers: clock,
    onToken: (token) => told.tokens.push(token),
    onWaiting: (seconds) => told.waiting.push(seconds),
    onRefused: (refusal) => told.refused.push(refusal),
    onUnreachable: () => { told.unreachable += 1; },
  });
  return { Socket, clock, told, handle };
}

describe("logic/registration.js", () => {
  test("register is the only frame; the token is handed over once", () => {
    const { Socket, clock, told } = fakeRegistration();
    const [ws] = Socket.instances;
    ws.open();
    assert.deepEqual(ws.sent, [{ type: "register", v: 1, world_id: "w", invite_code: "abcdefgh.code", request_secret: SECRET, client: CLIENT }]);
    ws.receive({ type: "registered", v: 1, world_id: "w", token: "the-token" });
    ws.drop(1000);
    assert.deepEqual(told.tokens, ["the-token"]);
    assert.deepEqual(clock.pending(), []);
    assert.equal(Socket.instances.length, 1);
  });

  test("a pending request asks again after the bridge's retry_seconds, with the same secret, until approved", () => {
    const { Socket, clock, told } = fakeRegistration();
    for (let round = 0; round < 2; round += 1) {
      const ws = Socket.instances.at(-1);
      ws.open();
      ws.receive({ type: "registration_pending", v: 1, world_id: "w", retry_seconds: 30 });
      ws.drop(1000);
      assert.deepEqual(clock.pending(), [30_000]);
      clock.advance(30_000);
    }
    assert.deepEqual(told.waiting, [30, 30]);
    const last = Socket.instances.at(-1);
    last.open();
    last.receive({ type: "registered", v: 1, world_id: "w", token: "t" });
    assert.deepEqual(Socket.instances.map((ws) => ws.sent[0].request_secret), [SECRET, SECRET, SECRET]);
    assert.deepEqual(told.tokens, ["t"]);
  });

  test("a refusal stops it; rate_limited waits a minute; no answer backs off, told once", () => {
    const refused = fakeRegistration();
    refused.Socket.instances[0].open();
    refused.Socket.instances[0].receive({ type: "error", v: 1, code: "forbidden", message: "world w is registered", field: "world_id" });
    refused.Socket.instances[0].drop(1000);
    assert.deepEqual(refused.told.refused, [{ code: "forbidden", message: "world w is registered" }]);
    assert.deepEqual(refused.clock.pending(), []);

    const limited = fakeRegistration();
    limited.Socket.instances[0].open();
    limited.Socket.instances[0].receive({ type: "error", v: 1, code: "rate_limited", message: "try again in 60 s" });
    assert.deepEqual(limited.clock.pending(), [LIMITS.RATE_RETRY_MS]);

    const down = fakeRegistration();
    const delays = [];
    for (let i = 0; i < 7; i += 1) {
      down.Socket.instances.at(-1).drop(1006);
      delays.push(...down.clock.pending());
      down.clock.advance(down.clock.pending()[0]);
    }
    assert.deepEqual(delays, [2_000, 4_000, 8_000, 16_000, 32_000, 60_000, 60_000]);
    assert.equal(down.told.unreachable, 1);
    down.handle.stop();
    assert.deepEqual(down.clock.pending(), []);
    assert.deepEqual(down.Socket.instances.at(-1).closed, { code: 1000, reason: "registration stopped" });
  });

  test("a request secret is 256 random bits as base64url", () => {
    const secret = newRequestSecret((bytes) => bytes.fill(255));
    assert.equal(secret, "_".repeat(42) + "8");
    assert.match(newRequestSecret((bytes) => globalThis.crypto.getRandomValues(bytes)), /^[A-Za-z0-9_-]{43}$/);
  });
});

describe("the module registers its world with a real bridge", () => {
  let bridge;
  let port;
  before(async () => {
    bridge = new BridgeProcess("fate-bridge-register-");
    port = await bridge.serve();
  });
  after(() => bridge?.stop());

  /** The real module, booted with the GM's `settings` and `timers`; disposed after `t`. */
  async function boot(t, settings, { timers, worldId } = {}) {
    const env = await sampleWorld({ WebSocket, settings: { "fate-bridge.bridgeUrl": `ws://127.0.0.1:${port}`, ...settings } });
    if (worldId) globalThis.game.world.id = worldId;
    const handle = install(timers ? { timers } : undefined);
    t.after(() => {
      handle.dispose();
      uninstallFakeFoundry();
    });
    for (const hook of ["init", "setup", "ready"]) env.world.callHook(hook);
    env.world.deliverSocket();
    const setting = (key) => globalThis.game.settings.get("fate-bridge", key);
    return { env, handle, setting };
  }

  test("settings -> register -> token kept -> hello -> welcome", async (t) => {
    const code = bridge.cli("world", "invite", "--code-only");
    const { env, handle, setting } = await boot(t, { "fate-bridge.inviteCode": code });
    await bridge.until(() => handle.connection()?.isReady(), "welcome after registering");
    const token = setting("token");
    assert.match(token, /^[A-Za-z0-9_-]{43}$/);
    assert.equal(setting("inviteCode"), "");
    assert.equal(setting("registrationSecret"), "");
    // issue 36: the token stays in this browser (a client setting), never on Foundry's server
    assert.deepEqual([...env.world.localStorageOf(env.world.currentUserId)].filter(([key]) => key === "fate-bridge.token"), [["fate-bridge.token", JSON.stringify(token)]]);
    assert.equal(JSON.stringify(env.world.serverSettings).includes(token), false);
    // what the bridge answers a second registration of the world: tests/test_invites.py
    assert.ok(env.world.notices.some((n) => n.text.includes("this world is registered with the bridge")));
  });

  test("an approval code waits for the host, then the token is collected", async (t) => {
    const code = bridge.cli("world", "invite", "--approve", "--code-only");
    const clock = new FakeClock();
    const { env, handle, setting } = await boot(t, { "fate-bridge.inviteCode": code }, { timers: clock, worldId: "world-approve" });
    const waiting = await bridge.until(() => env.world.notices.find((n) => n.text.includes("waiting for the host's approval")), "the waiting notice");
    assert.equal(waiting.text, "Fate Bridge: waiting for the host's approval to register this world. This browser asks again every 30 s; keep Foundry open, or come back later.");
    assert.match(bridge.cli("world", "pending"), /^world-approve\twaiting\tfrom 127\.0\.0\.1\t/m);
    assert.equal(setting("token"), "");
    assert.match(setting("registrationSecret"), /^[A-Za-z0-9_-]{43}$/);
    assert.equal(JSON.stringify(env.world.serverSettings).includes(setting("registrationSecret")), false, "the secret that collects the token stays in this browser");
    bridge.cli("world", "pending", "approve", "world-approve");
    clock.advance(30_000);
    await bridge.until(() => setting("token"), "the token after approval");
    await bridge.until(() => handle.connection()?.isReady(), "welcome");
    assert.equal(env.world.notices.filter((n) => n.text.includes("waiting")).length, 1);
  });
});
