/**
 * What every client does to a chat message as it renders: hide SoHL's own Fate button, offer
 * ours where the bridge graded the test eligible, say why Fate is withheld otherwise, and wire
 * the spend/keep buttons of a pending choice card. Pure DOM work on the element Foundry hands
 * to `renderChatMessageHTML`; every text goes in through `textContent`.
 */

import { FLAGS } from "./fate-flow.js";
import { createPendingActions } from "../../logic/pending.js";

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
 * @param {{id: string, contentVisible?: boolean, flags: Record<string, any>}} args.message `flags` =
 *   this module's flags; `contentVisible` false when Foundry shows this user only its "rolled
 *   privately" stub (scripts/foundry.js messageData: `ChatMessage#isContentVisible`)
 * @param {{id: string, isGM: boolean, ownsActor: boolean}} args.viewer the current user;
 *   `ownsActor`: OWNER of the test card's actor
 * @param {(key: string, data?: object) => string} args.t localize (`format` when data is given)
 * @param {(messageId: string, pointId: string, settle: (applied?: boolean) => void) => void} args.onSpend
 *   called on "Spend Fate"; the button shows the pending state until `settle` (logic/pending.js:
 *   `settle(true)` when Fate was spent, `settle()` to enable it again when nothing was)
 * @param {(messageId: string, choice: "spend"|"keep", settle: (applied?: boolean) => void) => void} args.onChoice
 *   called on a choice button; both buttons pending until `settle`, as for `onSpend`
 * @param {ReturnType<typeof createPendingActions>} [args.pending] the client's pending actions
 *   (main.js passes its own, so the state survives a re-render; a fresh one otherwise)
 * @returns {{spendOffered: boolean, choiceWired: number}} what was added, for the caller and tests
 */
export function decorateCard({ root, message, viewer, t, onSpend, onChoice, pending = createPendingActions() }) {
  for (const button of root.querySelectorAll(SOHL_FATE_BUTTON)) button.remove();
  // Nothing of ours on Foundry's stub of a private roll: its reader must not learn the result.
  if (message.contentVisible === false) return { spendOffered: false, choiceWired: 0 };
  // Whoever reads the result (owners and GMs) may spend; a blind test's roller too where Foundry
  // shows it (logic/cards.js contentVisibleTo; the GM's browser checks the same).
  const may = viewer.isGM || viewer.ownsActor;
  let spendOffered = false;
  const graded = message.flags[FLAGS.GRADED];
  const outside = message.flags[FLAGS.FATED_OUTSIDE] || message.flags[FLAGS.OUTSIDE_PENDING];
  if (graded && outside && !message.flags[FLAGS.FATED] && may) {
    // SoHL fated this test itself (S11): no Fate here, and a line saying so (also while
    // the bridge has not recorded it yet: its report waits for the link, fate-flow.js).
    (root.querySelector(".sohl.chat-card") ?? root).append(withheldNote(root.ownerDocument, ["already_fated"], t));
  } else if (graded && !message.flags[FLAGS.FATED] && may) {
    const card = root.querySelector(".sohl.chat-card") ?? root;
    if (graded.eligible && graded.points.length > 0) {
      card.append(spendControls(root.ownerDocument, message.id, graded.points, t, onSpend, pending));
      spendOffered = true;
    } else if (!graded.eligible) {
      card.append(withheldNote(root.ownerDocument, graded.reasons, t));
    }
  }
  return { spendOffered, choiceWired: wireChoices(root, message, viewer, onChoice, pending) };
}

/** The "Spend Fate" button with its point selector (the bridge's suggested order, first selected). */
function spendControls(doc, messageId, points, t, onSpend, pending) {
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
  pending.wire(`sohl/spend/${messageId}`, button, (settle) => onSpend(messageId, select.value, settle));
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
function wireChoices(root, message, viewer, onChoice, pending) {
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
    // Spend and keep share one key: either click makes both pending.
    pending.wire(`sohl/choice/${testId}`, button, (settle) => onChoice(testId, choice, settle));
    wired += 1;
  }
  return wired;
}
