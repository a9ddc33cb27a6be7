/**
 * Issue 13 against a REAL bridge: the fated state follows the test, not the chat message. On
 * SoHL's own captured messages (samples/sohl/captured: `skill-test-edit-original` and the GM's
 * `skill-test-edit-repost`), the repost's `test_rolled` names the original (`test_of`), the
 * bridge grades the repost of a fated test `already_fated`, and refuses a Fate on it, also when
 * the GM's browser has lost the fated flags (so the module's own check cannot stop it).
 * Python: $FATE_BRIDGE_PYTHON, else <repo>/.venv/bin/python.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { WebSocket } from "ws";
import * as fvtt from "../scripts/foundry.js";
import { createFateFlow } from "../scripts/rulesets/sohl/fate-flow.js";
import { sohlMessageBuilders } from "../scripts/rulesets/sohl/messages.js";
import { realBridge, startModule } from "./helpers/e2e.js";
import { capturedWorld, postCaptured } from "./helpers/world-setup.js";

const LUCKY = "mystery00000000";

const real = realBridge("fate-bridge-repost-e2e-");

test("the GM's edit repost of a fated SoHL test: graded already_fated and its spend refused by the bridge", async (t) => {
  const env = await capturedWorld({ WebSocket, settings: real.settings() });
  const { connection } = await startModule(t, real, env);
  const { until } = real;
  const sent = [];
  const request = connection.request.bind(connection);
  connection.request = (message) => {
    sent.push(message);
    return request(message);
  };
  const flagsOf = (id) => env.world.messages.get(id).flags["fate-bridge"] ?? {};

  // The original is graded and fated by the GM's click.
  const original = await postCaptured(env.world, "skill-test-edit-original");
  await until(() => flagsOf(original).graded?.eligible, "the original graded eligible");
  assert.equal("test_of" in sent.find((m) => m.type === "test_rolled" && m.message_id === original), false);
  env.world.asUser(env.gm);
  env.world.render(original).querySelector(".fate-bridge-spend button").click();
  const fated = await until(() => flagsOf(original).fated, "the original fated");
  const spends = () => sent.filter((m) => m.type === "fate_spend");
  assert.equal(spends().length, 1);

  // The GM's edit reposts it: the bridge hears it is the same test, and grades it so.
  const repost = await postCaptured(env.world, "skill-test-edit-repost");
  const graded = await until(() => flagsOf(repost).graded, "the repost graded");
  const rolled = sent.filter((m) => m.type === "test_rolled" && m.message_id === repost);
  assert.equal(rolled.at(-1).test_of, original);
  assert.deepEqual([graded.eligible, graded.reasons], [false, ["already_fated"]], "the bridge's own grading");
  assert.deepEqual(flagsOf(repost).fated, fated);

  // A spend on the repost sent straight to the bridge is refused already_fated.
  const build = sohlMessageBuilders(() => `direct-${Date.now()}`);
  await assert.rejects(
    connection.request(build.fateSpend({ messageId: repost, pointId: LUCKY, userId: env.gm, userIsGM: true })),
    { code: "already_fated" },
  );

  // A GM's browser that lost the fated flags still cannot fate the test twice: the bridge refuses.
  for (const id of [original, repost]) delete env.world.messages.get(id).flags["fate-bridge"].fated;
  const messagesBefore = env.world.messages.size;
  // (the render offers no Spend Fate on the repost: the bridge graded it already_fated; the GM's
  // flow is driven as a crafted relay would reach it)
  const flow = createFateFlow({ foundry: fvtt, connection, build: sohlMessageBuilders(fvtt.randomId), domParser: fvtt.domParser() });
  await assert.rejects(flow.requestSpend({ messageId: repost, pointId: LUCKY, userId: env.gm }), { code: "already_fated" });
  assert.equal(spends().length, 3, "the module asked the bridge this time");
  assert.equal(env.world.messages.size, messagesBefore, "no second Fate card");
});
