/**
 * The Fate Chart dialog's content: a form built from the bridge's `chart_catalog` (the named
 * questions with their guidance and modifiers, the ranks, the odds when the world allows them),
 * and the request read back from it. Pure DOM building on an injected document: every string from
 * the bridge goes in as text, never as HTML.
 */

import { VISIBILITIES } from "../../logic/cards.js";
import { MAX_SHIFT } from "./chart.js";

/** The dialog's CSS class. */
export const CHART_DIALOG_CLASS = "fate-bridge-mythic-chart";

/** The datalist of ranks the two rank fields suggest. */
const RANKS_LIST_ID = "fate-bridge-mythic-ranks";

/**
 * @typedef {{named: string, question: string, acting_rank: string, difficulty_rank: string,
 *   acting_shift: number, difficulty_shift: number, modifiers: Record<string, number>, odds: string,
 *   visibility: string}} ChartForm the dialog's values (`named` / `odds` "" for none)
 */

/**
 * @param {string} [visibility] the roll mode chosen at first (the user's own, from foundry.js rollMode)
 * @returns {ChartForm} an empty form
 */
export function emptyChartForm(visibility = "public") {
  return { named: "", question: "", acting_rank: "", difficulty_rank: "", acting_shift: 0, difficulty_shift: 0,
    modifiers: {}, odds: "", visibility };
}

/**
 * Build the form.
 *
 * @param {Document} doc
 * @param {{catalog: object, form: ChartForm}} view the bridge's `chart_catalog` and the values shown
 * @param {(key: string, data?: object) => string} t localize
 * @param {{onNamedChange(form: ChartForm): void, onAsk(form: ChartForm): void}} handlers called with
 *   the form's values when the named question changes (re-render with its modifiers) and on submit
 * @returns {HTMLFormElement}
 */
export function renderChartDialog(doc, { catalog, form }, t, handlers) {
  const el = (tag, props = {}, children = []) => {
    const node = doc.createElement(tag);
    for (const [key, value] of Object.entries(props)) {
      if (key === "text") node.textContent = value;
      else if (key === "className") node.className = value;
      else node.setAttribute(key, String(value));
    }
    node.append(...children);
    return node;
  };
  const field = (label, control) => el("div", { className: "form-group" }, [el("label", { text: label }), control]);
  const option = (value, label, selected) => {
    const node = el("option", { value, text: label });
    node.selected = selected;
    return node;
  };
  const shiftInput = (name, value) => el("input", { type: "number", name, value, min: -MAX_SHIFT, max: MAX_SHIFT, step: 1 });

  const named = catalog.questions.find((q) => q.key === form.named) ?? null;
  const root = el("form", { className: CHART_DIALOG_CLASS });

  root.append(field(t("FATE_BRIDGE.Mythic.Dialog.Named"), el("select", { name: "named" }, [
    option("", t("FATE_BRIDGE.Mythic.Dialog.FreeQuestion"), !named),
    ...catalog.questions.map((q) => option(q.key, q.question, q.key === named?.key)),
  ])));
  root.append(field(t("FATE_BRIDGE.Mythic.Dialog.Question"), el("input", { type: "text", name: "question", value: form.question, maxlength: 256 })));

  if (catalog.odds_questions) {
    root.append(field(t("FATE_BRIDGE.Mythic.Dialog.Odds", { chaos: catalog.chaos_factor }), el("select", { name: "odds" }, [
      option("", t("FATE_BRIDGE.Mythic.Dialog.ByRanks"), form.odds === ""),
      ...catalog.odds.map((odds) => option(odds, odds, odds === form.odds)),
    ])));
  }

  root.append(el("datalist", { id: RANKS_LIST_ID }, catalog.ranks.map((rank) => el("option", { value: rank }))));
  const rankField = (name, labelKey, shiftName, shiftKey, guidance) => el("fieldset", { className: `chart-rank ${name}` }, [
    field(t(labelKey), el("input", { type: "text", name, value: form[name], list: RANKS_LIST_ID, maxlength: 32 })),
    field(t(shiftKey), shiftInput(shiftName, form[shiftName])),
    ...(guidance ? [el("p", { className: "hint guidance", text: guidance })] : []),
  ]);
  root.append(rankField("acting_rank", "FATE_BRIDGE.Mythic.Dialog.Acting", "acting_shift", "FATE_BRIDGE.Mythic.Dialog.ActingShift", named?.acting_guidance));
  root.append(rankField("difficulty_rank", "FATE_BRIDGE.Mythic.Dialog.Difficulty", "difficulty_shift", "FATE_BRIDGE.Mythic.Dialog.DifficultyShift", named?.difficulty_guidance));

  if (named) {
    const notes = [];
    if (named.note) notes.push(el("p", { className: "hint note", text: named.note }));
    if (named.acting_base_shift) {
      notes.push(el("p", { className: "hint built-in", text: t("FATE_BRIDGE.Mythic.Dialog.BuiltIn", { shift: signed(named.acting_base_shift) }) }));
    }
    const modifiers = named.modifiers.map((m) => {
      const taken = form.modifiers[m.key] ?? 0;
      const control = m.max_times === 1
        ? el("input", { type: "checkbox", name: `modifier.${m.key}` })
        : el("input", { type: "number", name: `modifier.${m.key}`, value: taken, min: 0, max: m.max_times, step: 1 });
      if (m.max_times === 1) control.checked = taken > 0;
      const rank = m.target === "acting" ? "AR" : "DR";
      return field(`${m.label} (${signed(m.shift)} ${rank})`, control);
    });
    root.append(el("fieldset", { className: "chart-modifiers" }, [
      el("legend", { text: t("FATE_BRIDGE.Mythic.Dialog.Modifiers") }), ...notes, ...modifiers,
    ]));
  }

  root.append(field(t("FATE_BRIDGE.Visibility.Label"), el("select", { name: "visibility" },
    VISIBILITIES.map((v) => option(v, t(`FATE_BRIDGE.Visibility.${v}`), v === form.visibility)))));
  root.append(el("footer", { className: "form-footer" }, [el("button", { type: "submit", text: t("FATE_BRIDGE.Mythic.Dialog.Ask") })]));

  root.querySelector("select[name=named]").addEventListener("change", () => handlers.onNamedChange({ ...readChartForm(root), modifiers: {} }));
  root.addEventListener("submit", (event) => {
    event.preventDefault();
    handlers.onAsk(readChartForm(root));
  });
  return root;
}

/** `+1RS`, `-2RS`. */
function signed(shift) {
  return `${shift > 0 ? "+" : ""}${shift}RS`;
}

/**
 * The values of a rendered form.
 *
 * @param {HTMLFormElement} root what renderChartDialog built
 * @returns {ChartForm}
 */
export function readChartForm(root) {
  const value = (name) => root.querySelector(`[name="${name}"]`)?.value ?? "";
  const whole = (name) => {
    const number = Number.parseInt(value(name), 10);
    return Number.isFinite(number) ? number : 0;
  };
  const modifiers = {};
  for (const input of root.querySelectorAll("[name^='modifier.']")) {
    const times = input.type === "checkbox" ? Number(input.checked) : Number.parseInt(input.value, 10) || 0;
    if (times > 0) modifiers[input.name.slice("modifier.".length)] = times;
  }
  return {
    named: value("named"),
    question: value("question").trim(),
    acting_rank: value("acting_rank").trim(),
    difficulty_rank: value("difficulty_rank").trim(),
    acting_shift: whole("acting_shift"),
    difficulty_shift: whole("difficulty_shift"),
    modifiers,
    odds: value("odds"),
    visibility: value("visibility") || "public",
  };
}

/**
 * The request a form asks, or why it cannot be asked yet.
 *
 * @param {ChartForm} form
 * @returns {{ok: true, request: import("./chart.js").ChartRequest} | {ok: false, error: "no_rank"}}
 *   an odds question when odds are chosen, else a question by ranks (both ranks needed)
 */
export function chartRequestOf(form) {
  const question = form.question || null;
  if (form.odds) return { ok: true, request: { kind: "odds", odds: form.odds, question, visibility: form.visibility } };
  if (!form.acting_rank || !form.difficulty_rank) return { ok: false, error: "no_rank" };
  return {
    ok: true,
    request: {
      kind: "question",
      acting_rank: form.acting_rank,
      difficulty_rank: form.difficulty_rank,
      acting_shift: form.acting_shift,
      difficulty_shift: form.difficulty_shift,
      named: form.named || null,
      modifiers: form.named ? Object.entries(form.modifiers).map(([key, times]) => ({ key, times })) : [],
      question,
      visibility: form.visibility,
    },
  };
}
