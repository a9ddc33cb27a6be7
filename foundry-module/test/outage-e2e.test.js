/**
 * "Nothing lost while the bridge is away", end to end (issue 13): a REAL bridge process, the REAL
 * module (main.js on the fake Foundry, `ws` as the WebSocket) whose connection and relay run on an
 * injected clock. The bridge is stopped; for 30 s (of that clock) tests are rolled and Spend Fate
 * is clicked; the bridge is started again on the same port and database. Every request is then
 * sent once, in the order it was made, and answered once; nothing timed out while it waited; the
 * clicked button stays pending until its answer.
 * Python: $FATE_BRIDGE_PYTHON, else <repo>/.venv/bin/python.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { WebSocket } from "ws";
import { PENDING_CLASS } from "../scripts/logic/pending.js";
import { FakeClock } from "./helpers/fake-socket.js";
import { FakeItem } from "./helpers/fake-foundry.js";
import { realBridge, startModule } from "./helpers/e2e.js";
import { sampleWorld, postArchery } from "./helpers/world-setup.js";

const real = realBridge("fate-bridge-outage-");
const { until } = real;

/** `ws` recording every frame the module sends, per socket, in order. */
const frames = [];
class RecordingWebSocket extends WebSocket {
  send(data, ...rest) {
    frames.push(JSON.parse(data));
    return super.send(data, ...rest);
  }
}

test("30 s without the bridge: tests rolled and a Spend Fate click wait, then go once, in order, and are answered once", async (t) => {
  const env = await sampleWorld({ WebSocket: RecordingWebSocket, settings: real.settings() });
  const clock = new FakeClock();
  const { connection } = await startModule(t, real, env, { timers: clock });
  const answers = [];
  const settled = [];
  const request = connection.request.bind(connection);
  connection.request = (message) => {
    const promise = request(message);
    promise.then((reply) => answers.push([message.type, message.event_id, reply.type]), (error) => settled.push([message.type, error.code]));
    return promise;
  };
  const flagsOf = (id) => env.world.messages.get(id).flags["fate-bridge"] ?? {};
  const first = await postArchery(env.world);
  await until(() => flagsOf(first).graded, "the first test graded");

  // The bridge goes away.
  await real.bridge.pause();
  await until(() => !connection.isReady(), "the link to notice the bridge is gone");
  frames.length = 0;
  answers.length = 0;

  // 30 s of outage: two tests rolled, the GM clicks Spend Fate on the first; reconnects fail.
  const rolled = [];
  let button = null;
  for (let second = 0; second < 30; second += 5) {
    if (second === 0 || second === 10) rolled.push(await postArchery(env.world));
    if (second === 20) {
      button = env.world.render(first).querySelector(".fate-bridge-spend button");
      button.click();
    }
    clock.advance(5_000);
    // Let a reconnect attempt (if one was due) fail for real before the clock moves on.
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  assert.deepEqual(settled, [], "nothing timed out or was refused while the bridge was away");
  assert.deepEqual(answers, []);
  assert.equal(frames.filter((f) => f.event_id).length, 0, "nothing sent while away");
  assert.equal(button.disabled, true);
  assert.equal(env.world.render(first).querySelector(".fate-bridge-spend button").classList.contains(PENDING_CLASS), true, "pending, across a re-render");
  const waiting = [...connection.pending.values()].map((entry) => [entry.message.type, entry.message.message_id]);
  assert.deepEqual(waiting, [["test_rolled", rolled[0]], ["test_rolled", rolled[1]], ["test_rolled", first]], "kept, in the order made (the spend re-grades first)");

  // The bridge is back on the same port and database; the next attempt finds it.
  await real.bridge.resume();
  // Move the clock a second at a time until the next attempt has found it (no further: the
  // heartbeat runs on this clock too).
  await until(() => connection.isReady() || (clock.advance(1_000), false), "welcome again", 20_000);
  await until(() => rolled.every((id) => flagsOf(id).graded), "the tests rolled while away, graded");
  await until(() => flagsOf(first).fated, "the spend applied");
  await until(() => connection.pending.size === 0, "every request answered");

  const sent = frames.filter((f) => f.event_id && f.type !== "settings").map((f) => [f.type, f.message_id]);
  assert.deepEqual(sent.slice(0, 3), waiting, "the queue went first, in order");
  assert.deepEqual(sent.slice(3).map(([type]) => type), ["fate_spend"]);
  const ids = frames.filter((f) => f.event_id && f.type !== "settings").map((f) => f.event_id);
  assert.equal(new Set(ids).size, ids.length, "each sent once");
  // After each welcome the GM's browser also sends its ruleset settings and asks the dice status (a query).
  const answered = answers.filter(([type]) => type !== "settings" && type !== "dice_status");
  assert.deepEqual(answered.map(([, id]) => id), ids, "each answered once, in order");
  assert.deepEqual(answered.map(([, , reply]) => reply), ["test_graded", "test_graded", "test_graded", "fate_resolved"]);
  assert.deepEqual(settled, []);
  const after = env.world.render(first).querySelector(".fate-bridge-spend button");
  assert.equal(after, null, "a fated test offers no second spend");
});

test("a test too large for the bridge's frame limit is refused once, in the browser, with a notice naming the limit", async (t) => {
  const env = await sampleWorld({ WebSocket: RecordingWebSocket, settings: real.settings() });
  const { connection } = await startModule(t, real, env);
  const limit = connection.maxFrameBytes;
  assert.equal(limit, 64 * 1024, "the bridge's real limit, from welcome");
  // An actor carrying hundreds of Fate Points with long names: its test_rolled is over 64 KiB.
  const lucky = env.actor.items.get("mystery00000000");
  for (let i = 0; i < 400; i += 1) {
    const id = `bulk${String(i).padStart(12, "0")}`;
    env.actor.items.set(id, new FakeItem({ ...lucky.toObject(), _id: id, name: `Lucky Star ${"of the long name ".repeat(12)}${i}` }, env.world.itemUpdates));
  }
  frames.length = 0;
  const messageId = await postArchery(env.world);
  const notice = await until(() => env.world.notices.find((n) => n.text.includes("larger than the bridge accepts")), "the too-large notice");
  assert.match(notice.text, new RegExp(`a test_rolled request of \\d+ bytes is larger than the bridge accepts \\(${limit} bytes\\); it was not sent`));
  assert.equal(notice.userId, env.gm);
  await new Promise((resolve) => setTimeout(resolve, 200));
  assert.equal(frames.filter((f) => f.type === "test_rolled").length, 0, "never sent");
  assert.equal(env.world.notices.filter((n) => n.text.includes("larger than the bridge accepts")).length, 1, "refused once");
  assert.equal(connection.isReady(), true, "the link stays up");
  assert.equal(env.world.messages.get(messageId).flags["fate-bridge"]?.graded, undefined);
});
