/**
 * Action buttons waiting for their answer (Spend Fate, a Critical Success choice, a HMtW push, a
 * pool reroll, ...), shared by SoHL's card UI and every ruleset's UI.
 *
 * Each action has a key naming what it acts on (e.g. `sohl/spend/<messageId>`). A click starts
 * it: every button rendered for that key shows the pending state (disabled, `aria-busy`, class
 * PENDING_CLASS) until the action settles, and a second click, on this button or on a copy
 * rendered later, sends nothing. Foundry re-renders a chat message's element on every update, so
 * the state lives here, by key, not on the element: the new element is attached under the same
 * key and shows the same state. When the action settles:
 * - applied (`settle(true)`): the buttons stay disabled ("done"; the card's re-render removes
 *   them) and the key takes no further click;
 * - not applied (`settle()` / `settle(false)`: refused, failed, or nothing to do): the buttons
 *   are enabled again for another try.
 * Pure DOM state on elements it is given; no Foundry globals.
 */

/** Class of a button whose action waits for its answer (styles/fate-bridge.css). */
export const PENDING_CLASS = "fate-bridge-pending";

/** Key states. A key absent from the registry is idle. */
const PENDING = "pending";
const DONE = "done";

/**
 * One registry per client (main.js makes it; rulesets get it as `api.pending`).
 *
 * @returns {{
 *   wire(key: string, buttons: Element|Element[], act: (settle: (applied?: boolean) => void) => void): void,
 *   attach(key: string, buttons: Element|Element[]): void,
 *   state(key: string): "idle"|"pending"|"done",
 * }} `wire` attaches the buttons and makes a click on any of them start the action: `act(settle)`
 *   runs once per start (never while the key is pending or done) and must call `settle` exactly
 *   once when the answer or the refusal arrives (a later call is ignored); `attach` only shows the
 *   key's state on the buttons (for buttons wired elsewhere); `state` tells the key's state
 */
export function createPendingActions() {
  /** @type {Map<string, string>} key -> PENDING | DONE */
  const states = new Map();
  /** @type {Map<string, Set<Element>>} buttons rendered for a key, pruned once out of the page */
  const buttonsOf = new Map();

  function paint(key) {
    const state = states.get(key);
    const set = buttonsOf.get(key);
    if (!set) return;
    // Elements of earlier renders are forgotten once a rendered one is in the page.
    if ([...set].some((button) => button.isConnected)) for (const button of [...set]) if (!button.isConnected) set.delete(button);
    for (const button of set) {
      button.disabled = state !== undefined;
      button.classList.toggle(PENDING_CLASS, state === PENDING);
      if (state === PENDING) button.setAttribute("aria-busy", "true");
      else button.removeAttribute("aria-busy");
    }
  }

  function attach(key, buttons) {
    if (!buttonsOf.has(key)) buttonsOf.set(key, new Set());
    for (const button of [buttons].flat()) buttonsOf.get(key).add(button);
    paint(key);
  }

  function start(key, act) {
    if (states.has(key)) return;
    states.set(key, PENDING);
    paint(key);
    let settled = false;
    const settle = (applied = false) => {
      if (settled) return;
      settled = true;
      if (applied === true) states.set(key, DONE);
      else states.delete(key);
      paint(key);
    };
    try {
      act(settle);
    } catch (error) {
      settle(false);
      throw error;
    }
  }

  return {
    wire(key, buttons, act) {
      attach(key, buttons);
      for (const button of [buttons].flat()) {
        button.addEventListener("click", (event) => {
          event.preventDefault();
          start(key, act);
        });
      }
    },
    attach,
    state: (key) => (states.get(key) === PENDING ? "pending" : states.get(key) === DONE ? "done" : "idle"),
  };
}
