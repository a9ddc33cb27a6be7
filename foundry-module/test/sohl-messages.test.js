import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { resolveFateOption, sohlMessageBuilders } from "../scripts/rulesets/sohl/messages.js";

test("S12: the module's option wins; 'system' follows SoHL's optionFate, anything unknown is everyone", () => {
  for (const [option, sohl, expected] of [
    ["off", "everyone", "off"], ["pc_only", "none", "pc_only"], ["everyone", "none", "everyone"],
    ["system", "none", "off"], ["system", "pconly", "pc_only"], ["system", "everyone", "everyone"],
    ["system", undefined, "everyone"], ["system", "constructor", "everyone"],
  ]) {
    assert.equal(resolveFateOption(option, sohl), expected, `${option}/${sohl}`);
  }
});

test("SoHL's requests carry v:1, a fresh event id, the asker as Foundry names them; a bad choice is a TypeError", () => {
  let n = 0;
  const build = sohlMessageBuilders(() => `ev${++n}`);
  assert.deepEqual(build.fateSpend({ messageId: "m1", pointId: "p1", userId: "u1", userName: "Ann", userIsGM: false }),
    { type: "fate_spend", v: 1, event_id: "ev1", message_id: "m1", point_id: "p1", user_id: "u1", user_is_gm: false, user_name: "Ann" });
  assert.deepEqual(build.fateChoice({ messageId: "m1", choice: "keep", userId: "u1", userIsGM: true }),
    { type: "fate_choice", v: 1, event_id: "ev2", message_id: "m1", choice: "keep", user_id: "u1", user_is_gm: true });
  assert.equal(build.testRolled({ messageId: "m1", actor: {}, test: {}, visibility: "gm" }).ruleset, "sohl");
  // issue 13: a repost names its test's first message; a first message names none
  assert.equal(build.testRolled({ messageId: "m2", testOf: "m1", actor: {}, test: {}, visibility: "gm" }).test_of, "m1");
  for (const testOf of [undefined, null, "m1"]) {
    assert.equal("test_of" in build.testRolled({ messageId: "m1", testOf, actor: {}, test: {}, visibility: "gm" }), false, String(testOf));
  }
  assert.throws(() => build.fateChoice({ messageId: "m1", choice: "both", userId: "u1", userIsGM: false }), /choice "both" is not one of spend, keep/);
});

test("fated_outside: the test's message, the evidence, SoHL's Fate card for fate_card; fields the schema knows", () => {
  const schema = JSON.parse(readFileSync(new URL("../../schemas/client-messages.schema.json", import.meta.url), "utf8")).$defs.FatedOutside;
  let n = 0;
  const build = sohlMessageBuilders(() => `ev${++n}`);
  const raised = build.fatedOutside({ messageId: "repost", evidence: "raised_level" });
  const card = build.fatedOutside({ messageId: "orig", evidence: "fate_card", cardMessageId: "card1" });
  assert.deepEqual(raised, { type: "fated_outside", v: 1, event_id: "outside-raised_level-repost", message_id: "repost", evidence: "raised_level" });
  assert.deepEqual(card, { type: "fated_outside", v: 1, event_id: "outside-fate_card-card1", message_id: "orig", evidence: "fate_card", card_message_id: "card1" });
  // The same evidence reported again (a GM's reload, the next link holder): the same event id, so
  // the bridge answers from its store and records one outside Fate.
  assert.equal(build.fatedOutside({ messageId: "orig", evidence: "fate_card", cardMessageId: "card1" }).event_id, card.event_id);
  assert.equal(build.fatedOutside({ messageId: "repost", evidence: "raised_level" }).event_id, raised.event_id);
  assert.equal(n, 0, "no fresh event id drawn");
  for (const message of [raised, card]) {
    for (const key of Object.keys(message)) assert.ok(Object.hasOwn(schema.properties, key), key);
    for (const key of schema.required) assert.ok(Object.hasOwn(message, key), key);
  }
  assert.throws(() => build.fatedOutside({ messageId: "m1", evidence: "rumour" }), /evidence "rumour" is not one of raised_level, fate_card/);
});
