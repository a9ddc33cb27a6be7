/**
 * The Fate Chart ruleset (scripts/rulesets/mythic/index.js) and its dialog (rulesets/mythic/dialog.js), on
 * the smallest fake of the ruleset api: the relay runs the GM-side handler with a fixed sender, the
 * bridge is a function of the message, cards and notices are recorded.
 */
import { test, describe, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { JSDOM } from "jsdom";

import * as mythic from "../scripts/rulesets/mythic/index.js";
import { RULESETS } from "../scripts/rulesets/index.js";
import { BridgeError } from "../scripts/logic/errors.js";
import { chartRequestOf, emptyChartForm, readChartForm, renderChartDialog } from "../scripts/rulesets/mythic/dialog.js";
import { FakeApplicationV2 } from "./helpers/fake-foundry.js";

const EN = JSON.parse(readFileSync(new URL("../lang/en.json", import.meta.url), "utf8"));
const t = (key, data = {}) => (EN[key] ?? key).replace(/\{(\w+)\}/g, (_, name) => String(data[name] ?? `{${name}}`));
const HOSTILE = '<img src=x onerror="globalThis.pwned=1">';

/** A catalog shaped as the bridge's `chart_catalog` (two of its named questions). */
const CATALOG = {
  type: "chart_catalog", v: 1, event_id: "c",
  ranks: ["Miniscule 2+", "Miniscule", "Weak", "Low", "Below Average", "Average", "Above Average", "High", "Exceptional",
    "Incredible", "Awesome", "Superhuman", "Superhuman 2+"],
  odds: ["Impossible", "No way", "Very unlikely", "Unlikely", "50/50", "Somewhat likely", "Likely", "Very likely",
    "Near sure thing", "A sure thing", "Has to be"],
  questions: [
    { key: "hit", question: "Does the character hit?", acting_guidance: "The attacker's combat ability.",
      difficulty_guidance: HOSTILE, note: "Asked once the character has the action.", acting_base_shift: 0,
      modifiers: [{ key: "got_the_drop", label: "Got the drop", target: "acting", shift: 1, max_times: 1 }],
      outcomes: { exceptional_yes: "a", yes: "b", no: "c", exceptional_no: "d" } },
    { key: "increase_ability", question: "Does the ability increase by 1RS (or is a new one gained)?",
      acting_guidance: "The most closely related attribute.", difficulty_guidance: "The rank the ability would reach.",
      note: "", acting_base_shift: -1,
      modifiers: [{ key: "extra_items", label: "Each further item", target: "difficulty", shift: 1, max_times: 10 },
        { key: "very_complex", label: "Very complex", target: "difficulty", shift: 2, max_times: 1 }],
      outcomes: { exceptional_yes: "a", yes: "b", no: "c", exceptional_no: "d" } },
  ],
  odds_questions: true,
  chaos_factor: 6,
};

let dom;
beforeEach(() => {
  dom = new JSDOM("<!doctype html><body></body>");
  globalThis.document = dom.window.document;
});
afterEach(() => {
  delete globalThis.document;
});

/** The fake api; `bridge(message)` answers each bridge request (a throw is a refusal). */
function fakeApi({ sender = { userId: "player1", isGM: false }, bridge, rollMode = "public" } = {}) {
  const rec = { notices: [], requests: [], posted: [], commands: new Map(), handlers: new Map() };
  let n = 0;
  const api = {
    fvtt: {
      userName: (userId) => ({ player1: "Player One", gm1: "Gamemaster" })[userId] ?? null,
      currentUserId: () => "gm1",
      gmUserIds: () => ["gm1"],
      rollMode: () => rollMode,
      applicationV2Base: () => FakeApplicationV2,
      htmlDocument: () => dom.window.document,
    },
    registerCommand: (name, handler) => rec.commands.set(name, handler),
    async request(message) {
      rec.requests.push(message);
      return bridge(message);
    },
    async relay(ruleset, action, data) {
      assert.equal(ruleset, "mythic");
      return rec.handlers.get(action)(structuredClone(data), sender);
    },
    onRelay: (action, handler) => rec.handlers.set(action, handler),
    async postCard(card, options) {
      rec.posted.push({ card, options });
    },
    newEventId: () => `ev${++n}`,
    physicalDice: () => null, // the world allows no physical dice (test/physical-dice.test.js: when it does)
    localize: t,
    notify: (level, key, data) => rec.notices.push({ level, key, text: t(key, data) }),
  };
  return { api, rec };
}

/** The postCard options every answer of `answering` adds: its d100 and who asked (their dice colours). */
const D37 = { dice: [{ faces: 100, results: [37] }], diceUserId: "player1" };

/** A bridge answering every question yes with a card, catalogs with CATALOG. */
function answering(message) {
  if (message.type === "chart_catalog_query") return { ...CATALOG, event_id: message.event_id };
  if (message.type === "chart_settings") return { type: "chart_settings_applied", v: 1, event_id: message.event_id, odds_questions: true, chaos_factor: message.chaos_factor ?? 5 };
  return {
    type: "chart_answered", v: 1, event_id: message.event_id, answer: "yes", chance: 55, roll: 37,
    visibility: message.visibility ?? "public", card: { title: "Q", html: "<div>card</div>", ruleset: "mythic", speaker_actor_id: null, speaker_alias: null },
  };
}

describe("install", () => {
  test("is listed in the ruleset registry and registers /fatechart and its relay actions", () => {
    assert.ok(RULESETS.includes(mythic));
    assert.equal(mythic.id, "mythic");
    const { api, rec } = fakeApi({ bridge: answering });
    mythic.install(api);
    assert.deepEqual([...rec.commands.keys()], ["fatechart"]);
    assert.deepEqual([...rec.handlers.keys()].sort(), ["ask", "catalog", "settings"]);
  });
});

describe("/fatechart", () => {
  test("asks the bridge as the relay's sender and posts the card per the roll mode", async () => {
    const { api, rec } = fakeApi({ bridge: answering });
    mythic.install(api);
    const result = rec.commands.get("fatechart")('high vs average +1dr "Is the door locked?" gm', { userId: "player1", isGM: false });
    assert.equal(typeof result.then, "function"); // a Promise keeps the text out of chat
    // A GM-only answer: the relay's `done` reaches every browser, so it carries nothing of it.
    assert.deepEqual(await result, { visibility: "gm" });
    assert.deepEqual(rec.requests, [{
      type: "chart_question", v: 1, event_id: "ev1", acting_rank: "high", difficulty_rank: "average", acting_shift: 0,
      difficulty_shift: 1, modifiers: [], question: "Is the door locked?", visibility: "gm", user_id: "player1", user_name: "Player One",
    }]);
    // the Fate Chart's d100 (the bridge's 37) rides on the card, thrown by Dice So Nice as the asker (issue 24)
    assert.deepEqual(rec.posted, [{ card: answering(rec.requests[0]).card, options: { whisper: ["gm1", "player1"], blind: false, ...D37 } }]);
    assert.deepEqual(rec.notices, []);
  });

  test("without a mode word the asker's roll mode is asked; the card goes to every GM and the asker; a typed mode wins", async () => {
    const { api, rec } = fakeApi({ bridge: answering, rollMode: "gm" });
    api.fvtt.gmUserIds = () => ["gm1", "gm2"];
    mythic.install(api);
    await rec.commands.get("fatechart")("high vs average", { userId: "player1", isGM: false });
    assert.equal(rec.requests.at(-1).visibility, "gm");
    assert.deepEqual(rec.posted.at(-1).options, { whisper: ["gm1", "gm2", "player1"], blind: false, ...D37 });
    await rec.commands.get("fatechart")("odds likely blindroll", { userId: "player1", isGM: false });
    assert.equal(rec.requests.at(-1).visibility, "blind");
    assert.deepEqual(rec.posted.at(-1).options, { whisper: ["gm1", "gm2"], blind: true, ...D37 });
    const answer = await rec.commands.get("fatechart")("high vs average public", { userId: "player1", isGM: false });
    assert.deepEqual(rec.posted.at(-1).options, { whisper: [], blind: false, ...D37 });
    assert.deepEqual(answer, { answer: "yes", chance: 55, roll: 37 }, "a public answer comes back whole");
  });

  test("bad input is shown to the user and nothing is asked", () => {
    const { api, rec } = fakeApi({ bridge: answering });
    mythic.install(api);
    assert.equal(rec.commands.get("fatechart")("high average", {}), false);
    assert.equal(rec.commands.get("fatechart")("high vs avg +1", {}), false);
    assert.deepEqual(rec.notices.map((n) => [n.level, n.text]), [
      ["warn", "Fate Chart: write the ranks as ACTING vs DIFFICULTY, e.g. /fatechart high vs average +1dr (/fatechart help)."],
      ["warn", "Fate Chart: +1 is not a rank shift; write it like +1dr or -2ar."],
    ]);
    assert.deepEqual(rec.requests, []);
  });

  test("the bridge's refusal is shown to the user", async () => {
    const bridge = () => { throw new BridgeError("bad_message", "unknown rank 'godlike': use a Fate Chart rank", { field: "acting_rank" }); };
    const { api, rec } = fakeApi({ bridge });
    mythic.install(api);
    assert.equal(await rec.commands.get("fatechart")("godlike vs avg", {}), null);
    assert.deepEqual(rec.notices, [{ level: "error", key: "FATE_BRIDGE.Mythic.Refused", text: "Fate Chart: unknown rank 'godlike': use a Fate Chart rank" }]);
    assert.deepEqual(rec.posted, []);
  });

  test("help, and the GM's settings sent with Foundry's GM flag", async () => {
    const { api, rec } = fakeApi({ sender: { userId: "gm1", isGM: true }, bridge: answering });
    mythic.install(api);
    assert.equal(rec.commands.get("fatechart")("help", {}), false);
    await rec.commands.get("fatechart")("chaos 7", {});
    assert.deepEqual(rec.requests, [{ type: "chart_settings", v: 1, event_id: "ev1", user_id: "gm1", user_is_gm: true, chaos_factor: 7 }]);
    assert.deepEqual(rec.notices.map((n) => n.key), ["FATE_BRIDGE.Mythic.Usage", "FATE_BRIDGE.Mythic.Settings"]);
    assert.equal(rec.notices[1].text, "Fate Chart: odds questions on, Chaos Factor 7.");
  });

  test("the ask action takes questions only", async () => {
    const { api, rec } = fakeApi({ bridge: answering });
    mythic.install(api);
    await assert.rejects(rec.handlers.get("ask")({ kind: "settings", chaos_factor: 1 }, { userId: "player1", isGM: false }),
      (error) => error.code === "bad_message");
    assert.deepEqual(rec.requests, []);
  });
});

describe("the dialog", () => {
  async function opened() {
    const env = fakeApi({ bridge: answering });
    const handle = mythic.install(env.api);
    const app = await env.rec.commands.get("fatechart")("", {});
    return { ...env, handle, app, form: () => app.element.querySelector("form") };
  }

  test("lists the named questions, the odds and the roll modes from the bridge's catalog", async () => {
    const { app, form, rec } = await opened();
    assert.ok(app.rendered);
    assert.deepEqual(rec.requests.map((m) => m.type), ["chart_catalog_query"]);
    const names = [...form().querySelectorAll("select[name=named] option")].map((o) => o.textContent);
    assert.deepEqual(names, ["A question of your own", "Does the character hit?", "Does the ability increase by 1RS (or is a new one gained)?"]);
    assert.equal(form().querySelectorAll("datalist option").length, 13);
    assert.equal(form().querySelector("select[name=odds]").parentElement.querySelector("label").textContent, "Odds (Chaos Factor 6)");
    assert.deepEqual([...form().querySelectorAll("select[name=visibility] option")].map((o) => o.value), ["public", "gm", "blind", "self"]);
  });

  test("the roll mode starts on the user's own", async () => {
    const { api, rec } = fakeApi({ bridge: answering, rollMode: "self" });
    mythic.install(api);
    const app = await rec.commands.get("fatechart")("", {});
    const form = app.element.querySelector("form");
    assert.equal(form.querySelector("select[name=visibility]").value, "self");
    form.querySelector("[name=acting_rank]").value = "High";
    form.querySelector("[name=difficulty_rank]").value = "Low";
    form.dispatchEvent(new dom.window.Event("submit", { cancelable: true }));
    await app.asked;
    assert.equal(rec.requests.at(-1).visibility, "self");
    assert.deepEqual(rec.posted.at(-1).options, { whisper: ["player1"], blind: false, authorId: "player1", ...D37 });
  });

  test("choosing a named question shows its guidance and modifiers, as text", async () => {
    const { app, form } = await opened();
    form().querySelector("select[name=named]").value = "hit";
    form().querySelector("select[name=named]").dispatchEvent(new dom.window.Event("change"));
    await app.render();
    const guidance = [...form().querySelectorAll(".guidance")].map((p) => p.textContent);
    assert.deepEqual(guidance, ["The attacker's combat ability.", HOSTILE]);
    assert.equal(form().querySelector("img"), null);
    assert.equal(form().querySelector("[name='modifier.got_the_drop']").type, "checkbox");
    assert.match(form().querySelector(".chart-modifiers").textContent, /Got the drop \(\+1RS AR\)/);
  });

  test("asking sends the form's question and closes the dialog", async () => {
    const { app, form, rec } = await opened();
    const named = form().querySelector("select[name=named]");
    named.value = "increase_ability";
    named.dispatchEvent(new dom.window.Event("change"));
    await app.render();
    assert.match(form().querySelector(".built-in").textContent, /-1RS to AR/);
    form().querySelector("[name=acting_rank]").value = "Exceptional";
    form().querySelector("[name=difficulty_rank]").value = "weak";
    form().querySelector("[name='modifier.extra_items']").value = "2";
    form().querySelector("[name='modifier.very_complex']").checked = true;
    form().querySelector("[name=question]").value = "  Does Brakka learn surgery? ";
    form().querySelector("select[name=visibility]").value = "blind";
    form().dispatchEvent(new dom.window.Event("submit", { cancelable: true }));
    assert.deepEqual(await app.asked, { visibility: "blind" });
    assert.deepEqual(rec.requests.at(-1), {
      type: "chart_question", v: 1, event_id: "ev2", acting_rank: "Exceptional", difficulty_rank: "weak", acting_shift: 0,
      difficulty_shift: 0, named: "increase_ability", modifiers: [{ key: "extra_items", times: 2 }, { key: "very_complex", times: 1 }],
      question: "Does Brakka learn surgery?", visibility: "blind", user_id: "player1", user_name: "Player One",
    });
    assert.deepEqual(rec.posted.at(-1).options, { whisper: ["gm1"], blind: true, ...D37 });
    assert.equal(app.rendered, false);
  });

  test("asking without both ranks is shown to the user and asks nothing", async () => {
    const { app, form, rec } = await opened();
    form().querySelector("[name=acting_rank]").value = "High";
    form().dispatchEvent(new dom.window.Event("submit", { cancelable: true }));
    assert.equal(app.asked, null);
    assert.deepEqual(rec.notices.map((n) => n.text), ["Fate Chart: give both the Acting Rank and the Difficulty Rank."]);
    assert.equal(rec.requests.length, 1);
  });

  test("when the catalog cannot be had, the dialog says why", async () => {
    const bridge = () => { throw new BridgeError("bridge_down", "this browser has no bridge connection"); };
    const { api, rec } = fakeApi({ bridge });
    mythic.install(api);
    const app = await rec.commands.get("fatechart")("", {});
    assert.equal(app.element.querySelector(".notification.error").textContent,
      "The Fate Chart is unavailable: this browser has no bridge connection");
  });
});

describe("dialog form values", () => {
  test("an odds question ignores the ranks; free shifts are read as whole numbers", () => {
    const form = renderChartDialog(dom.window.document, { catalog: CATALOG, form: { ...emptyChartForm(), acting_shift: 2 } }, t,
      { onNamedChange() {}, onAsk() {} });
    form.querySelector("[name=difficulty_shift]").value = "-1";
    const values = readChartForm(form);
    assert.equal(values.acting_shift, 2);
    assert.equal(values.difficulty_shift, -1);
    assert.deepEqual(chartRequestOf({ ...values, odds: "Likely", question: "Is it?" }),
      { ok: true, request: { kind: "odds", odds: "Likely", question: "Is it?", visibility: "public" } });
  });

  test("without odds questions in the world there is no odds field", () => {
    const form = renderChartDialog(dom.window.document, { catalog: { ...CATALOG, odds_questions: false }, form: emptyChartForm() }, t,
      { onNamedChange() {}, onAsk() {} });
    assert.equal(form.querySelector("[name=odds]"), null);
    assert.equal(readChartForm(form).odds, "");
  });
});
