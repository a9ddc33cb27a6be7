/**
 * His Majesty the Worm in the browser (scripts/rulesets/hmtw/ui.js): the push button for the drawer
 * only (H6), and the test of fate dialog (H3, H4, H9), on jsdom.
 */
import { test, describe, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import { decoratePushButtons, dialogRequest, emptyTestForm, readTestForm, renderTestDialog } from "../scripts/rulesets/hmtw/ui.js";

const EN = { "FATE_BRIDGE.Hmtw.Dialog.Actor": "Adventurer: {name}", "FATE_BRIDGE.Hmtw.Attribute.pentacles": "Pentacles" };
const t = (key, data = {}) => (EN[key] ?? key).replace(/\{(\w+)\}/g, (_, name) => String(data[name]));

let doc;
beforeEach(() => {
  doc = new JSDOM("<!doctype html><body></body>").window.document;
});

/** A group card as the bridge renders it: two failed tests, each with its drawer's button. */
function card() {
  const root = doc.createElement("div");
  root.innerHTML = `
    <div data-fate-bridge-hmtw-test="g/1"><button type="button" data-fate-bridge-hmtw-push="g/1" data-fate-bridge-drawer="p1">Push fate</button></div>
    <div data-fate-bridge-hmtw-test="g/2"><button type="button" data-fate-bridge-hmtw-push="g/2" data-fate-bridge-drawer="p2">Push fate</button></div>`;
  return root;
}

describe("the push button (H6)", () => {
  test("only the drawer sees it", () => {
    const root = card();
    assert.equal(decoratePushButtons({ root, viewerId: "p2", pushed: [], onPush() {} }), 1);
    assert.deepEqual([...root.querySelectorAll("button")].map((b) => b.dataset.fateBridgeHmtwPush), ["g/2"]);
    const gmView = card();
    assert.equal(decoratePushButtons({ root: gmView, viewerId: "gm1", pushed: [], onPush() {} }), 0);
    assert.equal(gmView.querySelector("button"), null);
  });

  test("not once the test was pushed", () => {
    const root = card();
    assert.equal(decoratePushButtons({ root, viewerId: "p1", pushed: ["g/1"], onPush() {} }), 0);
  });

  test("a click pushes once; release enables it again after a failure", () => {
    const root = card();
    const pushes = [];
    decoratePushButtons({ root, viewerId: "p1", pushed: [], onPush: (testId, release) => pushes.push({ testId, release }) });
    const button = root.querySelector("button");
    button.click();
    button.click();
    assert.deepEqual(pushes.map((p) => p.testId), ["g/1"]);
    assert.equal(button.disabled, true);
    pushes[0].release();
    assert.equal(button.disabled, false);
    button.click();
    assert.equal(pushes.length, 2);
  });
});

describe("the test of fate dialog", () => {
  const scores = { swords: 4, pentacles: 2, cups: 3, wands: 0 };

  test("in the HMtW system: the scores beside the attributes, no score field", () => {
    const form = renderTestDialog(doc, { actorName: "Silán <b>Storysoul</b>", scores, form: emptyTestForm() }, t, { onDraw() {} });
    assert.equal(form.querySelector(".hmtw-actor").textContent, "Adventurer: Silán <b>Storysoul</b>", "names are text, never HTML");
    assert.deepEqual([...form.querySelectorAll("select[name=attribute] option")].map((o) => [o.value, o.textContent]), [
      ["swords", "FATE_BRIDGE.Hmtw.Attribute.swords (4)"], ["pentacles", "Pentacles (2)"],
      ["cups", "FATE_BRIDGE.Hmtw.Attribute.cups (3)"], ["wands", "FATE_BRIDGE.Hmtw.Attribute.wands (0)"]]);
    assert.equal(form.querySelector('[name="score"]'), null);
  });

  test("drawing submits the values: attribute, favor, disfavor, obstacle", () => {
    const drawn = [];
    const form = renderTestDialog(doc, { actorName: "Silán", scores, form: emptyTestForm() }, t, { onDraw: (v) => drawn.push(v) });
    doc.body.append(form);
    form.elements.namedItem("attribute").value = "cups";
    form.elements.namedItem("favor").checked = true;
    form.elements.namedItem("disfavor").checked = true;
    form.elements.namedItem("obstacle").value = "  the clockwork mechanism ";
    form.querySelector('[name="draw"]').click();
    assert.deepEqual(drawn, [{ attribute: "cups", score: "", favor: true, disfavor: true, obstacle: "the clockwork mechanism", visibility: "public" }]);
    assert.deepEqual(dialogRequest(drawn[0], false), { ok: true, request: {
      kind: "test", attribute: "cups", scores: [], favor: true, disfavor: true, obstacle: "the clockwork mechanism", visibility: "public" } });
  });

  test("the roll mode: the user's own chosen at first, another may be picked", () => {
    const drawn = [];
    const form = renderTestDialog(doc, { actorName: "Silán", scores, form: emptyTestForm("gm") }, t, { onDraw: (v) => drawn.push(v) });
    doc.body.append(form);
    const mode = form.elements.namedItem("visibility");
    assert.deepEqual([...mode.options].map((o) => o.value), ["public", "gm", "blind", "self"]);
    assert.equal(mode.value, "gm");
    form.querySelector('[name="draw"]').click();
    mode.value = "blind";
    form.querySelector('[name="draw"]').click();
    assert.deepEqual(drawn.map((v) => dialogRequest(v, false).request.visibility), ["gm", "blind"]);
    assert.equal(dialogRequest({ ...emptyTestForm(), visibility: "everyone" }, false).request.visibility, "self", "an unknown mode is never public");
  });

  test("outside the HMtW system the score is typed, 1 to 4", () => {
    const form = renderTestDialog(doc, { actorName: "A token", scores: null, form: { ...emptyTestForm(), score: "3" } }, t, { onDraw() {} });
    assert.equal(form.querySelector("option").textContent, "FATE_BRIDGE.Hmtw.Attribute.swords");
    assert.equal(readTestForm(form).score, "3");
    assert.deepEqual(dialogRequest(readTestForm(form), true).request.scores, [3]);
    for (const score of ["", "0", "5", "2.5"]) {
      assert.deepEqual(dialogRequest({ ...emptyTestForm(), score }, true), { ok: false, error: "score_range", data: { score } }, score);
    }
    assert.equal(dialogRequest({ ...emptyTestForm(), attribute: "coins" }, false).error, "no_attribute");
  });
});
