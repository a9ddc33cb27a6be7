/**
 * The reveal schedule survives a reload (issue 19): `/dicesession start MINUTES` keeps the planned
 * end in a world setting, and the active GM's browser, started again (a reload: the same world
 * settings, a fresh module), arms the timer for the time left after its `welcome` and ends the
 * session then. Through the real main.js with injected timers (install({timers})) and a fake bridge
 * socket; the clock is the browser's, the bridge has none.
 */
import { test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { install } from "../scripts/main.js";
import { DICE_SCHEDULE_SETTING } from "../scripts/logic/dice-trust.js";
import { uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { sampleWorld } from "./helpers/world-setup.js";
import { FakeClock, fakeWebSocketClass, until } from "./helpers/fake-socket.js";

const SID = "a1b2c3d4e5f60718";
const COMMITMENT = `${SID}${"0".repeat(48)}`;
const MINUTE = 60_000;

let env;
afterEach(() => {
  env?.handle.dispose();
  uninstallFakeFoundry();
});

/** A GM's browser starting on `settings` (the world's, kept by Foundry across reloads), at `now`. */
async function start(settings, now) {
  const Socket = fakeWebSocketClass();
  env = await sampleWorld({ WebSocket: Socket, settings: { "fate-bridge.token": "secret", ...settings } });
  env.clock = new FakeClock();
  env.clock.now = now;
  const timers = { setTimeout: env.clock.setTimeout, clearTimeout: env.clock.clearTimeout, now: () => env.clock.now };
  env.handle = install({ rulesets: [], timers });
  for (const hook of ["init", "setup", "ready"]) env.world.callHook(hook);
  env.world.deliverSocket(); // the GM's link announcements (logic/link-holder.js)
  env.socket = Socket.instances[0];
  env.socket.open();
  env.socket.receive({ type: "welcome", v: 1, world_id: "e2e-world", bridge_version: "x", rulesets: [], settings: { fate_option: "everyone" } });
}
const sent = (type) => until(() => env.socket.sent.find((m) => m.type === type && !m.answered), type);
function answer(message, reply) {
  message.answered = true;
  env.socket.receive({ v: 1, ...(message.query_id ? { query_id: message.query_id } : { event_id: message.event_id }), ...reply });
}
const status = (sessionId) => ({
  type: "dice_status_reply", session_id: sessionId, commitment: sessionId && COMMITMENT, fingerprint: null,
  settings: { provable: false, physical_rulesets: [], override_mark: "everyone" },
});
const schedule = () => globalThis.game.settings.get("fate-bridge", DICE_SCHEDULE_SETTING);
/** Let `ms` pass on the browser's clock, the bridge answering each heartbeat (as a live bridge does). */
async function pass(ms) {
  for (let left = ms; left > 0; left -= 10_000) {
    env.clock.advance(Math.min(10_000, left));
    for (const ping of env.socket.sent.filter((m) => m.type === "ping" && !m.answered)) {
      ping.answered = true;
      env.socket.receive({ type: "pong", v: 1 });
    }
    await new Promise((resolve) => setImmediate(resolve));
  }
}

test("start 30, a reload 10 minutes later: the new browser ends the session 20 minutes after that", async () => {
  const t0 = Date.UTC(2026, 11, 1, 10, 0);
  await start({}, t0);
  answer(await sent("dice_status"), status(null));
  env.world.asUser(env.gm);
  assert.equal(env.world.callHook("chatMessage", {}, "/dicesession start 30", {}), false);
  answer(await sent("dice_session_start"), { type: "dice_session_started", session_id: SID, commitment: COMMITMENT, fingerprint: "a1b2 c3d4 e5f6 0718", card: { html: "<p>committed</p>" } });
  const plan = await until(() => schedule(), "the planned end kept in the world setting");
  assert.deepEqual(plan, { session_id: SID, ends_at: t0 + 30 * MINUTE, user_id: env.gm });

  // The GM reloads 10 minutes later: a fresh module on the same world settings.
  env.handle.dispose();
  uninstallFakeFoundry();
  await start({ [`fate-bridge.${DICE_SCHEDULE_SETTING}`]: plan }, t0 + 10 * MINUTE);
  assert.ok(!env.clock.pending().includes(20 * MINUTE), "nothing armed before the bridge says the session is open");
  answer(await sent("dice_status"), status(SID));
  await until(() => env.clock.pending().includes(20 * MINUTE), "the timer armed for the 20 minutes left");
  await pass(20 * MINUTE - 10_000);
  assert.equal(env.socket.sent.some((m) => m.type === "dice_session_end"), false, "not before its time");
  await pass(10_000);
  const ended = await sent("dice_session_end");
  assert.deepEqual([ended.user_id, ended.user_is_gm], [env.gm, true]);
  answer(ended, { type: "dice_session_revealed", session_id: SID, commitment: COMMITMENT, fingerprint: "x", seed: "00".repeat(32), card: { html: "<p>revealed</p>" } });
  await until(() => schedule() === null, "the plan cleared once the session ended");
});

test("a reload after the planned end (no GM online then) ends the session at once; a plan of a session ended by hand is dropped", async () => {
  const plan = { session_id: SID, ends_at: 1_000, user_id: "gmUser000000001" };
  await start({ [`fate-bridge.${DICE_SCHEDULE_SETTING}`]: plan }, 5_000);
  answer(await sent("dice_status"), status(SID));
  await until(() => env.clock.pending().includes(0), "armed to end at once");
  await pass(10_000);
  const ended = await sent("dice_session_end");
  answer(ended, { type: "error", code: "not_found", message: "no dice session is open", ref: ended.event_id, field: null });
  await until(() => schedule() === null, "cleared");
  env.handle.dispose();
  uninstallFakeFoundry();

  await start({ [`fate-bridge.${DICE_SCHEDULE_SETTING}`]: { ...plan, ends_at: 9e12 } }, 5_000);
  answer(await sent("dice_status"), status(null));
  await until(() => schedule() === null, "a plan for a session no longer open is dropped");
  assert.ok(!env.clock.pending().some((ms) => ms > 60 * MINUTE), "and never armed");
});
