/**
 * His Majesty the Worm in the browser, as plain DOM work: the "Push fate" button of the bridge's
 * test cards (shown to the drawer only, H6) and the test of fate dialog (H3, H4, H9).
 * No Foundry globals: the ruleset file hands in the document, the viewer and the callbacks.
 */

import { VISIBILITIES, checkedVisibility } from "../../logic/cards.js";
import { ATTRIBUTES, SCORE_MAX, SCORE_MIN } from "./command.js";
import { createPendingActions } from "../../logic/pending.js";

/** The bridge's push button (docs/protocol.md "hmtw"): `data-fate-bridge-hmtw-push` is the test id. */
export const PUSH_BUTTON = "button[data-fate-bridge-hmtw-push]";
export const DIALOG_CLASS = "fate-bridge-hmtw-dialog";

/**
 * Show each push button of a rendered card to its drawer only, and not once that test was pushed
 * (the card's message carries the pushed test ids in `pushed`). A click shows the button pending
 * (logic/pending.js, key `hmtw/push/<testId>`) and calls `onPush(testId, settle)`: `settle(true)`
 * once pushed, `settle()` to enable it again after a failure.
 *
 * @param {object} options
 * @param {Element} options.root the rendered message
 * @param {string} options.viewerId this client's user id
 * @param {string[]} options.pushed test ids already pushed (from the message's flags)
 * @param {(testId: string, settle: (applied?: boolean) => void) => void} options.onPush
 * @param {ReturnType<typeof createPendingActions>} [options.pending] the client's pending actions
 *   (`api.pending`, so the state survives a re-render; a fresh one otherwise)
 * @returns {number} how many buttons stay
 */
export function decoratePushButtons({ root, viewerId, pushed, onPush, pending = createPendingActions() }) {
  let kept = 0;
  for (const button of [...root.querySelectorAll(PUSH_BUTTON)]) {
    const testId = button.dataset.fateBridgeHmtwPush;
    if (button.dataset.fateBridgeDrawer !== viewerId || pushed.includes(testId)) {
      button.remove();
      continue;
    }
    kept += 1;
    pending.wire(`hmtw/push/${testId}`, button, (settle) => onPush(testId, settle));
  }
  return kept;
}

/**
 * The dialog's form values, empty.
 *
 * @param {string} [visibility] the roll mode chosen at first (the user's own, from foundry.js rollMode)
 * @returns {{attribute: string, score: string, favor: boolean, disfavor: boolean, obstacle: string, visibility: string}}
 */
export function emptyTestForm(visibility = "public") {
  return { attribute: ATTRIBUTES[0], score: "", favor: false, disfavor: false, obstacle: "", visibility };
}

/**
 * Render the test of fate dialog: the attribute (with the actor's score beside each when the
 * HMtW system gives them), a typed score otherwise, favor, disfavor, the obstacle, the roll mode,
 * "Draw".
 *
 * @param {Document} doc
 * @param {{actorName: string, scores: Record<string, number|null>|null, form: ReturnType<typeof emptyTestForm>}} data
 * @param {(key: string, data?: object) => string} t localize
 * @param {{onDraw(values: ReturnType<typeof emptyTestForm>): void}} handlers
 * @returns {HTMLFormElement}
 */
export function renderTestDialog(doc, { actorName, scores, form }, t, { onDraw }) {
  const el = (tag, props = {}, ...children) => {
    const node = Object.assign(doc.createElement(tag), props);
    node.append(...children);
    return node;
  };
  const field = (label, input) => el("div", { className: "form-group" }, el("label", { textContent: label }), input);

  const attribute = el("select", { name: "attribute" });
  for (const name of ATTRIBUTES) {
    const score = scores?.[name];
    const label = t(`FATE_BRIDGE.Hmtw.Attribute.${name}`) + (scores ? ` (${score ?? "?"})` : "");
    attribute.append(el("option", { value: name, textContent: label, selected: name === form.attribute }));
  }
  const form_ = el("form", { className: DIALOG_CLASS },
    el("p", { className: "hmtw-actor", textContent: t("FATE_BRIDGE.Hmtw.Dialog.Actor", { name: actorName }) }),
    field(t("FATE_BRIDGE.Hmtw.Dialog.Attribute"), attribute));
  if (!scores) {
    form_.append(field(t("FATE_BRIDGE.Hmtw.Dialog.Score"),
      el("input", { type: "number", name: "score", min: String(SCORE_MIN), max: String(SCORE_MAX), step: "1", value: form.score })));
  }
  form_.append(
    field(t("FATE_BRIDGE.Hmtw.Dialog.Favor"), el("input", { type: "checkbox", name: "favor", checked: form.favor })),
    field(t("FATE_BRIDGE.Hmtw.Dialog.Disfavor"), el("input", { type: "checkbox", name: "disfavor", checked: form.disfavor })),
    field(t("FATE_BRIDGE.Hmtw.Dialog.Obstacle"), el("input", { type: "text", name: "obstacle", maxLength: 256, value: form.obstacle })),
    field(t("FATE_BRIDGE.Visibility.Label"), el("select", { name: "visibility" },
      ...VISIBILITIES.map((v) => el("option", { value: v, textContent: t(`FATE_BRIDGE.Visibility.${v}`), selected: v === form.visibility })))),
    el("button", { type: "submit", name: "draw", textContent: t("FATE_BRIDGE.Hmtw.Dialog.Draw") }),
  );
  form_.addEventListener("submit", (event) => {
    event.preventDefault();
    onDraw(readTestForm(form_));
  });
  return form_;
}

/**
 * @param {HTMLFormElement} form
 * @returns {ReturnType<typeof emptyTestForm>}
 */
export function readTestForm(form) {
  const value = (name) => form.elements.namedItem(name);
  return {
    attribute: value("attribute").value,
    score: value("score")?.value ?? "",
    favor: value("favor").checked,
    disfavor: value("disfavor").checked,
    obstacle: value("obstacle").value.trim(),
    visibility: checkedVisibility(value("visibility")?.value),
  };
}

/**
 * The test a dialog's values ask for.
 *
 * @param {ReturnType<typeof emptyTestForm>} values
 * @param {boolean} typedScore the dialog asked for the score (outside the HMtW system)
 * @returns {{ok: true, request: import("./command.js").TofRequest} | {ok: false, error: string, data: object}}
 *   `no_attribute`, or `score_range` for a typed score outside 1..4
 */
export function dialogRequest(values, typedScore) {
  if (!ATTRIBUTES.includes(values.attribute)) return { ok: false, error: "no_attribute", data: {} };
  const scores = [];
  if (typedScore) {
    const score = Number(values.score);
    if (!Number.isInteger(score) || score < SCORE_MIN || score > SCORE_MAX) {
      return { ok: false, error: "score_range", data: { score: String(values.score) } };
    }
    scores.push(score);
  }
  return {
    ok: true,
    request: {
      kind: "test", attribute: values.attribute, scores, favor: values.favor, disfavor: values.disfavor,
      obstacle: values.obstacle || null, visibility: checkedVisibility(values.visibility),
    },
  };
}
