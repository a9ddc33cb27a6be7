/**
 * Issue 24: every die the bridge rolls is animated exactly once, for the result's audience, in
 * every ruleset. Dice So Nice animates every new ChatMessage that carries Rolls, on every client
 * whose user reads it (its module/main.js `createChatMessage` -> `shouldInterceptMessage`, 5.1.6;
 * faked faithfully in helpers/fake-foundry.js fakeDiceSoNice): the module puts the bridge's dice on
 * the card as Rolls and calls no `showForRoll` of its own. Also: a relayed answer whose card is not
 * public carries nothing of the result, since the module socket reaches every client.
 * The real main.js and rulesets on the fake Foundry, a bridge socket answered by hand; the clients
 * are the GM (who posts every card), the player who asks and another player.
 */
import { test, describe, afterEach } from "node:test";
import assert from "node:assert/strict";
import * as mythic from "../scripts/rulesets/mythic/index.js";
import * as pool from "../scripts/rulesets/pool/index.js";
import * as hmtw from "../scripts/rulesets/hmtw/index.js";
import { installFakeFoundry, uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { restoreTimers } from "./helpers/world-setup.js";
import { until } from "./helpers/fake-socket.js";
import { answerTo, bootModule, doneFor, relayAs, sentTo, typeAs } from "./helpers/module-world.js";

const CARD = { title: "t", html: "<div>the answer</div>", ruleset: "x", speaker_actor_id: null, speaker_alias: null };

let env;
afterEach(() => {
  env?.handle.dispose();
  restoreTimers();
  uninstallFakeFoundry();
});

/** Dice So Nice's animations of the card with `html`, per client: {gm, player, stranger}. */
async function thrownFor(html) {
  const card = await until(() => [...env.world.messages.values()].find((m) => m.content === html), "the card");
  const counts = env.world.animationsPerClient(card.id);
  assert.deepEqual(env.world.animationsPerClient(), counts, "no animation of anything else");
  assert.deepEqual(env.world.diceShown, [], "no showForRoll of the module's own");
  return { card, counts: { gm: counts[env.gm], player: counts[env.player], stranger: counts[env.stranger] } };
}

/** The `done` of the relay as every client receives it (Foundry's module socket reaches them all). */
const donePayload = (delivered) => delivered.find((p) => p.type === "done");

describe("Mythic: the Fate Chart's d100", () => {
  const ask = async (mode, visibility) => {
    env = await bootModule([mythic], [], { diceSoNice: true });
    typeAs(env, env.player, `/fatechart high vs average ${mode}`);
    await relayAs(env, env.player);
    const question = await sentTo(env, "chart_question");
    assert.equal(question.visibility, visibility);
    answerTo(env, question, { type: "chart_answered", answer: "yes", chance: 55, roll: 37, visibility, card: { ...CARD, ruleset: "mythic" },
      rolls: [{ faces: 100, value: 37, source: "fair" }] });
    return donePayload(await doneFor(env, env.player));
  };

  test("public: thrown once on every client, as the asker; the answer comes back whole", async () => {
    const done = await ask("public", "public");
    const { counts } = await thrownFor(CARD.html);
    assert.deepEqual(counts, { gm: 1, player: 1, stranger: 1 });
    assert.deepEqual(env.world.diceAnimations.map((a) => [a.userId, a.dice]), Array(3).fill([env.player, [{ faces: 100, results: [37] }]]));
    assert.deepEqual(done.result, { answer: "yes", chance: 55, roll: 37 });
  });

  test("private GM: once for the GM and the asker, never for another player; the relay's done carries nothing of the answer", async () => {
    const done = await ask("gm", "gm");
    const { card, counts } = await thrownFor(CARD.html);
    assert.deepEqual(counts, { gm: 1, player: 1, stranger: 0 });
    assert.deepEqual(done.result, { visibility: "gm" });
    env.world.asUser(env.stranger);
    const stub = env.world.render(card.id);
    assert.match(stub.textContent, /rolled privately/, "another player sees Foundry's stub");
    assert.doesNotMatch(stub.innerHTML, /the answer/);
  });

  test("blind: the GM whose browser posts the card sees the d100; the asker and the others do not", async () => {
    const done = await ask("blind", "blind");
    const { counts } = await thrownFor(CARD.html);
    assert.deepEqual(counts, { gm: 1, player: 0, stranger: 0 });
    assert.deepEqual(done.result, { visibility: "blind" });
  });

  test("a reply without rolls (an older bridge): the chart's d100 rides on the card all the same, once", async () => {
    env = await bootModule([mythic], [], { diceSoNice: true });
    typeAs(env, env.player, "/fatechart high vs average self");
    await relayAs(env, env.player);
    answerTo(env, await sentTo(env, "chart_question"), { type: "chart_answered", answer: "no", chance: 55, roll: 91, visibility: "self", card: { ...CARD, ruleset: "mythic" } });
    const { card, counts } = await thrownFor(CARD.html);
    // self: the asker alone. The GM's browser posts the card as the asker (its author), so Foundry
    // shows the GM only its "rolled privately" line and Dice So Nice throws nothing there.
    assert.deepEqual(counts, { gm: 0, player: 1, stranger: 0 });
    assert.deepEqual(env.world.diceAnimations[0].dice, [{ faces: 100, results: [91] }]);
    assert.equal(card.author.id, env.player);
    env.world.asUser(env.gm);
    assert.match(env.world.render(card.id).textContent, /rolled privately/);
    assert.doesNotMatch(env.world.render(card.id).innerHTML, /the answer/);
  });
});

describe("pool: a check's d6s", () => {
  const LILLY = "actorLilly000001";
  const LEDGER = { type: "pool_ledger", session_open: true, characters: [{ character_id: LILLY, name: "Lilly", kind: "pc", owner_user_ids: ["playerUser00001"], level: 3, tier: 2, stamina: 4, session_fate: 3, earned_fate: 1, destiny: 2, fate: 4 }] };

  test("a private-GM check: its three d6s thrown once for the GM and the player, as the player", async () => {
    env = await bootModule([pool], [], { diceSoNice: true });
    typeAs(env, env.player, "/pool 1 tier 2 task 2 gm");
    await relayAs(env, env.player);
    answerTo(env, await sentTo(env, "pool_ledger_query"), LEDGER);
    const check = await sentTo(env, "pool_check");
    answerTo(env, check, { type: "pool_check_rolled", card: { ...CARD, ruleset: "pool" }, dice: [5, 1, 6].map((face) => ({ face, explosion: false, success: face >= 5 })),
      rolls: [5, 1, 6].map((value) => ({ faces: 6, value, source: "fair" })) });
    await doneFor(env, env.player);
    const { counts } = await thrownFor(CARD.html);
    assert.deepEqual(counts, { gm: 1, player: 1, stranger: 0 });
    assert.deepEqual(env.world.diceAnimations.map((a) => [a.userId, a.dice]), Array(2).fill([env.player, [{ faces: 6, results: [5, 1, 6] }]]));
  });
});

describe("HMtW: a test of fate's draw", () => {
  const SILAN = "RECONhmtwActor01";
  test("the draw's die thrown once on every client, as the drawer; a GM-only test's answer does not ride on the relay", async () => {
    env = await bootModule([hmtw], [], { diceSoNice: true });
    globalThis.game.system = { id: "hmtw-foundry", version: "0.1.0" };
    const silan = env.world.addActor({ id: SILAN, name: "Silán Storysoul", hasPlayerOwner: true, ownership: { [env.player]: 3 } });
    silan.system = { swords: 4, pentacles: 2, cups: 3, wands: 0 };
    env.world.asUser(env.player);
    env.world.controlToken(silan);
    const face = { code: "pentacles-4", name: "IV of Pentacles", suit: "pentacles", value: 4, symbol: "*" };
    const reply = (asked, html) => ({
      type: "hmtw_tested",
      test: { test_id: asked.test_id, actor_id: SILAN, actor_name: "Silán Storysoul", user_id: env.player, attribute: "pentacles", score: 2,
        modifier: 0, first: face, pushed: null, total: 6, outcome: "failure", push_by: [] },
      obstacle: null, bound: false, decks: { player_undrawn: 56, player_discarded: 1, player_on_table: 0, gm_undrawn: 21, gm_discarded: 0 }, reshuffles: [], notice: null,
      card: { ...CARD, html, ruleset: "hmtw", speaker_actor_id: SILAN },
      rolls: [{ faces: 57, value: 23, source: "fair" }],
    });

    typeAs(env, env.player, "/tof pentacles");
    await relayAs(env, env.player);
    const asked = await sentTo(env, "hmtw_test");
    answerTo(env, asked, reply(asked, "<div>public test</div>"));
    const publicDone = donePayload(await doneFor(env, env.player));
    assert.deepEqual((await thrownFor("<div>public test</div>")).counts, { gm: 1, player: 1, stranger: 1 });
    assert.deepEqual(env.world.diceAnimations.map((a) => [a.userId, a.dice]), Array(3).fill([env.player, [{ faces: 57, results: [23] }]]));
    assert.deepEqual(publicDone.result, { outcome: "failure", total: 6 });

    env.world.emitted.length = 0;
    env.world.diceAnimations.length = 0;
    typeAs(env, env.player, "/tof pentacles gm");
    await relayAs(env, env.player);
    const secret = await sentTo(env, "hmtw_test");
    assert.equal(secret.visibility, "gm");
    answerTo(env, secret, reply(secret, "<div>gm test</div>"));
    const gmDone = donePayload(await doneFor(env, env.player));
    assert.deepEqual((await thrownFor("<div>gm test</div>")).counts, { gm: 1, player: 1, stranger: 0 });
    assert.deepEqual(gmDone.result, { visibility: "gm" });
  });
});

describe("the fake Dice So Nice (helpers/fake-foundry.js), against Dice So Nice 5.1.6's module/main.js", () => {
  test("a created message with dice is thrown once per reader; an update throws only the Rolls it adds; a direct showForRoll reaches its users", async () => {
    env = null;
    const world = installFakeFoundry({ diceSoNice: true });
    for (const [id, isGM] of [["gmA", true], ["playerA", false], ["playerB", false]]) world.addUser({ id, name: id, isGM });
    world.asUser("gmA");
    const roll = (result) => globalThis.Roll.fromData({ class: "Roll", terms: [{ class: "Die", faces: 20, results: [{ result, active: true }] }], total: result });
    const message = await world.createMessage({ content: "<p>x</p>", whisper: ["gmA", "playerA"], rolls: [roll(4)] });
    assert.deepEqual(world.animationsPerClient(), { gmA: 1, playerA: 1, playerB: 0 });
    await message.update({ content: "<p>y</p>", flags: { "fate-bridge": { override: "e1" } } });
    assert.deepEqual(world.animationsPerClient(), { gmA: 1, playerA: 1, playerB: 0 }, "content and flags: nothing thrown");
    await message.update({ rolls: [...message.rolls, roll(17)] });
    assert.deepEqual(world.animationsPerClient(), { gmA: 2, playerA: 2, playerB: 0 });
    assert.deepEqual(world.diceAnimations.at(-1).dice, [{ faces: 20, results: [17] }], "only the added Roll");
    await world.createMessage({ content: "<p>no dice</p>" });
    assert.equal(world.diceAnimations.length, 4);
    // showForRoll(roll, user, synchronize, users, blind): blind skips this client; the others listed get it.
    await globalThis.game.dice3d.showForRoll(roll(9), world.users.get("playerA"), true, ["playerB"], true);
    assert.deepEqual(world.animationsPerClient(), { gmA: 2, playerA: 2, playerB: 1 });
    uninstallFakeFoundry();
  });
});
