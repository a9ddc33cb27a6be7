/**
 * SoHL's own Fate reported while the link fails (issue 37): a `fated_outside` report that never
 * gets the bridge's answer leaves the test's messages `fated_outside_pending`, so no Spend Fate is
 * offered on them meanwhile, and the next link-up sends the report again, under the same event id,
 * before the catch-up grades anything (rulesets/sohl/fate-flow.js `resendOutside`, index.js).
 * The real module (main.js with SoHL) on the fake Foundry, SoHL's captured messages
 * (samples/sohl/captured: `fate-original-test`, then SoHL's Fate flow's `fate-reposted-test`), and
 * a fake bridge answered by hand; one FakeClock, no real time.
 */
import { test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { install } from "../scripts/main.js";
import * as sohl from "../scripts/rulesets/sohl/index.js";
import { LIMITS } from "../scripts/logic/connection.js";
import { outsideEventId } from "../scripts/rulesets/sohl/messages.js";
import { uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { FakeClock, fakeWebSocketClass, flush, until } from "./helpers/fake-socket.js";
import { capturedWorld, postCaptured } from "./helpers/world-setup.js";

const LUCKY = "mystery00000000";
const WELCOME = { type: "welcome", v: 1, world_id: "e2e-world", bridge_version: "0.1.0", protocol_version: 1, rulesets: ["sohl"], settings: { fate_option: "everyone" } };

let handle;
afterEach(() => {
  handle?.dispose();
  handle = null;
  uninstallFakeFoundry();
});

/**
 * The bridge's answers, as docs/protocol.md gives them: `test_rolled` -> `test_graded` (eligible,
 * or `already_fated` once the test was reported fated outside), `fated_outside` -> the test's
 * `test_graded` re-stated with `already_fated`, `settings` -> `settings_applied`, `dice_status` ->
 * an empty `dice_status_reply`. While `hung` it reads `fated_outside` and answers nothing.
 */
function fakeBridge() {
  const read = new Map();
  const bridge = {
    hung: false,
    /** Every frame received, on any link, in order: [link index, frame]. */
    frames: [],
    fated: false,
    serve(Socket) {
      for (const [index, socket] of Socket.instances.entries()) {
        if (socket.readyState !== 1) continue;
        const frames = socket.sent.slice(read.get(socket) ?? 0);
        read.set(socket, socket.sent.length);
        for (const frame of frames) {
          bridge.frames.push([index, frame]);
          const graded = (messageId, eligible) => ({
            type: "test_graded", v: 1, event_id: frame.event_id, message_id: messageId, level: 0, label: "MF", success: false, critical: false,
            fate: { eligible, reasons: eligible ? [] : ["already_fated"], fate_ml: 77, points: eligible ? [LUCKY] : [] }, mismatch: null,
          });
          if (frame.type === "test_rolled") socket.receive(graded(frame.message_id, !bridge.fated));
          else if (frame.type === "fated_outside" && !bridge.hung) {
            bridge.fated = true;
            socket.receive(graded(frame.message_id, false));
          } else if (frame.type === "settings") socket.receive({ type: "settings_applied", v: 1, ref: frame.event_id, settings: { fate_option: frame.fate_option } });
          else if (frame.type === "dice_status") {
            socket.receive({ type: "dice_status_reply", v: 1, query_id: frame.query_id, session_id: null, commitment: null, fingerprint: null, settings: { provable: false, physical_rulesets: [], override_mark: "everyone" } });
          }
        }
      }
    },
  };
  return bridge;
}

test("a fated_outside report the link lost: no Spend Fate meanwhile, sent again first at link-up under its event id, then recorded", async () => {
  const Socket = fakeWebSocketClass();
  const env = await capturedWorld({ WebSocket: Socket, settings: { "fate-bridge.token": "secret" } });
  const clock = new FakeClock();
  handle = install({ rulesets: [sohl], timers: { setTimeout: clock.setTimeout, clearTimeout: clock.clearTimeout, now: () => clock.now } });
  for (const hook of ["init", "setup", "ready"]) env.world.callHook(hook);
  env.world.deliverSocket();
  const bridge = fakeBridge();
  const serve = async () => {
    for (let round = 0; round < 6; round += 1) {
      bridge.serve(Socket);
      await flush();
    }
  };
  const up = async (socket) => {
    socket.open();
    socket.receive(WELCOME);
    await serve();
  };
  await up(Socket.instances[0]);
  const flagsOf = (id) => env.world.messages.get(id).flags["fate-bridge"] ?? {};
  /** What the player who owns the actor sees on a message: Spend Fate, the withheld line. */
  const seenByPlayer = (id) => {
    env.world.asUser(env.player);
    const html = env.world.render(id);
    env.world.asUser(env.gm);
    return { spend: Boolean(html.querySelector(".fate-bridge-spend")), withheld: html.querySelector(".fate-bridge-withheld")?.textContent ?? null };
  };

  const original = await postCaptured(env.world, "fate-original-test");
  await serve();
  assert.equal(flagsOf(original).graded.eligible, true);
  assert.deepEqual(seenByPlayer(original), { spend: true, withheld: null });

  // SoHL's own Fate reposts the test raised; the bridge takes the report and never answers it.
  bridge.hung = true;
  const repost = await postCaptured(env.world, "fate-reposted-test");
  await serve();
  const reports = () => bridge.frames.filter(([, frame]) => frame.type === "fated_outside");
  assert.deepEqual(reports().map(([link, frame]) => [link, frame.message_id, frame.evidence]), [[0, repost, "raised_level"]]);
  clock.advance(LIMITS.REQUEST_TIMEOUT_MS);
  await until(() => flagsOf(repost).fated_outside_pending, "the report marked as waiting");
  for (const id of [original, repost]) {
    assert.deepEqual(flagsOf(id).fated_outside_pending, { evidence: "raised_level", message_id: repost, card_message_id: null }, id);
    assert.equal(flagsOf(id).fated_outside, undefined, "not recorded by the bridge yet");
    assert.deepEqual(seenByPlayer(id), { spend: false, withheld: "Fate withheld: already fated" }, id);
  }

  // The link goes and comes back: the report goes first, under the same event id.
  bridge.hung = false;
  Socket.instances[0].drop(1006);
  clock.advance(LIMITS.BACKOFF_MIN_MS);
  assert.equal(Socket.instances.length, 2);
  await up(Socket.instances[1]);
  const afterWelcome = bridge.frames.filter(([link]) => link === 1).map(([, frame]) => frame.type).filter((type) => !["hello", "settings", "dice_status"].includes(type));
  assert.equal(afterWelcome[0], "fated_outside", `the report before any grading: ${afterWelcome.join(", ")}`);
  assert.deepEqual(reports().map(([link, frame]) => [link, frame.event_id]), [[0, outsideEventId("raised_level", repost)], [1, outsideEventId("raised_level", repost)]]);
  await until(() => flagsOf(original).fated_outside, "recorded");
  for (const id of [original, repost]) {
    assert.equal(flagsOf(id).fated_outside, "raised_level", id);
    assert.equal(flagsOf(id).fated_outside_pending, null, id);
    assert.deepEqual(seenByPlayer(id), { spend: false, withheld: "Fate withheld: already fated" }, id);
  }
  assert.deepEqual(flagsOf(repost).graded.reasons, ["already_fated"]);

  // Another link-up sends nothing again.
  Socket.instances[1].drop(1006);
  clock.advance(LIMITS.BACKOFF_MIN_MS);
  await up(Socket.instances[2]);
  assert.equal(reports().length, 2);
});
