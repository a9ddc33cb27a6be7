/**
 * What every client does to a chat message as it renders: hide SoHL's own Fate button, offer
 * ours where the bridge graded the test eligible, say why Fate is withheld otherwise, and wire
 * the spend/keep buttons of a pending choice card. Pure DOM work on the element Foundry hands
 * to `renderChatMessageHTML`; every text goes in through `textContent`.
 */

import { FLAGS } from "./fate-flow.js";

/** SoHL's Fate button: hidden everywhere (it fates twice, leaves a stale footer, shows when Fate is withheld). */
export const SOHL_FATE_BUTTON = 'button[data-action="fateTest"]';
/** The spend/keep buttons in the bridge's choice card. */
export const CHOICE_BUTTON = "[data-fate-bridge-choice]";
/** Class of the element we add to a test card. */
export const SPEND_CLASS = "fate-bridge-spend";
export const WITHHELD_CLASS = "fate-bridge-withheld";

/**
 * Decorate one rendered chat message.
 *
 * @param {object} args
 * @param {HTMLElement} args.root the message element being rendered
 * @param {{id: string, blind?: boolean, flags: Record<string, any>}} args.message `flags` = this
 *   module's flags; `blind` the message's own blind flag
 * @param {{id: string, isGM: boolean, ownsActor: boolean}} args.viewer the current user;
 *   `ownsActor`: OWNER of the test card's actor
 * @param {(key: string, data?: object) => string} args.t localize (`format` when data is given)
 * @param {(messageId: string, pointId: string, release: () => void) => void} args.onSpend called on
 *   "Spend Fate" (the button is disabled then; `release` enables it again when nothing was spent)
 * @param {(messageId: string, choice: "spend"|"keep", release: () => void) => void} args.onChoice
 *   called on a choice button (both buttons disabled; `release` enables them again)
 * @returns {{spendOffered: boolean, choiceWired: number}} what was added, for the caller and tests
 */
export function decorateCard({ root, message, viewer, t, onSpend, onChoice }) {
  for (const button of root.querySelectorAll(SOHL_FATE_BUTTON)) button.remove();
  // A blind test's result is the GMs' alone (Foundry hides it from its roller): only they spend.
  const may = viewer.isGM || (viewer.ownsActor && !message.blind);
  let spendOffered = false;
  const graded = message.flags[FLAGS.GRADED];
  if (graded && !message.flags[FLAGS.FATED] && may) {
    const card = root.querySelector(".sohl.chat-card") ?? root;
    if (graded.eligible && graded.points.length > 0) {
      card.append(spendControls(root.ownerDocument, message.id, graded.points, t, onSpend));
      spendOffered = true;
    } else if (!graded.eligible) {
      card.append(withheldNote(root.ownerDocument, graded.reasons, t));
    }
  }
  return { spendOffered, choiceWired: wireChoices(root, message, viewer, onChoice) };
}

/** The "Spend Fate" button with its point selector (the bridge's suggested order, first selected). */
function spendControls(doc, messageId, points, t, onSpend) {
  const box = doc.createElement("div");
  box.className = SPEND_CLASS;
  const select = doc.createElement("select");
  select.setAttribute("aria-label", t("FATE_BRIDGE.Card.PointLabel"));
  for (const point of points) {
    const option = doc.createElement("option");
    option.value = point.point_id;
    option.textContent =
      point.charges === null
        ? t("FATE_BRIDGE.Card.PointUnlimited", { name: point.name })
        : t("FATE_BRIDGE.Card.PointCharges", { name: point.name, charges: String(point.charges) });
    select.append(option);
  }
  const button = doc.createElement("button");
  button.type = "button";
  button.textContent = t("FATE_BRIDGE.Card.SpendFate");
  button.addEventListener("click", (event) => {
    event.preventDefault();
    button.disabled = true;
    onSpend(messageId, select.value, () => {
      button.disabled = false;
    });
  });
  box.append(select, button);
  return box;
}

/** A short line naming why Fate is withheld (S5 order, as the bridge sent them). */
function withheldNote(doc, reasons, t) {
  const note = doc.createElement("div");
  note.className = WITHHELD_CLASS;
  const texts = reasons.map((reason) => t(`FATE_BRIDGE.Reason.${reason}`));
  note.textContent = t("FATE_BRIDGE.Card.Withheld", { reasons: texts.join(", ") });
  return note;
}

/** Wire the choice buttons for those who may answer; remove them for everyone else. */
function wireChoices(root, message, viewer, onChoice) {
  const buttons = [...root.querySelectorAll(CHOICE_BUTTON)];
  const allowed = viewer.isGM || (message.flags[FLAGS.CHOICE_BY] ?? []).includes(viewer.id);
  let wired = 0;
  for (const button of buttons) {
    const choice = button.getAttribute("data-fate-bridge-choice");
    const testId = button.closest("[data-fate-bridge-message-id]")?.getAttribute("data-fate-bridge-message-id");
    if (!allowed || !testId || (choice !== "spend" && choice !== "keep")) {
      button.remove();
      continue;
    }
    button.addEventListener("click", (event) => {
      event.preventDefault();
      for (const each of buttons) each.disabled = true;
      onChoice(testId, choice, () => {
        for (const each of buttons) each.disabled = false;
      });
    });
    wired += 1;
  }
  return wired;
}
