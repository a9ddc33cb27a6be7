/**
 * The pool ruleset's DOM: the "Reroll with Fate" button on rendered chat messages (P7) and the
 * GM's ledger panel. Pure DOM work on elements handed in; every text goes in through
 * `textContent`, every callback gets plain data.
 */

import { createPendingActions } from "../../logic/pending.js";

/** The bridge's reroll button inside its save and reroll cards (docs/protocol.md "pool"). */
export const BRIDGE_REROLL_BUTTON = "[data-fate-bridge-pool-reroll]";
/** Class of the button we add to a chat message carrying a d20 roll. */
export const REROLL_CLASS = "fate-bridge-pool-reroll";
/** Class of the ledger panel's root. */
export const PANEL_CLASS = "fate-bridge-pool-ledger";
const KINDS = Object.freeze(["pc", "retainer", "follower"]);

/**
 * Decorate one rendered chat message for the pool ruleset.
 *
 * @param {object} args
 * @param {HTMLElement} args.root the message element being rendered
 * @param {{id: string, snapshot: object|null}} args.message the ChatMessage id and the `roll`
 *   snapshot of its d20 roll (pool-rolls.js d20Snapshot), or null when it has none
 * @param {{isGM: boolean, ownsActor: boolean, actorHasPlayerOwner: boolean}} args.viewer the
 *   current user: GM, OWNER of the speaker actor; and whether that actor is a player character
 * @param {(key: string, data?: object) => string} args.t localize
 * @param {(rollId: string, roll: object|null, settle: (applied?: boolean) => void) => void} args.onReroll
 *   called on a click; the button is pending (logic/pending.js, key `pool/reroll/<id>`) until
 *   `settle(true)` (rerolled) or `settle()` (nothing spent: enabled again)
 * @param {ReturnType<typeof createPendingActions>} [args.pending] the client's pending actions
 *   (`api.pending`, so the state survives a re-render; a fresh one otherwise)
 * @returns {{added: boolean, wired: number}} whether a button was added to a d20 message, and how
 *   many of the bridge's own buttons were wired
 */
export function decoratePoolMessage({ root, message, viewer, t, onReroll, pending = createPendingActions() }) {
  const may = viewer.isGM || viewer.ownsActor;
  let wired = 0;
  for (const button of root.querySelectorAll(BRIDGE_REROLL_BUTTON)) {
    const rollId = button.getAttribute("data-fate-bridge-pool-reroll");
    if (!may || !rollId) {
      button.remove();
      continue;
    }
    pending.wire(`pool/reroll/${rollId}`, button, (settle) => onReroll(rollId, null, settle));
    wired += 1;
  }
  let added = false;
  if (message.snapshot && viewer.actorHasPlayerOwner && may) {
    const doc = root.ownerDocument;
    const box = doc.createElement("div");
    box.className = REROLL_CLASS;
    const button = doc.createElement("button");
    button.type = "button";
    button.textContent = t("FATE_BRIDGE.Pool.Reroll");
    pending.wire(`pool/reroll/${message.id}`, button, (settle) => onReroll(message.id, message.snapshot, settle));
    box.append(button);
    (root.querySelector(".message-content") ?? root).append(box);
    added = true;
  }
  return { added, wired };
}

/**
 * The GM's ledger panel.
 *
 * @param {Document} doc
 * @param {object} state
 * @param {Array<{character_id: string, name: string, kind: string, level: number, tier: number, stamina: number,
 *   session_fate: number, earned_fate: number, destiny: number}>} state.entries the ledger (pool_ledger)
 * @param {boolean} state.sessionOpen
 * @param {Array<{id: string, name: string}>} state.actors the world's actors (to enter one)
 * @param {string|null} state.error a message to show (the last refusal), or null
 * @param {(key: string, data?: object) => string} t localize
 * @param {(action: string, data: object) => void} onAction the button's `data-action` (`session_start`,
 *   `session_end`, `rest`, `refresh`, `award`, `level_gained`, `stamina`, `character`) with its data:
 *   `{character_ids: [id]}` for award (1 Fate), `{character_id}` for level_gained,
 *   `{character_id, stamina}` for stamina,
 *   `{character_id, name, kind, level, stamina}` for character, `{}` otherwise
 * @returns {HTMLElement}
 */
export function renderLedgerPanel(doc, { entries, sessionOpen, actors, error }, t, onAction) {
  const root = element(doc, "div", PANEL_CLASS);
  const bar = element(doc, "div", "pool-ledger-session");
  bar.append(element(doc, "span", "pool-session-state", t(sessionOpen ? "FATE_BRIDGE.Pool.Panel.SessionOpen" : "FATE_BRIDGE.Pool.Panel.SessionClosed")));
  for (const action of ["session_start", "session_end", "rest", "refresh"]) {
    bar.append(actionButton(doc, action, t(`FATE_BRIDGE.Pool.Panel.${action}`), () => onAction(action, {})));
  }
  root.append(bar);
  if (error) root.append(element(doc, "p", "pool-ledger-error", error));

  const table = element(doc, "table", "pool-ledger-table");
  const head = element(doc, "tr");
  for (const column of ["Name", "Level", "Fate", "Destiny", "Stamina", "Actions"]) head.append(element(doc, "th", null, t(`FATE_BRIDGE.Pool.Panel.${column}`)));
  table.append(head);
  for (const entry of entries) table.append(ledgerRow(doc, entry, t, onAction));
  root.append(table);

  const known = new Set(entries.map((entry) => entry.character_id));
  const addable = actors.filter((actor) => !known.has(actor.id));
  if (addable.length) root.append(addForm(doc, addable, t, onAction));
  return root;
}

function ledgerRow(doc, entry, t, onAction) {
  const row = element(doc, "tr", "pool-ledger-row");
  row.dataset.characterId = entry.character_id;
  const isPc = entry.kind === "pc";
  row.append(
    element(doc, "td", null, isPc ? entry.name : `${entry.name} (${t(`FATE_BRIDGE.Pool.Kind.${entry.kind}`)})`),
    element(doc, "td", null, `${entry.level} (${t("FATE_BRIDGE.Pool.Panel.Tier", { tier: String(entry.tier) })})`),
    element(doc, "td", "pool-fate", isPc ? t("FATE_BRIDGE.Pool.Panel.FateCell", { session: String(entry.session_fate), earned: String(entry.earned_fate) }) : "-"),
    element(doc, "td", "pool-destiny", isPc ? String(entry.destiny) : "-"),
  );
  const staminaCell = element(doc, "td");
  const stamina = numberInput(doc, "stamina", entry.stamina);
  stamina.addEventListener("change", () => onAction("stamina", { character_id: entry.character_id, stamina: Number(stamina.value) }));
  staminaCell.append(stamina);
  const actions = element(doc, "td");
  if (isPc) {
    actions.append(
      actionButton(doc, "award", t("FATE_BRIDGE.Pool.Panel.award"), () => onAction("award", { character_ids: [entry.character_id] })),
      actionButton(doc, "level_gained", t("FATE_BRIDGE.Pool.Panel.level_gained"), () => onAction("level_gained", { character_id: entry.character_id })),
    );
  }
  row.append(staminaCell, actions);
  return row;
}

function addForm(doc, actors, t, onAction) {
  const form = element(doc, "div", "pool-ledger-add");
  const actor = doc.createElement("select");
  actor.name = "actor";
  for (const each of actors) {
    const option = element(doc, "option", null, each.name);
    option.value = each.id;
    actor.append(option);
  }
  const kind = doc.createElement("select");
  kind.name = "kind";
  for (const each of KINDS) {
    const option = element(doc, "option", null, t(`FATE_BRIDGE.Pool.Kind.${each}`));
    option.value = each;
    kind.append(option);
  }
  const level = numberInput(doc, "level", 1);
  const stamina = numberInput(doc, "stamina", 0);
  const add = actionButton(doc, "character", t("FATE_BRIDGE.Pool.Panel.character"), () => {
    const chosen = actors.find((each) => each.id === actor.value);
    onAction("character", { character_id: chosen.id, name: chosen.name, kind: kind.value, level: Number(level.value), stamina: Number(stamina.value) });
  });
  form.append(actor, kind, level, stamina, add);
  return form;
}

function element(doc, tag, className = null, text = null) {
  const node = doc.createElement(tag);
  if (className) node.className = className;
  if (text !== null) node.textContent = text;
  return node;
}

function actionButton(doc, action, label, run) {
  const button = element(doc, "button", null, label);
  button.type = "button";
  button.dataset.action = action;
  button.addEventListener("click", (event) => {
    event.preventDefault();
    run();
  });
  return button;
}

function numberInput(doc, name, value) {
  const input = doc.createElement("input");
  input.type = "number";
  input.name = name;
  input.min = name === "level" ? "1" : "0";
  input.value = String(value);
  return input;
}
