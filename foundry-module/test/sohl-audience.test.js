/**
 * Issue 13 on SoHL's own chat messages (samples/sohl/captured/, made by running SoHL's code):
 * who sees a test (`visibility` from the message's whisper/blind, never SoHL's rollMode), who
 * sees its Fate card and the Fate Test's die (Dice So Nice), who may spend, and a test fated once
 * in total across the GM's edit repost. Drives the real module: install() with SoHL through the
 * ruleset api, a scripted bridge link, the fake Foundry of helpers/fake-foundry.js.
 */
import { test, describe, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import * as fvtt from "../scripts/foundry.js";
import { createFateFlow } from "../scripts/rulesets/sohl/fate-flow.js";
import { sohlMessageBuilders } from "../scripts/rulesets/sohl/messages.js";
import { uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { capturedWorld, postCaptured, CAPTURED_IDS } from "./helpers/world-setup.js";
import { captured } from "./helpers/samples.js";
import { rollData } from "../scripts/logic/dice.js";

const LUCKY = "mystery00000000";

/** What a Fate request came to: `applied`, or the code of its refusal (a BridgeError's). */
const outcome = (promise) => promise.then((applied) => (applied === true ? "applied" : `resolved ${applied}`), (error) => error.code);

/** A scripted bridge: grades every test eligible, resolves every spend "spent" with the fated flag. */
function scriptedBridge({ outcome = "spent" } = {}) {
  const sent = [];
  const replies = {
    test_rolled: (m) => ({
      type: "test_graded", v: 1, event_id: m.event_id, message_id: m.message_id, level: 0, label: "MF", success: false, critical: false,
      fate: { eligible: true, reasons: [], fate_ml: 60, points: [LUCKY] }, mismatch: null,
    }),
    fate_spend: (m) => outcome === "choice" ? {
      type: "fate_resolved", v: 1, event_id: m.event_id, message_id: m.message_id, fate_roll: 20, fate_ml: 60, fate_level: 2, fate_label: "CS",
      outcome: "choice", gain: null, level_before: 0, label_before: "MF", level_after: null, label_after: null,
      point: { point_id: LUCKY, name: "Lucky Star", charges_after: 2 },
      card: { title: "Archery: Fate", ruleset: "sohl", speaker_actor_id: CAPTURED_IDS.actor, speaker_alias: "Aldric",
        html: `<div data-fate-bridge-message-id="${m.message_id}"><button data-fate-bridge-choice="spend">Spend</button><button data-fate-bridge-choice="keep">Keep</button></div>` },
      effects: [{ kind: "flag_message", message_id: m.message_id, key: "fated", value: { outcome: "choice", pending: true, level_after: null, event_id: m.event_id } }],
      choice_by: [m.user_id],
    } : {
      type: "fate_resolved", v: 1, event_id: m.event_id, message_id: m.message_id, fate_roll: 23, fate_ml: 60, fate_level: 1, fate_label: "MS",
      outcome: "spent", gain: 1, level_before: 0, label_before: "MF", level_after: 1, label_after: "MS",
      point: { point_id: LUCKY, name: "Lucky Star", charges_after: 1 },
      card: { title: "Archery: Fate", ruleset: "sohl", speaker_actor_id: CAPTURED_IDS.actor, speaker_alias: "Aldric", html: '<div class="fate-bridge-card">spent</div>' },
      effects: [{ kind: "flag_message", message_id: m.message_id, key: "fated", value: { outcome: "spent", pending: false, level_after: 1, event_id: m.event_id } }],
      choice_by: [],
    },
  };
  return { sent, isStopped: () => false, request: async (m) => { sent.push(m); return replies[m.type](m); } };
}

let env;
let bridge;
let flow;
beforeEach(async () => {
  env = await capturedWorld({ diceSoNice: true });
  bridge = scriptedBridge();
  flow = createFateFlow({ foundry: fvtt, connection: bridge, build: sohlMessageBuilders(fvtt.randomId), domParser: fvtt.domParser() });
});
afterEach(() => uninstallFakeFoundry());

const flagsOf = (id) => env.world.messages.get(id).flags["fate-bridge"] ?? {};
const lastCard = () => [...env.world.messages.values()].at(-1);

describe("visibility is the chat message's own whisper/blind", () => {
  // The dialog's choice survives only in data-scope; SoHL posts with the speaker's mode ("roll"),
  // so these four messages are public whatever their rollMode says (samples README).
  for (const name of ["skill-test-default", "skill-test-publicroll", "skill-test-gmroll", "skill-test-blindroll", "skill-test-selfroll"]) {
    test(`${name}: posted to everyone -> public`, async () => {
      const id = await postCaptured(env.world, name);
      assert.equal((await flow.gradeMessage(id)).ok, true);
      assert.equal(bridge.sent[0].visibility, "public");
    });
  }
  for (const [name, visibility, rollMode] of [
    ["skill-test-gmroll-core-setting", "gm", "gmroll"],
    ["skill-test-blindroll-core-setting", "blind", "blindroll"],
    ["skill-test-selfroll-core-setting", "self", "selfroll"],
  ]) {
    test(`${name}: Foundry's ${rollMode} applied -> ${visibility}`, async () => {
      const id = await postCaptured(env.world, name);
      await flow.gradeMessage(id);
      assert.equal(bridge.sent[0].visibility, visibility);
    });
  }
  test("the GM's edit repost whispered to the GM alone (its author): self, not the dialog's gmroll", async () => {
    // The GM is the repost's author and its only reader: Foundry shows it to nobody else.
    await flow.gradeMessage(await postCaptured(env.world, "skill-test-edit-original"));
    const repost = await postCaptured(env.world, "skill-test-edit-repost");
    assert.equal((await flow.gradeMessage(repost)).ok, true);
    assert.equal(bridge.sent.at(-1).message_id, repost);
    assert.equal(bridge.sent.at(-1).visibility, "self");
  });
  test("a gmroll test whose data says 'roll' is still gm (the data names no audience)", async () => {
    const id = await postCaptured(env.world, "skill-test-gmroll-core-setting");
    const message = env.world.messages.get(id);
    message.content = message.content.replaceAll("&quot;rollMode&quot;:&quot;gmroll&quot;", "&quot;rollMode&quot;:&quot;roll&quot;");
    await flow.gradeMessage(id);
    assert.equal(bridge.sent[0].visibility, "gm");
  });
});

describe("the Fate card and the Fate Test's die reach the people who saw the test", () => {
  // Foundry v13 (client/documents/chat-message.mjs): a SoHL test card carries no Rolls, so a blind
  // test shows its full result to its author; only a test with Rolls hides it (see below).
  const cases = [
    // [sample, who spends, card whisper, blind, the clients that see the die once (all others: none)]
    ["skill-test-publicroll", "player", [], false, ["gm", "player", "stranger"]],
    ["skill-test-gmroll-core-setting", "player", [CAPTURED_IDS.gm, CAPTURED_IDS.player], false, ["gm", "player"]],
    ["skill-test-blindroll-core-setting", "player", [CAPTURED_IDS.gm, CAPTURED_IDS.player], false, ["gm", "player"]],
    ["skill-test-blindroll-core-setting", "gm", [CAPTURED_IDS.gm, CAPTURED_IDS.player], false, ["gm", "player"]],
    // The GM's browser posts the card as its roller (its author): Foundry shows a whisper to its
    // list and its author, so the roller alone reads it and sees its die; the GM who posted it does not.
    ["skill-test-selfroll-core-setting", "player", [CAPTURED_IDS.player], false, ["player"]],
  ];
  for (const [name, who, whisper, blind, readers] of cases) {
    test(`${name}, spent by the ${who}: card to ${JSON.stringify(whisper)}${blind ? " (blind)" : ""}, its die thrown once for ${readers.join(", ")}`, async () => {
      fvtt.installDiceAppearance();
      const id = await postCaptured(env.world, name);
      const userId = env[who];
      assert.equal(await flow.requestSpend({ messageId: id, pointId: LUCKY, userId }), true);
      const card = lastCard();
      assert.equal(card.flags["fate-bridge"].card_for, id);
      assert.deepEqual([...card.whisper].sort(), [...whisper].sort());
      assert.equal(card.blind, blind);
      assert.equal(env.world.diceShown.length, 0, "no showForRoll of ours: Dice So Nice throws the card's Roll");
      const expected = Object.fromEntries(["gm", "player", "stranger"].map((u) => [env[u], readers.includes(u) ? 1 : 0]));
      assert.deepEqual(env.world.animationsPerClient(card.id), expected);
      assert.deepEqual(env.world.animationsPerClient(), expected, "no other animation at all");
      for (const shown of env.world.diceAnimations) {
        assert.equal(shown.userId, userId, "in the colours of the user who asked");
        assert.deepEqual(shown.dice, [{ faces: 100, results: [23] }]);
      }
      for (const other of ["gm", "stranger"].filter((u) => !readers.includes(u))) {
        // Anyone else, the GM whose browser posted it included, gets Foundry's own "rolled
        // privately" stub: none of the card, no buttons.
        env.world.asUser(env[other]);
        const stub = env.world.render(card.id);
        assert.match(stub.textContent, /rolled privately/);
        assert.doesNotMatch(stub.innerHTML, /fate-bridge/);
      }
      // A self test's card is its roller's own message; any other is the posting GM's.
      assert.equal(card.author.id, whisper.length === 1 && whisper[0] === CAPTURED_IDS.player ? CAPTURED_IDS.player : env.gm);
    });
  }

  test("a blind test that carries Rolls is hidden from its roller: the roller is refused, the GM's Fate card and die reach the GMs only", async () => {
    fvtt.installDiceAppearance();
    const { content, whisper, blind, author, speaker } = captured("skill-test-blindroll-core-setting").reconstructedPersistedChatMessage;
    const rolls = [globalThis.Roll.fromData(rollData([{ faces: 100, results: [41] }]))];
    const id = (await env.world.createMessage({ content, whisper, blind, author, speaker, rolls })).id;
    env.world.diceAnimations.length = 0;
    assert.equal(await outcome(flow.requestSpend({ messageId: id, pointId: LUCKY, userId: env.player })), "forbidden");
    assert.deepEqual(env.world.emitted, [], "the refusal is the request's answer, not a notice to every window");
    assert.equal(await flow.requestSpend({ messageId: id, pointId: LUCKY, userId: env.gm }), true);
    const card = lastCard();
    assert.deepEqual([card.whisper, card.blind], [[CAPTURED_IDS.gm], true]);
    assert.deepEqual(env.world.animationsPerClient(card.id), { [env.gm]: 1, [env.player]: 0, [env.stranger]: 0 });
    // The roller sees the card only as Foundry's stub; nothing of ours is added to it.
    env.world.asUser(env.player);
    const stub = env.world.render(card.id);
    assert.match(stub.textContent, /rolled privately/);
    assert.doesNotMatch(stub.innerHTML, /fate-bridge/);
  });

  test("Dice So Nice's ghost dice for secret rolls (its world setting) reach non-readers as ghosts, still once each", async () => {
    uninstallFakeFoundry();
    env = await capturedWorld({ diceSoNice: true, settings: { "dice-so-nice.showGhostDice": "1" } });
    flow = createFateFlow({ foundry: fvtt, connection: bridge, build: sohlMessageBuilders(fvtt.randomId), domParser: fvtt.domParser() });
    const id = await postCaptured(env.world, "skill-test-gmroll-core-setting");
    assert.equal(await flow.requestSpend({ messageId: id, pointId: LUCKY, userId: env.player }), true);
    const card = lastCard();
    assert.deepEqual(env.world.animationsPerClient(card.id), { [env.gm]: 1, [env.player]: 1, [env.stranger]: 1 });
    assert.deepEqual(env.world.diceAnimations.map((a) => [a.viewerId, a.ghost]), [[env.gm, false], [env.player, false], [env.stranger, true]]);
  });

  test("a private-GM test's Critical Success choice reaches the GMs and the player who posted it, who may answer", async () => {
    bridge = scriptedBridge({ outcome: "choice" });
    flow = createFateFlow({ foundry: fvtt, connection: bridge, build: sohlMessageBuilders(fvtt.randomId), domParser: fvtt.domParser() });
    const { install } = await import("../scripts/main.js");
    const sohl = await import("../scripts/rulesets/sohl/index.js");
    const handle = install({ rulesets: [sohl] });
    const id = await postCaptured(env.world, "skill-test-gmroll-core-setting");
    assert.equal(await flow.requestSpend({ messageId: id, pointId: LUCKY, userId: env.player }), true);
    const choice = lastCard();
    assert.deepEqual([...choice.whisper].sort(), [CAPTURED_IDS.gm, CAPTURED_IDS.player].sort());
    assert.equal(choice.blind, false);
    env.world.asUser(env.player);
    assert.equal(env.world.render(choice.id).querySelectorAll("[data-fate-bridge-choice]").length, 2, "the player answers");
    env.world.asUser(env.stranger);
    // The choice card carries the Fate Test's Roll: another player gets Foundry's stub, no buttons.
    assert.equal(env.world.render(choice.id).querySelectorAll("[data-fate-bridge-choice]").length, 0);
    assert.match(env.world.render(choice.id).textContent, /rolled privately/);
    handle.dispose();
  });

  test("a private-GM test: another owner of the actor, not on its whisper list, reads nothing and is refused", async () => {
    env.actor.ownership[env.stranger] = 3;
    const id = await postCaptured(env.world, "skill-test-gmroll-core-setting");
    assert.equal(await outcome(flow.requestSpend({ messageId: id, pointId: LUCKY, userId: env.stranger })), "forbidden");
    assert.deepEqual(bridge.sent.map((m) => m.type), []);
  });
});

describe("the fated state follows the test across the GM's edit repost", () => {
  test("the repost is the same test: its item comes from the original, it is fated, a spend from it is refused", async () => {
    const original = await postCaptured(env.world, "skill-test-edit-original");
    assert.equal(await flow.requestSpend({ messageId: original, pointId: LUCKY, userId: env.player }), true);
    const repost = await postCaptured(env.world, "skill-test-edit-repost");
    const graded = await flow.gradeMessage(repost);
    assert.equal(graded.ok, true, "the repost names no item: taken from the original");
    assert.equal(bridge.sent.at(-1).test.item_id, CAPTURED_IDS.item);
    assert.equal(bridge.sent.at(-1).test.eml, 35, "the edit's -20 applies");
    assert.equal(flagsOf(repost).test_of, original);
    assert.deepEqual(flagsOf(repost).fated, flagsOf(original).fated);
    const spendsBefore = bridge.sent.filter((m) => m.type === "fate_spend").length;
    // The GM's repost is whispered to the GM alone: the player does not read it.
    for (const [userId, code] of [[env.player, "forbidden"], [env.gm, "already_fated"]]) {
      assert.equal(await outcome(flow.requestSpend({ messageId: repost, pointId: LUCKY, userId })), code);
    }
    assert.equal(bridge.sent.filter((m) => m.type === "fate_spend").length, spendsBefore, "no second Fate Test");
    assert.deepEqual(Object.values(env.world.animationsPerClient()), [1, 1, 1], "one Fate Test die, thrown once on each client");
  });

  test("fated from the repost: the original shows fated too and cannot be fated again", async () => {
    const original = await postCaptured(env.world, "skill-test-edit-original");
    await flow.gradeMessage(original);
    const repost = await postCaptured(env.world, "skill-test-edit-repost");
    assert.equal(await flow.requestSpend({ messageId: repost, pointId: LUCKY, userId: env.gm }), true);
    assert.equal(flagsOf(original).fated.outcome, "spent");
    assert.equal(await outcome(flow.requestSpend({ messageId: original, pointId: LUCKY, userId: env.player })), "already_fated");
    assert.equal(bridge.sent.filter((m) => m.type === "fate_spend").length, 1);
  });

  test("clicks on the test and on its repost at once: one Fate Test, the other refused already_fated", async () => {
    const original = await postCaptured(env.world, "skill-test-edit-original");
    await flow.gradeMessage(original);
    const repost = await postCaptured(env.world, "skill-test-edit-repost");
    await flow.gradeMessage(repost);
    const results = await Promise.all([
      outcome(flow.requestSpend({ messageId: original, pointId: LUCKY, userId: env.player })),
      outcome(flow.requestSpend({ messageId: repost, pointId: LUCKY, userId: env.gm })),
    ]);
    assert.deepEqual(results, ["applied", "already_fated"], "the later click is refused, the earlier one applied");
    assert.equal(bridge.sent.filter((m) => m.type === "fate_spend").length, 1);
  });

  test("the render shows no Spend Fate on any message of a fated test", async () => {
    const { install } = await import("../scripts/main.js");
    const sohl = await import("../scripts/rulesets/sohl/index.js");
    const handle = install({ rulesets: [sohl] });
    const original = await postCaptured(env.world, "skill-test-edit-original");
    const repost = await postCaptured(env.world, "skill-test-edit-repost");
    await flow.gradeMessage(original);
    await flow.gradeMessage(repost);
    env.world.asUser(env.player);
    assert.ok(env.world.render(original).querySelector(".fate-bridge-spend button"), "offered before the Fate");
    env.world.asUser(env.gm);
    await flow.requestSpend({ messageId: original, pointId: LUCKY, userId: env.gm });
    env.world.asUser(env.player);
    assert.equal(env.world.render(original).querySelector(".fate-bridge-spend"), null);
    assert.equal(env.world.render(repost), null, "the GM's repost is whispered to the GM alone");
    env.world.asUser(env.gm);
    for (const id of [original, repost]) assert.equal(env.world.render(id).querySelector(".fate-bridge-spend"), null, id);
    handle.dispose();
  });

  test("two fresh tests that rolled alike are two tests (each card names its item)", async () => {
    const first = await postCaptured(env.world, "skill-test-edit-original");
    await flow.requestSpend({ messageId: first, pointId: LUCKY, userId: env.player });
    const second = await postCaptured(env.world, "skill-test-edit-original");
    assert.equal(await flow.requestSpend({ messageId: second, pointId: LUCKY, userId: env.player }), true);
    assert.equal(flagsOf(second).test_of, second);
  });

  test("the captures agree on what ties a repost to its test", () => {
    const scope = (name) => JSON.parse(/data-scope="([^"]*)"/.exec(captured(name).reconstructedPersistedChatMessage.content)[1].replaceAll("&quot;", '"')).priorTestResult;
    for (const [a, b] of [["skill-test-edit-original", "skill-test-edit-repost"], ["fate-original-test", "fate-reposted-test"]]) {
      const [x, y] = [scope(a), scope(b)];
      assert.deepEqual([x.roll.rolls, x.title, x.testType, x.masteryLevelModifier.baseValue], [y.roll.rolls, y.title, y.testType, y.masteryLevelModifier.baseValue]);
    }
  });
});

describe("blind tests on render", () => {
  test("a blind SoHL test (no Rolls): Foundry v13 shows its roller the result, so the roller who owns the actor gets Spend Fate, as does a GM", async () => {
    const { install } = await import("../scripts/main.js");
    const sohl = await import("../scripts/rulesets/sohl/index.js");
    const handle = install({ rulesets: [sohl] });
    const id = await postCaptured(env.world, "skill-test-blindroll-core-setting");
    await flow.gradeMessage(id);
    env.world.asUser(env.player);
    assert.match(env.world.render(id).textContent, /Archery/, "the roller reads the result");
    assert.ok(env.world.render(id).querySelector(".fate-bridge-spend button"));
    env.world.asUser(env.gm);
    assert.ok(env.world.render(id).querySelector(".fate-bridge-spend button"));
    env.world.asUser(env.stranger);
    assert.equal(env.world.render(id), null, "not on the whisper list: Foundry does not show it");
    handle.dispose();
  });

  test("a blind test with Rolls: the roller gets Foundry's stub and no Spend Fate; a GM gets the button", async () => {
    const { install } = await import("../scripts/main.js");
    const sohl = await import("../scripts/rulesets/sohl/index.js");
    const handle = install({ rulesets: [sohl] });
    const { content, whisper, blind, author, speaker } = captured("skill-test-blindroll-core-setting").reconstructedPersistedChatMessage;
    const rolls = [globalThis.Roll.fromData(rollData([{ faces: 100, results: [41] }]))];
    const id = (await env.world.createMessage({ content, whisper, blind, author, speaker, rolls })).id;
    await flow.gradeMessage(id);
    env.world.asUser(env.player);
    const stub = env.world.render(id);
    assert.match(stub.textContent, /rolled privately/);
    assert.equal(stub.querySelector(".fate-bridge-spend, .fate-bridge-withheld"), null);
    env.world.asUser(env.gm);
    assert.ok(env.world.render(id).querySelector(".fate-bridge-spend button"));
    handle.dispose();
  });
});
