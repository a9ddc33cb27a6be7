/**
 * Issue 24 against a REAL bridge: a SoHL Fate Test made outside the bridge (SoHL's own Fate flow,
 * run by a client without the module) is recognised from what SoHL posts and recorded; the test
 * and its repost are then refused for Fate `already_fated`, never fated a second time. SoHL's own
 * messages are the captured ones (samples/sohl/captured: `fate-original-test`, then SoHL's Fate
 * flow's `fate-reposted-test`, level raised on the same die, and its `fate-test-card`).
 * Python: $FATE_BRIDGE_PYTHON, else <repo>/.venv/bin/python.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { WebSocket } from "ws";
import { JSDOM } from "jsdom";
import * as fvtt from "../scripts/foundry.js";
import { readSohlFateCard } from "../scripts/rulesets/sohl/card.js";
import { createFateFlow } from "../scripts/rulesets/sohl/fate-flow.js";
import { sohlMessageBuilders } from "../scripts/rulesets/sohl/messages.js";
import { realBridge, startModule } from "./helpers/e2e.js";
import { captured } from "./helpers/samples.js";
import { capturedWorld, postCaptured } from "./helpers/world-setup.js";

const LUCKY = "mystery00000000";
const real = realBridge("fate-bridge-outside-e2e-");

/** Start the module on a fresh world; `sent` lists every request the GM's module made. */
async function start(t) {
  const env = await capturedWorld({ WebSocket, settings: real.settings() });
  const { connection } = await startModule(t, real, env);
  const sent = [];
  const request = connection.request.bind(connection);
  connection.request = (message) => {
    sent.push(message);
    return request(message);
  };
  const flagsOf = (id) => env.world.messages.get(id).flags["fate-bridge"] ?? {};
  const flow = createFateFlow({ foundry: fvtt, connection, build: sohlMessageBuilders(fvtt.randomId), domParser: fvtt.domParser() });
  return { env, connection, sent, flagsOf, flow };
}

test("SoHL's own Fate (repost raised on the same die, then its Fate card): recorded, and the test is refused for Fate", async (t) => {
  const { env, connection, sent, flagsOf, flow } = await start(t);
  const { until } = real;
  const original = await postCaptured(env.world, "fate-original-test");
  await until(() => flagsOf(original).graded?.eligible, "the original graded eligible");
  assert.equal(flagsOf(original).sohl_fate_actor, "Actor.AldricKaldor0001", "SoHL offered its own Fate on it");

  // SoHL's Fate flow on a client without the module: the raised repost, then SoHL's Fate card.
  const repost = await postCaptured(env.world, "fate-reposted-test");
  await until(() => flagsOf(repost).fated_outside, "the repost recognised");
  const card = await postCaptured(env.world, "fate-test-card");
  await until(() => sent.filter((m) => m.type === "fated_outside").length === 2, "both reported");
  const reports = sent.filter((m) => m.type === "fated_outside").map(({ message_id, evidence, card_message_id }) => ({ message_id, evidence, card_message_id }));
  assert.deepEqual(reports, [
    { message_id: repost, evidence: "raised_level", card_message_id: undefined },
    { message_id: original, evidence: "fate_card", card_message_id: card },
  ]);
  assert.equal(sent.find((m) => m.type === "test_rolled" && m.message_id === repost).test_of, original);
  await until(() => flagsOf(original).graded?.eligible === false, "the original re-stated");
  for (const id of [original, repost]) {
    assert.equal(flagsOf(id).fated_outside, "raised_level", id);
    assert.deepEqual(flagsOf(id).graded.reasons, ["already_fated"], id);
  }

  // Everyone sees "already fated" and no Spend Fate on either message.
  env.world.asUser(env.player);
  for (const id of [original, repost]) {
    const html = env.world.render(id);
    assert.equal(html.querySelector(".fate-bridge-spend"), null, id);
    assert.equal(html.querySelector(".fate-bridge-withheld")?.textContent, "Fate withheld: already fated", id);
  }

  // A spend from either message is refused already_fated: by the module, and by the bridge.
  env.world.asUser(env.gm);
  const before = { messages: env.world.messages.size };
  for (const id of [original, repost]) await assert.rejects(flow.requestSpend({ messageId: id, pointId: LUCKY, userId: env.gm }), { code: "already_fated" });
  assert.deepEqual(sent.filter((m) => m.type === "fate_spend"), [], "refused before reaching the bridge");
  const build = sohlMessageBuilders(fvtt.randomId);
  for (const id of [original, repost]) {
    await assert.rejects(connection.request(build.fateSpend({ messageId: id, pointId: LUCKY, userId: env.gm, userIsGM: true })), { code: "already_fated" });
  }
  assert.equal(env.world.messages.size, before.messages, "no Fate card of ours");
  assert.deepEqual(env.world.itemUpdates, [], "no charge spent by the bridge");
});

test("SoHL's Fate card alone (its Fate Test changed no level: no repost) fates the test it was spent on", async (t) => {
  const { env, sent, flagsOf } = await start(t);
  const { until } = real;
  const original = await postCaptured(env.world, "fate-original-test");
  await until(() => flagsOf(original).graded?.eligible, "the original graded eligible");
  await postCaptured(env.world, "fate-test-card");
  await until(() => flagsOf(original).fated_outside, "the original fated outside");
  assert.equal(flagsOf(original).fated_outside, "fate_card");
  assert.deepEqual(flagsOf(original).graded.reasons, ["already_fated"]);
  assert.deepEqual(sent.filter((m) => m.type === "fated_outside").map((m) => m.evidence), ["fate_card"]);
});

test("only SoHL's Fate card reads as one: every other captured SoHL message does not", () => {
  const parser = new new JSDOM("").window.DOMParser();
  const names = ["fate-test-card", "fate-original-test", "fate-reposted-test", "skill-test-default", "skill-test-edit-repost",
    "attribute-test-aura", "skill-test-blindroll", "skill-test-slmod"];
  const read = Object.fromEntries(names.map((name) => [name, readSohlFateCard(captured(name).reconstructedPersistedChatMessage.content, parser)]));
  assert.deepEqual(read, { ...Object.fromEntries(names.map((name) => [name, null])), "fate-test-card": { actorUuid: "Actor.AldricKaldor0001" } });
  assert.equal(readSohlFateCard("<p>not a card</p>", parser), null);
});

test("SoHL's GM edit (EML 55 -> 35, SoHL keeps level 1 on die 37) is no Fate: nothing reported, Fate still offered", async (t) => {
  const { env, sent, flagsOf } = await start(t);
  const { until } = real;
  const original = await postCaptured(env.world, "skill-test-edit-original");
  await until(() => flagsOf(original).graded?.eligible, "the original graded eligible");
  const repost = await postCaptured(env.world, "skill-test-edit-repost");
  await until(() => flagsOf(repost).graded, "the repost graded");
  assert.equal(sent.find((m) => m.type === "test_rolled" && m.message_id === repost).test_of, original);
  assert.deepEqual(sent.filter((m) => m.type === "fated_outside"), []);
  assert.equal(flagsOf(repost).fated_outside, undefined);
  assert.equal(flagsOf(original).graded.eligible, true);
});

test("caught up at link-up (issue 24): a test, SoHL's raised repost and its Fate card, all posted while no link was up, are one test fated outside", async (t) => {
  // Posted before the module runs (the module just enabled, or no GM with the token online): the
  // link's catch-up (rulesets/sohl CATCH_UP) grades them. A repost joins its test only once the
  // test's first message carries its identity flags, and SoHL's Fate card counts against the test
  // card that offered SoHL's Fate: graded in the order they were posted, or the repost is a test of
  // its own, still open to a second Fate through the bridge.
  const env = await capturedWorld({ WebSocket, settings: real.settings() });
  const original = await postCaptured(env.world, "fate-original-test");
  const repost = await postCaptured(env.world, "fate-reposted-test");
  const card = await postCaptured(env.world, "fate-test-card");
  const { connection } = await startModule(t, real, env);
  const { until } = real;
  const flagsOf = (id) => env.world.messages.get(id).flags["fate-bridge"] ?? {};
  await until(() => flagsOf(repost).graded && flagsOf(original).graded, "both caught up");
  await until(() => flagsOf(original).fated_outside && flagsOf(repost).fated_outside, "SoHL's own Fate recognised");
  await until(() => flagsOf(original).graded.eligible === false, "the original re-stated (SoHL's Fate card reported against it)");
  assert.equal(flagsOf(repost).test_of, original, "the repost is its test's, not a test of its own");
  for (const id of [original, repost]) assert.deepEqual(flagsOf(id).graded.reasons, ["already_fated"], id);
  const build = sohlMessageBuilders(fvtt.randomId);
  for (const id of [original, repost]) {
    await assert.rejects(connection.request(build.fateSpend({ messageId: id, pointId: LUCKY, userId: env.gm, userIsGM: true })), { code: "already_fated" }, id);
  }
  assert.equal(flagsOf(card).graded, undefined, "SoHL's Fate card is no test");
});

test("SoHL's Fate card graded again later (a reload's catch-up) counts against the test before it, never a later test of the actor", async (t) => {
  // The Fate card carries no `graded` flag, so the catch-up of a browser that starts again within
  // CATCH_UP sends it once more: it must count against the test it followed (already fated: the
  // bridge records nothing new), not against the actor's newest test card, a fresh test whose Fate
  // would be lost.
  const { env, sent, flagsOf, flow } = await start(t);
  const { until } = real;
  const original = await postCaptured(env.world, "fate-original-test");
  await until(() => flagsOf(original).graded?.eligible, "the original graded eligible");
  const card = await postCaptured(env.world, "fate-test-card");
  await until(() => flagsOf(original).fated_outside, "the original fated outside");
  const later = await postCaptured(env.world, "fate-original-test"); // a fresh test: it names its item
  await until(() => flagsOf(later).graded?.eligible, "the later test graded eligible");
  assert.equal(flagsOf(later).test_of, later);

  const again = await flow.gradeMessage(card, { first: true }); // what the catch-up does after a reload
  assert.equal(again.ok, true);
  const reports = sent.filter((m) => m.type === "fated_outside");
  assert.deepEqual(reports.map((m) => m.message_id), [original, original]);
  // The same evidence, the same event id: the bridge answers the second from its store, and the
  // trail holds one outside Fate however often the GM reloads.
  assert.deepEqual(reports.map((m) => m.event_id), [`outside-fate_card-${card}`, `outside-fate_card-${card}`]);
  assert.equal(flagsOf(later).fated_outside, undefined);
  assert.equal(flagsOf(later).graded.eligible, true, "the later test keeps its Fate");
});

test("a repost raised by SoHL's own Fate never shows Spend Fate: it is graded only after the bridge recorded the outside Fate", async (t) => {
  const { env, connection, flagsOf } = await start(t);
  const { until } = real;
  const gradedWhenReported = [];
  const request = connection.request.bind(connection);
  connection.request = (message) => {
    if (message.type === "fated_outside") gradedWhenReported.push(flagsOf(message.message_id).graded);
    return request(message);
  };
  const original = await postCaptured(env.world, "fate-original-test");
  await until(() => flagsOf(original).graded?.eligible, "the original graded eligible");
  const repost = await postCaptured(env.world, "fate-reposted-test");
  await until(() => flagsOf(repost).graded, "the repost graded");
  // Before the fix the repost carried an eligible `graded` flag (a Spend Fate button) for the round
  // trip of its fated_outside report; a GM leaving then left the test open to a second Fate.
  assert.deepEqual(gradedWhenReported, [undefined]);
  assert.equal(flagsOf(repost).graded.eligible, false);
  assert.deepEqual(flagsOf(repost).graded.reasons, ["already_fated"]);
  assert.equal(flagsOf(repost).fated_outside, "raised_level");
});
