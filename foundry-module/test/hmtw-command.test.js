/**
 * His Majesty the Worm's `/tof` command, scores and bridge messages (scripts/rulesets/hmtw/command.js),
 * against the hmtw samples (Silán Storysoul: Swords 4, Pentacles 2, Cups 3, Wands 0).
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import {
  drawMessage, drawerOf, gmMessage, groupMessage, hmtwScores, mostAndLeast, parseTofCommand, pushMessage, scoreFor,
} from "../scripts/rulesets/hmtw/command.js";
import { hmtwSample } from "./helpers/samples.js";

const SCHEMA = JSON.parse(readFileSync(new URL("../../schemas/client-messages.schema.json", import.meta.url), "utf8"));
const request = (overrides = {}) => ({ kind: "test", attribute: "pentacles", scores: [], favor: false, disfavor: false, obstacle: null, visibility: "public", ...overrides });

describe("parseTofCommand", () => {
  test("a test of fate: attribute, favor, disfavor, the obstacle in quotes", () => {
    assert.deepEqual(parseTofCommand("pentacles favor"), { ok: true, ...request({ favor: true }) });
    assert.deepEqual(parseTofCommand('Cups 3 disfavor "the clockwork mechanism"'),
      { ok: true, ...request({ attribute: "cups", scores: [3], disfavor: true, obstacle: "the clockwork mechanism" }) });
    assert.deepEqual(parseTofCommand("wands “the sea witch's conch” favor disfavor"),
      { ok: true, ...request({ attribute: "wands", favor: true, disfavor: true, obstacle: "the sea witch's conch" }) });
  });

  test("H4: favor given twice is still one favor", () => {
    assert.deepEqual(parseTofCommand("swords favor favor"), { ok: true, ...request({ attribute: "swords", favor: true }) });
  });

  test("Challenge Actions and group tests", () => {
    assert.deepEqual(parseTofCommand("challenge swords 4"), { ok: true, ...request({ kind: "challenge", attribute: "swords", scores: [4] }) });
    assert.deepEqual(parseTofCommand('group cups 3 1 "the winter wolf"'),
      { ok: true, ...request({ kind: "group", attribute: "cups", scores: [3, 1], obstacle: "the winter wolf" }) });
  });

  test("the dialog, help and the GM's commands", () => {
    assert.deepEqual(parseTofCommand(""), { ok: true, kind: "dialog" });
    assert.deepEqual(parseTofCommand("help"), { ok: true, kind: "help" });
    assert.deepEqual(parseTofCommand("decks"), { ok: true, kind: "deck", command: "status" });
    assert.deepEqual(parseTofCommand("reshuffle"), { ok: true, kind: "deck", command: "reshuffle" });
    assert.deepEqual(parseTofCommand("round-end"), { ok: true, kind: "deck", command: "round_end" });
    assert.deepEqual(parseTofCommand("gm-draw"), { ok: true, kind: "gm_draw" });
    assert.deepEqual(parseTofCommand('clear "The locked door"'), { ok: true, kind: "clear", obstacle: "The locked door" });
  });

  test("the roll mode: typed (the wire's word or Foundry's) wins, else the default given", () => {
    assert.deepEqual(parseTofCommand("pentacles gm"), { ok: true, ...request({ visibility: "gm" }) });
    assert.deepEqual(parseTofCommand("pentacles", { visibility: "self" }), { ok: true, ...request({ visibility: "self" }) });
    assert.deepEqual(parseTofCommand("BlindRoll pentacles favor", { visibility: "gm" }), { ok: true, ...request({ favor: true, visibility: "blind" }) });
    assert.deepEqual(parseTofCommand('challenge swords 4 public', { visibility: "gm" }),
      { ok: true, ...request({ kind: "challenge", attribute: "swords", scores: [4], visibility: "public" }) });
    assert.deepEqual(parseTofCommand('group cups "the winter wolf" selfroll'),
      { ok: true, ...request({ kind: "group", attribute: "cups", obstacle: "the winter wolf", visibility: "self" }) });
    assert.equal(parseTofCommand('pentacles "gm"').obstacle, "gm", "a quoted word is the obstacle");
    assert.deepEqual(parseTofCommand("pentacles gm self"), { ok: false, error: "twice", data: { token: "self" } });
  });

  test("errors name the word that is wrong", () => {
    const cases = [
      ["favor", "no_attribute", {}],
      ["pentacles quickly", "unknown_word", { token: "quickly" }],
      ["pentacles cups", "twice", { token: "cups" }],
      ['pentacles "a" "b"', "twice", { token: "obstacle" }],
      ["pentacles 5", "score_range", { score: "5" }],
      ["pentacles 0", "score_range", { score: "0" }],
      ["pentacles 2 3", "scores", { count: "1" }],
      ["group cups 3", "scores", { count: "2" }],
      ['pentacles "the door', "unclosed_quote", {}],
      ['challenge swords "the goblin"', "challenge_obstacle", {}],
      ["clear", "no_obstacle", {}],
    ];
    for (const [args, error, data] of cases) assert.deepEqual(parseTofCommand(args), { ok: false, error, data }, args);
  });
});

describe("scores (H3)", () => {
  test("read flat from the HMtW system's adventurer", () => {
    const silan = hmtwSample("actor-character-adventurer.RECONSTRUCTED.json");
    assert.deepEqual(hmtwScores(silan.system), { swords: 4, pentacles: 2, cups: 3, wands: 0 });
    assert.deepEqual(hmtwScores(undefined), { swords: null, pentacles: null, cups: null, wands: null });
  });

  test("a typed score wins; the sheet's is used otherwise; 0 (a new character) is refused", () => {
    const scores = hmtwScores(hmtwSample("actor-character-adventurer.RECONSTRUCTED.json").system);
    assert.deepEqual(scoreFor("pentacles", undefined, scores), { ok: true, score: 2 });
    assert.deepEqual(scoreFor("pentacles", 3, scores), { ok: true, score: 3 });
    assert.deepEqual(scoreFor("wands", undefined, scores), { ok: false, error: "actor_score", data: { attribute: "wands", score: "0" } });
    const npc = hmtwScores(hmtwSample("actor-npc-defaults.RECONSTRUCTED.json").system);
    assert.equal(scoreFor("swords", undefined, npc).error, "actor_score");
  });

  test("outside the HMtW system the score must be typed", () => {
    assert.deepEqual(scoreFor("cups", undefined, null), { ok: false, error: "no_score", data: { attribute: "cups" } });
    assert.deepEqual(scoreFor("cups", 1, null), { ok: true, score: 1 });
  });
});

describe("group tests (H10)", () => {
  test("the most and the least qualified of the selected, ties in selection order", () => {
    const a = { id: "a", score: 2 }, b = { id: "b", score: 4 }, c = { id: "c", score: 1 }, d = { id: "d", score: 1 };
    assert.deepEqual(mostAndLeast([a, b, c, d]), [b, d]);
    assert.deepEqual(mostAndLeast([c, a]), [a, c]);
    assert.equal(mostAndLeast([a]), null);
  });

  test("a member's drawer is its first player owner, else the GM who asked", () => {
    const isGM = (id) => id.startsWith("gm");
    assert.equal(drawerOf(["gm1", "player2", "player3"], isGM, "gm1"), "player2");
    assert.equal(drawerOf(["gm1"], isGM, "gm9"), "gm9");
  });
});

describe("bridge messages", () => {
  const actor = { actor_id: "RECONhmtwActor01", name: "Silán Storysoul", owner_user_ids: ["p1", "gm1"] };
  const player = { userId: "p1", userName: "Player One", isGM: false };

  test("hmtw_test: the event id is the test id; no obstacle key without one", () => {
    assert.deepEqual(drawMessage({ ...request({ favor: true, obstacle: "the conch" }), score: 2 }, actor, player, "ev1"), {
      type: "hmtw_test", test_id: "ev1", v: 1, event_id: "ev1", actor, attribute: "pentacles", score: 2, favor: true,
      disfavor: false, user_id: "p1", user_name: "Player One", user_is_gm: false, obstacle: "the conch", visibility: "public",
    });
    assert.equal("obstacle" in drawMessage({ ...request(), score: 2 }, actor, player, "ev2"), false);
  });

  test("hmtw_challenge_action never carries an obstacle", () => {
    const message = drawMessage({ ...request({ kind: "challenge", attribute: "swords" }), score: 4 }, actor, player, "ev3");
    assert.equal(message.type, "hmtw_challenge_action");
    assert.equal(message.action_id, "ev3");
    assert.equal("obstacle" in message, false);
  });

  test("hmtw_group_test, hmtw_push and the GM's commands", () => {
    const gm = { userId: "gm1", userName: null, isGM: true };
    const group = groupMessage({ attribute: "cups", obstacle: null, visibility: "blind", members: [
      { actor, score: 3, userId: "p1", userName: "Player One" },
      { actor: { ...actor, actor_id: "x" }, score: 1, userId: "p2", userName: null }] }, gm, "ev4");
    assert.deepEqual(group.members.map((m) => [m.actor.actor_id, m.score, m.user_id, m.user_name]),
      [["RECONhmtwActor01", 3, "p1", "Player One"], ["x", 1, "p2", undefined]]);
    assert.deepEqual([group.type, group.test_id, group.user_id, group.user_is_gm, group.visibility], ["hmtw_group_test", "ev4", "gm1", true, "blind"]);
    assert.deepEqual(pushMessage("t1", player, "ev5"), { type: "hmtw_push", v: 1, event_id: "ev5", test_id: "t1", user_id: "p1", user_name: "Player One" });
    assert.deepEqual(gmMessage({ kind: "deck", command: "round_end" }, gm, "ev6"),
      { type: "hmtw_deck_command", v: 1, event_id: "ev6", user_id: "gm1", user_is_gm: true, command: "round_end" });
    assert.equal(gmMessage({ kind: "gm_draw" }, gm, "ev7").type, "hmtw_gm_draw");
    assert.equal(gmMessage({ kind: "clear", obstacle: "door" }, gm, "ev8").obstacle, "door");
    assert.throws(() => gmMessage({ kind: "test" }, gm, "ev9"), TypeError);
  });

  test("the roll mode goes to the bridge as visibility; every field sent is one the bridge's schema knows", () => {
    const gm = { userId: "gm1", userName: "Gamemaster", isGM: true };
    const member = { actor, score: 3, userId: "p1", userName: "Player One" };
    for (const [message, def] of [
      [drawMessage({ ...request({ obstacle: "the conch", visibility: "gm" }), score: 2 }, actor, player, "ev1"), "HmtwTest"],
      [drawMessage({ ...request({ kind: "challenge", visibility: "self" }), score: 2 }, actor, player, "ev2"), "HmtwChallengeAction"],
      [groupMessage({ attribute: "cups", obstacle: "the wolf", visibility: "blind", members: [member, member] }, gm, "ev3"), "HmtwGroupTest"],
    ]) {
      assert.ok(["gm", "self", "blind"].includes(message.visibility), def);
      const known = Object.keys(SCHEMA.$defs[def].properties);
      for (const key of Object.keys(message)) assert.ok(known.includes(key), `${def}.${key}`);
      for (const key of SCHEMA.$defs[def].required ?? []) assert.ok(key in message, `${def} needs ${key}`);
    }
  });
});
