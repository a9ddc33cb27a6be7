/**
 * Action buttons waiting for their answer (logic/pending.js, issue 13): the pending state shows
 * until the answer or the refusal, survives a re-render of the card, and lets no second request
 * go meanwhile; shared by SoHL's card UI and the rulesets' UIs.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import { createPendingActions, PENDING_CLASS } from "../scripts/logic/pending.js";
import { decoratePoolMessage, BRIDGE_REROLL_BUTTON } from "../scripts/rulesets/pool/ui.js";
import { decoratePushButtons, PUSH_BUTTON } from "../scripts/rulesets/hmtw/ui.js";

const doc = new JSDOM("<!doctype html><body></body>").window.document;
/** A rendered card holding one button, in the page (as Foundry's chat log holds it). */
function renderCard(html = "<button>Act</button>") {
  const card = doc.createElement("li");
  card.innerHTML = html;
  doc.body.append(card);
  return card;
}
const isPending = (button) => button.disabled && button.classList.contains(PENDING_CLASS) && button.getAttribute("aria-busy") === "true";

test("pending until settled; a re-rendered copy shows it and sends nothing; refused: usable again", () => {
  const pending = createPendingActions();
  const settles = [];
  const act = (settle) => settles.push(settle);
  let card = renderCard();
  pending.wire("sohl/spend/m1", card.querySelector("button"), act);
  card.querySelector("button").click();
  assert.equal(settles.length, 1);
  assert.ok(isPending(card.querySelector("button")));
  card.querySelector("button").click();
  assert.equal(settles.length, 1, "a second click sends nothing");

  // Foundry re-renders the message: a new element, wired again under the same key.
  card.remove();
  card = renderCard();
  pending.wire("sohl/spend/m1", card.querySelector("button"), act);
  assert.ok(isPending(card.querySelector("button")), "the state survives the re-render");
  card.querySelector("button").click();
  assert.equal(settles.length, 1);
  assert.equal(pending.state("sohl/spend/m1"), "pending");

  settles[0](); // refused: nothing applied
  assert.equal(pending.state("sohl/spend/m1"), "idle");
  const button = card.querySelector("button");
  assert.deepEqual([button.disabled, button.classList.contains(PENDING_CLASS), button.hasAttribute("aria-busy")], [false, false, false]);
  button.click();
  assert.equal(settles.length, 2, "another try is possible after a refusal");
});

test("applied: the buttons stay disabled (done) and take no further click; a late settle changes nothing", () => {
  const pending = createPendingActions();
  const settles = [];
  const card = renderCard("<button data-c='spend'>Spend</button><button data-c='keep'>Keep</button>");
  for (const button of card.querySelectorAll("button")) pending.wire("sohl/choice/t1", button, (settle) => settles.push([button.dataset.c, settle]));
  card.querySelector("[data-c='keep']").click();
  assert.ok([...card.querySelectorAll("button")].every(isPending), "one key: both buttons pending");
  card.querySelector("[data-c='spend']").click();
  assert.deepEqual(settles.map(([c]) => c), ["keep"]);
  settles[0][1](true);
  settles[0][1](false);
  assert.equal(pending.state("sohl/choice/t1"), "done");
  for (const button of card.querySelectorAll("button")) {
    assert.equal(button.disabled, true);
    assert.equal(button.classList.contains(PENDING_CLASS), false);
  }
  card.querySelector("[data-c='spend']").click();
  assert.equal(settles.length, 1);
});

test("other keys are independent", () => {
  const pending = createPendingActions();
  const a = renderCard();
  const b = renderCard();
  pending.wire("k/a", a.querySelector("button"), () => {});
  pending.wire("k/b", b.querySelector("button"), () => {});
  a.querySelector("button").click();
  assert.equal(pending.state("k/a"), "pending");
  assert.equal(pending.state("k/b"), "idle");
  assert.equal(b.querySelector("button").disabled, false);
});

test("the rulesets' buttons use the same registry: a pool reroll and a HMtW push stay pending across re-renders", () => {
  const pending = createPendingActions();
  const calls = [];
  const poolCard = () => renderCard('<div class="message-content"><button data-fate-bridge-pool-reroll="roll1">Reroll</button></div>');
  const decoratePool = (root) => decoratePoolMessage({
    root, message: { id: "m9", snapshot: null }, viewer: { isGM: true, ownsActor: false, actorHasPlayerOwner: false },
    t: (key) => key, onReroll: (rollId, roll, settle) => calls.push(["pool", rollId, settle]), pending,
  });
  let root = poolCard();
  decoratePool(root);
  root.querySelector(BRIDGE_REROLL_BUTTON).click();
  root.remove();
  root = poolCard();
  decoratePool(root);
  assert.ok(isPending(root.querySelector(BRIDGE_REROLL_BUTTON)));
  root.querySelector(BRIDGE_REROLL_BUTTON).click();

  const pushCard = () => renderCard('<button data-fate-bridge-hmtw-push="test7" data-fate-bridge-drawer="u1">Push</button>');
  const decoratePush = (card) => decoratePushButtons({ root: card, viewerId: "u1", pushed: [], onPush: (testId, settle) => calls.push(["hmtw", testId, settle]), pending });
  let card = pushCard();
  decoratePush(card);
  card.querySelector(PUSH_BUTTON).click();
  card.remove();
  card = pushCard();
  decoratePush(card);
  card.querySelector(PUSH_BUTTON).click();
  assert.ok(isPending(card.querySelector(PUSH_BUTTON)));
  assert.deepEqual(calls.map(([kind, id]) => [kind, id]), [["pool", "roll1"], ["hmtw", "test7"]], "one request each");
  calls[1][2]();
  assert.equal(card.querySelector(PUSH_BUTTON).disabled, false, "a failed push is usable again");
});
