import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";

import { CHART_COMMAND, chartMessage, parseChartCommand } from "../scripts/rulesets/mythic/chart.js";
import { BridgeError } from "../scripts/logic/errors.js";

const EN = JSON.parse(readFileSync(new URL("../lang/en.json", import.meta.url), "utf8"));
const SCHEMA = JSON.parse(readFileSync(new URL("../../schemas/client-messages.schema.json", import.meta.url), "utf8"));

const question = (fields) => ({ ok: true, kind: "ask", request: {
  kind: "question", acting_shift: 0, difficulty_shift: 0, named: null, modifiers: [], question: null, visibility: "public", ...fields,
} });

describe("/fatechart parser: good input", () => {
  const cases = [
    ["high vs average +1dr", question({ acting_rank: "high", difficulty_rank: "average", difficulty_shift: 1 })],
    ["High vs Average", question({ acting_rank: "High", difficulty_rank: "Average" })],
    ["below average vs superhuman 3+ -2ar +1RS to DR", question({ acting_rank: "below average", difficulty_rank: "superhuman 3+", acting_shift: -2, difficulty_shift: 1 })],
    ["s2+ versus m2+ +1 ar +1ar", question({ acting_rank: "s2+", difficulty_rank: "m2+", acting_shift: 2 })],
    ["avg vs. avg -1rsdr", question({ acting_rank: "avg", difficulty_rank: "avg", difficulty_shift: -1 })],
    ['high vs avg "Is the door locked?" gm', question({ acting_rank: "high", difficulty_rank: "avg", question: "Is the door locked?", visibility: "gm" })],
    ["“Does it rain?” blindroll low vs high", question({ acting_rank: "low", difficulty_rank: "high", question: "Does it rain?", visibility: "blind" })],
    ["hit: exc vs avg +1ar self", question({ named: "hit", acting_rank: "exc", difficulty_rank: "avg", acting_shift: 1, visibility: "self" })],
    ["Act_Next: aav vs avg", question({ named: "act_next", acting_rank: "aav", difficulty_rank: "avg" })],
    ["-26ar high vs avg +26dr", question({ acting_rank: "high", difficulty_rank: "avg", acting_shift: -26, difficulty_shift: 26 })],
  ];
  for (const [args, expected] of cases) {
    test(JSON.stringify(args), () => assert.deepEqual(parseChartCommand(args), expected));
  }

  test("odds questions, the dialog, help and the GM's settings", () => {
    assert.deepEqual(parseChartCommand('odds somewhat likely "Does the bandit flee?" gm'),
      { ok: true, kind: "ask", request: { kind: "odds", odds: "somewhat likely", question: "Does the bandit flee?", visibility: "gm" } });
    assert.deepEqual(parseChartCommand("odds 50/50"), { ok: true, kind: "ask", request: { kind: "odds", odds: "50/50", question: null, visibility: "public" } });
    assert.deepEqual(parseChartCommand(""), { ok: true, kind: "dialog" });
    assert.deepEqual(parseChartCommand("   "), { ok: true, kind: "dialog" });
    assert.deepEqual(parseChartCommand("HELP"), { ok: true, kind: "help" });
    assert.deepEqual(parseChartCommand("odds on"), { ok: true, kind: "settings", request: { kind: "settings", odds_questions: true } });
    assert.deepEqual(parseChartCommand("odds OFF"), { ok: true, kind: "settings", request: { kind: "settings", odds_questions: false } });
    assert.deepEqual(parseChartCommand("chaos 6"), { ok: true, kind: "settings", request: { kind: "settings", chaos_factor: 6 } });
  });
});

describe("/fatechart parser: bad input, with the error the user is shown", () => {
  const cases = [
    ["high average", "no_vs", {}],
    ["high vs average vs low", "no_vs", {}],
    ["vs average", "no_rank", {}],
    ["high vs +1dr", "no_rank", {}],
    ["high vs average +1", "bad_shift", { token: "+1" }],
    ["high vs average +1xr", "bad_shift", { token: "+1xr" }],
    ["high vs average +27dr", "shift_range", { shift: 27 }],
    ["high vs average +20dr +7dr", "shift_range", { shift: 27 }],
    ['high vs average "Is it?', "unclosed_quote", {}],
    ["high vs average gm blind", "two_modes", {}],
    ["hit!: high vs average", "bad_named", { named: "hit!" }],
    ["odds", "no_odds", {}],
    ["odds gm", "no_odds", {}],
    ["chaos 0", "bad_chaos", { value: "0" }],
    ["chaos 10", "bad_chaos", { value: "10" }],
    ["chaos lots", "bad_chaos", { value: "lots" }],
  ];
  for (const [args, error, data] of cases) {
    test(`${JSON.stringify(args)} -> ${error}`, () => {
      assert.deepEqual(parseChartCommand(args), { ok: false, error, data });
      const shown = EN[`FATE_BRIDGE.Mythic.Error.${error}`];
      assert.ok(shown?.startsWith("Fate Chart: "), `lang/en.json has FATE_BRIDGE.Mythic.Error.${error}`);
      for (const name of Object.keys(data)) assert.ok(shown.includes(`{${name}}`), `${error} shows {${name}}`);
    });
  }
});

describe("bridge messages built on the GM's client", () => {
  const who = { eventId: "ev1", userId: "player1", userName: "Player One", isGM: false };

  test("a question by ranks carries only its own fields and the relay's sender", () => {
    const { request } = parseChartCommand('hit: exc vs avg +1ar "Does Brakka hit?" gm');
    const message = chartMessage({ ...request, user_id: "someoneElse", user_is_gm: true }, who);
    assert.deepEqual(message, {
      type: "chart_question", v: 1, event_id: "ev1", acting_rank: "exc", difficulty_rank: "avg", acting_shift: 1,
      difficulty_shift: 0, named: "hit", modifiers: [], question: "Does Brakka hit?", visibility: "gm",
      user_id: "player1", user_name: "Player One",
    });
  });

  test("modifiers, odds and settings", () => {
    const named = chartMessage({ kind: "question", acting_rank: "avg", difficulty_rank: "weak", named: "increase_ability",
      modifiers: [{ key: "extra_items", times: 2 }, { key: "very_complex" }], visibility: "self" }, who);
    assert.deepEqual(named.modifiers, [{ key: "extra_items", times: 2 }, { key: "very_complex", times: 1 }]);
    assert.deepEqual(chartMessage({ kind: "odds", odds: "likely", question: "" }, who), {
      type: "chart_odds_question", v: 1, event_id: "ev1", odds: "likely", visibility: "public", user_id: "player1", user_name: "Player One",
    });
    assert.deepEqual(chartMessage({ kind: "settings", chaos_factor: 4, user_is_gm: true }, who), {
      type: "chart_settings", v: 1, event_id: "ev1", user_id: "player1", user_is_gm: false, chaos_factor: 4,
    });
    assert.equal(chartMessage({ kind: "settings", odds_questions: true }, { ...who, isGM: true }).user_is_gm, true);
  });

  test("every field sent is one the bridge's schema knows", () => {
    const defs = SCHEMA.$defs;
    const { request } = parseChartCommand('hit: exc vs avg +1ar +1dr "Q?" gm');
    for (const [message, def] of [
      [chartMessage({ ...request, modifiers: [{ key: "got_the_drop", times: 1 }] }, { ...who, actorId: "a1", actorName: "Brakka" }), "ChartQuestion"],
      [chartMessage({ kind: "odds", odds: "likely", question: "Q?" }, who), "ChartOddsQuestion"],
      [chartMessage({ kind: "settings", odds_questions: true, chaos_factor: 3 }, who), "ChartSettings"],
    ]) {
      const known = Object.keys(defs[def].properties);
      for (const key of Object.keys(message)) assert.ok(known.includes(key), `${def}.${key}`);
      for (const key of defs[def].required ?? []) assert.ok(key in message, `${def} needs ${key}`);
    }
    assert.ok(defs.ChartQuestion.properties.named.anyOf[0].enum.includes("hit"));
  });

  test("a request of no known kind is refused as bad_message", () => {
    assert.throws(() => chartMessage({ kind: "fate_spend" }, who), (error) => error instanceof BridgeError && error.code === "bad_message" && error.field === "kind");
    assert.throws(() => chartMessage(null, who), BridgeError);
  });
});

describe("the default roll mode", () => {
  test("a question without a mode word takes the asker's; a typed one wins", () => {
    assert.equal(parseChartCommand("high vs avg", { visibility: "blind" }).request.visibility, "blind");
    assert.equal(parseChartCommand("odds likely", { visibility: "self" }).request.visibility, "self");
    assert.equal(parseChartCommand("high vs avg gmroll", { visibility: "blind" }).request.visibility, "gm");
    assert.equal(parseChartCommand("high vs avg PUBLIC", { visibility: "self" }).request.visibility, "public");
    assert.equal(parseChartCommand("high vs avg").request.visibility, "public", "public when no default is given");
  });
});

test("the command's name", () => assert.equal(CHART_COMMAND, "fatechart"));
