/**
 * Physical dice in each ruleset's flow (issue 19), through the real main.js and ruleset api on the
 * fake Foundry, with a fake bridge socket: where the world allows physical dice for a ruleset
 * (the world setting the active GM's browser keeps from `dice_status`), the roller is asked for the
 * real dice before the request goes out (the dialog of foundry.js askPhysicalDice, faked as
 * DialogV2.prompt), the bridge request carries them as `physical`, and a list that runs out is
 * completed die by die, each try a new request with its own event_id. HMtW's draw is a card from
 * the bridge's deck, not a die the player throws: never asked.
 */
import { test, describe, afterEach } from "node:test";
import assert from "node:assert/strict";
import * as sohl from "../scripts/rulesets/sohl/index.js";
import * as mythic from "../scripts/rulesets/mythic/index.js";
import * as pool from "../scripts/rulesets/pool/index.js";
import * as hmtw from "../scripts/rulesets/hmtw/index.js";
import { uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { postArchery, restoreTimers } from "./helpers/world-setup.js";
import { until } from "./helpers/fake-socket.js";
import { answerTo, bootModule, doneFor, relayAs, sentTo, typeAs } from "./helpers/module-world.js";

const CARD = { title: "t", html: "<div>card</div>", ruleset: "x", speaker_actor_id: null, speaker_alias: null };
const LUCKY = "mystery00000000";
const GRADED = { level: 0, label: "MF", eligible: true, reasons: [], fate_ml: 77, points: [{ point_id: LUCKY, name: "Lucky Star", charges: 2 }] };

let env;
/** Boot main.js with `rulesets` (physical dice allowed for `physical`): test/helpers/module-world.js. */
async function boot(rulesets, physical) {
  env = await bootModule(rulesets, physical, { diceSoNice: true });
}
/** Dice So Nice's animations per client, in the order gm, player, stranger. */
const thrown = (messageId) => Object.values(env.world.animationsPerClient(messageId));
afterEach(() => {
  env?.handle.dispose();
  restoreTimers();
  uninstallFakeFoundry();
});
const sent = (type) => sentTo(env, type);
const answer = (message, reply) => answerTo(env, message, reply);
const relayFrom = (userId) => relayAs(env, userId);
const doneTo = (userId) => doneFor(env, userId);
const type = (userId, text) => typeAs(env, userId, text);
const runsOut = (message, given, faces) => ({
  type: "error", code: "bad_message", ref: message.event_id, field: "physical",
  message: `physical: ${given} physical dice given, but this roll needs more: die ${given + 1} is a d${faces} (1..${faces})`,
});

describe("SoHL: Spend Fate with a real d100", () => {
  function playerClicks() {
    Object.assign((env.world.messages.get(env.messageId).flags["fate-bridge"] ??= {}), { graded: GRADED });
    env.world.asUser(env.player);
    const button = env.world.render(env.messageId).querySelector(".fate-bridge-spend button");
    button.click();
    return button;
  }

  test("the roller throws the Fate Test's d100 first; the fate_spend carries it", async () => {
    await boot([sohl], ["sohl"]);
    env.messageId = await postArchery(env.world);
    const graded = await sent("test_rolled");
    graded.answered = true;
    env.world.physicalAnswers.push("57");
    playerClicks();
    await relayFrom(env.player);
    assert.deepEqual(env.world.prompts.map((p) => [p.user, p.content.includes("d100")]), [[env.player, true]], "asked on the player's client");
    const rolled = await sent("test_rolled");
    answer(rolled, {
      type: "test_graded", message_id: env.messageId, level: 0, label: "MF", success: false, critical: false,
      fate: { eligible: true, reasons: [], fate_ml: 77, points: [LUCKY] }, mismatch: null,
    });
    const spend = await sent("fate_spend");
    assert.deepEqual([spend.user_id, spend.point_id, spend.physical], [env.player, LUCKY, [57]]);
    answer(spend, { type: "error", code: "no_charges", message: "none left", ref: spend.event_id, field: null });
    await doneTo(env.player);
  });

  test("a closed dialog sends nothing and the button works again; a world without SoHL physical dice asks nothing", async () => {
    await boot([sohl], ["sohl"]);
    env.messageId = await postArchery(env.world);
    (await sent("test_rolled")).answered = true;
    const button = playerClicks();
    await until(() => env.world.notices.some((n) => n.userId === env.player && n.text.includes("Nothing was sent (physical dice)")), "the notice");
    assert.equal(env.world.emitted.filter((e) => e.payload.type === "request").length, 0);
    assert.equal(button.disabled, false);
    env.handle.dispose();
    uninstallFakeFoundry();

    await boot([sohl], ["mythic"]);
    env.messageId = await postArchery(env.world);
    (await sent("test_rolled")).answered = true;
    playerClicks();
    assert.equal(env.world.emitted.filter((e) => e.payload.type === "request").length, 1, "relayed at once");
    assert.equal(env.world.emitted[0].payload.data.physical, undefined);
    assert.deepEqual(env.world.prompts, []);
  });
});

describe("Mythic: the Fate Chart's d100", () => {
  test("a question goes out with the asker's real d100", async () => {
    await boot([mythic], ["mythic"]);
    env.world.physicalAnswers.push("88");
    type(env.player, "/fatechart high vs average");
    await relayFrom(env.player);
    const question = await sent("chart_question");
    assert.deepEqual(question.physical, [88]);
    answer(question, { type: "chart_answered", answer: "no", chance: 55, roll: 88, visibility: "public", card: { ...CARD, ruleset: "mythic" },
      rolls: [{ faces: 100, value: 88, source: "physical" }] });
    await doneTo(env.player);
    // The thrown die rides on the card: Dice So Nice shows it once on every client, as the asker.
    const card = await until(() => [...env.world.messages.values()].find((m) => m.content === CARD.html), "the card");
    assert.deepEqual(thrown(card.id), [1, 1, 1]);
    assert.deepEqual(thrown(), [1, 1, 1], "nothing else thrown");
    assert.deepEqual(env.world.diceAnimations.map((a) => [a.userId, a.dice]), Array(3).fill([env.player, [{ faces: 100, results: [88] }]]));
  });

  test("an impossible value is refused in the browser, naming the die and its range; nothing is sent", async () => {
    await boot([mythic], ["mythic"]);
    env.world.physicalAnswers.push("101");
    type(env.player, "/fatechart high vs average");
    const notice = await until(() => env.world.notices.find((n) => n.userId === env.player && n.text.includes("Nothing was sent")), "the notice");
    assert.match(notice.text, /physical\[0\]: 101 is not a possible d100 roll \(allowed 1\.\.100\)/);
    assert.equal(env.world.emitted.filter((e) => e.payload.type === "request").length, 0);
  });
});

describe("pool: the pool's d6s, a save's d20s, a reroll's d20", () => {
  const LILLY = "actorLilly000001";
  const LEDGER = { type: "pool_ledger", session_open: true, characters: [{ character_id: LILLY, name: "Lilly", kind: "pc", owner_user_ids: ["playerUser00001"], level: 3, tier: 2, stamina: 4, session_fate: 3, earned_fate: 1, destiny: 2, fate: 4 }] };

  test("a check asks the foreseen d6s, then each die the bridge names (an explosion), under a new event_id each try", async () => {
    await boot([pool], ["pool"]);
    env.world.physicalAnswers.push("3 6 2", "4");
    type(env.player, "/pool 1 tier 2 task 2");
    await relayFrom(env.player);
    assert.match(env.world.prompts[0].content, /d6, d6, d6/, "stat modifier 1 + Tier 2: three d6s foreseen");
    answer(await sent("pool_ledger_query"), LEDGER);
    const first = await sent("pool_check");
    assert.deepEqual(first.physical, [3, 6, 2]);
    env.socket.receive({ v: 1, ...runsOut(first, 3, 6) });
    first.answered = true;
    await doneTo(env.player);
    // The player's client asks for the die the bridge named and relays again.
    await until(() => env.world.prompts.length === 2, "the next die asked");
    assert.match(env.world.prompts[1].content, /Throw d6 and/);
    env.world.emitted.length = 0;
    await relayFrom(env.player);
    answer(await sent("pool_ledger_query"), LEDGER);
    const second = await sent("pool_check");
    assert.deepEqual(second.physical, [3, 6, 2, 4]);
    assert.notEqual(second.event_id, first.event_id, "a refused event_id is answered from its stored refusal: the resend is a new request");
    answer(second, { type: "pool_check_rolled", card: { ...CARD, ruleset: "pool" }, dice: [3, 6, 2, 4].map((face, i) => ({ face, explosion: i === 3, success: face >= 5 })),
      rolls: [3, 6, 2, 4].map((value) => ({ faces: 6, value, source: "physical" })) });
    await doneTo(env.player);
    const card = await until(() => [...env.world.messages.values()].find((m) => m.content.includes("card")), "the card posted");
    // The four d6s thrown, once on every client (a public check), as the player; the refused try threw none.
    assert.deepEqual(thrown(card.id), [1, 1, 1]);
    assert.deepEqual(thrown(), [1, 1, 1]);
    assert.deepEqual(env.world.diceAnimations[0].dice, [{ faces: 6, results: [3, 6, 2, 4] }]);
  });

  test("a save at advantage asks two d20s; its stat die comes when the bridge names it", async () => {
    await boot([pool], ["pool"]);
    env.world.physicalAnswers.push("12 17", "5");
    type(env.player, "/pool save body 12 fate 10 dc 15 adv");
    await relayFrom(env.player);
    assert.match(env.world.prompts[0].content, /d20, d20/);
    answer(await sent("pool_ledger_query"), LEDGER);
    const first = await sent("pool_save");
    assert.deepEqual(first.physical, [12, 17]);
    env.socket.receive({ v: 1, ...runsOut(first, 2, 8) });
    first.answered = true;
    await doneTo(env.player);
    await until(() => env.world.prompts.length === 2, "the stat die asked");
    assert.match(env.world.prompts[1].content, /Throw d8 and/);
  });
});

describe("HMtW: a draw is not a die the player throws", () => {
  test("/tof never asks for physical dice, even where the world lists hmtw", async () => {
    await boot([hmtw], ["hmtw"]);
    globalThis.game.system = { id: "hmtw-foundry", version: "0.1.0" };
    const silan = env.world.addActor({ id: "RECONhmtwActor01", name: "Silán", hasPlayerOwner: true, ownership: { [env.player]: 3 } });
    silan.system = { swords: 4, pentacles: 2, cups: 3, wands: 0 };
    env.world.asUser(env.player);
    env.world.controlToken(silan);
    type(env.player, "/tof pentacles");
    await relayFrom(env.player);
    const drawn = await sent("hmtw_test");
    assert.equal(drawn.physical, undefined);
    assert.deepEqual(env.world.prompts, []);
    answer(drawn, { type: "error", code: "not_found", message: "test over", ref: drawn.event_id, field: null });
    await doneTo(env.player);
    await until(() => env.world.notices.some((n) => n.text.includes("test over")), "the refusal told");
  });
});
