/**
 * The Fate Chart (ruleset `mythic`, docs/protocol.md "mythic: the Fate Chart"): the `/fatechart`
 * command's parser and the bridge messages the active GM's client sends for a relayed request
 * (who sees the answer's card: logic/cards.js cardAudience). Pure: no Foundry globals.
 *
 * The bridge owns the chart: rank names, odds and named question keys are sent as typed and the
 * bridge refuses what it cannot read (`bad_message` naming the field), so no table lives here.
 */

import { BridgeError } from "../../logic/errors.js";
import { visibilityWord } from "../../logic/cards.js";

/** The chat command. */
export const CHART_COMMAND = "fatechart";

/** The bridge's bound on a free rank shift (two lengths of the 13-rank ladder, M4). */
export const MAX_SHIFT = 26;

/** Chaos Factor bounds (M6). */
export const CHAOS_MIN = 1;
export const CHAOS_MAX = 9;

/** `+1dr`, `-2 AR`, `+1RS to DR`, `+1rsdr`: a signed number of rank shifts to one rank. */
const SHIFT = /(^|\s)([+-]\d{1,3})\s*(?:rs)?\s*(?:to\s+)?(ar|dr)(?=\s|$)/gi;
/** A quoted question: straight or curly double quotes. */
const QUOTED = /["“”]([^"“”]*)["“”]/;
/** `ACTING vs DIFFICULTY` (also `vs.` and `versus`). */
const VERSUS = /(?:^|\s+)(?:vs\.?|versus)(?:\s+|$)/i;
/** A named question's key as the bridge spells it (`act_next`, `hit`). */
const NAMED_KEY = /^[a-z][a-z_]{0,63}$/;

/**
 * @typedef {{kind: "question", acting_rank: string, difficulty_rank: string, acting_shift: number,
 *   difficulty_shift: number, named: string|null, modifiers: Array<{key: string, times: number}>,
 *   question: string|null, visibility: string}} ChartQuestionRequest
 * @typedef {{kind: "odds", odds: string, question: string|null, visibility: string}} ChartOddsRequest
 * @typedef {{kind: "settings", odds_questions?: boolean, chaos_factor?: number}} ChartSettingsRequest
 * @typedef {ChartQuestionRequest|ChartOddsRequest} ChartRequest
 */

/**
 * @typedef {{ok: true, kind: "dialog"|"help"} | {ok: true, kind: "ask", request: ChartRequest}
 *   | {ok: true, kind: "settings", request: ChartSettingsRequest}
 *   | {ok: false, error: string, data: object}} ParsedCommand
 *   `error` is a key under `FATE_BRIDGE.Mythic.Error.` (lang/en.json), `data` its format data
 */

/** @returns {{ok: false, error: string, data: object}} */
const fail = (error, data = {}) => ({ ok: false, error, data });

/**
 * Read the arguments of `/fatechart` (what follows the command name).
 *
 * - `` (nothing): open the dialog; `help`: show the usage;
 * - `[named:] ACTING vs DIFFICULTY [+1dr -2ar ...] ["question"] [public|gm|blind|self]`;
 * - `odds ODDS ["question"] [mode]`: an odds question (M6);
 * - `odds on|off`, `chaos 1..9`: the GM's Fate Chart settings.
 *
 * The roll mode word (the wire's `public|gm|blind|self` or Foundry's `publicroll|gmroll|...`)
 * wins; without one the question takes `visibility` (the asker's roll mode).
 *
 * @param {string} args the command's argument text
 * @param {{visibility?: string}} [defaults] `visibility` when no mode is typed (`public` by default)
 * @returns {ParsedCommand} errors: `unclosed_quote`, `two_modes`, `bad_shift` {token},
 *   `shift_range` {shift}, `bad_named` {named}, `no_vs`, `no_rank`, `no_odds`, `bad_chaos` {value}
 */
export function parseChartCommand(args, { visibility: defaultVisibility = "public" } = {}) {
  let text = String(args ?? "").trim();
  if (text === "") return { ok: true, kind: "dialog" };
  if (/^help$/i.test(text)) return { ok: true, kind: "help" };

  const setting = /^(odds|chaos)\s+(\S+)$/i.exec(text);
  if (setting && /^chaos$/i.test(setting[1])) return parseChaos(setting[2]);
  if (setting && /^(on|off)$/i.test(setting[2])) {
    return { ok: true, kind: "settings", request: { kind: "settings", odds_questions: /^on$/i.test(setting[2]) } };
  }

  let question = null;
  const quoted = QUOTED.exec(text);
  if (quoted) {
    question = quoted[1].trim() || null;
    text = `${text.slice(0, quoted.index)} ${text.slice(quoted.index + quoted[0].length)}`;
  }
  if (/["“”]/.test(text)) return fail("unclosed_quote");

  const words = text.split(/\s+/).filter(Boolean);
  const modes = words.filter((word) => visibilityWord(word) !== null);
  if (modes.length > 1) return fail("two_modes");
  const visibility = modes.length ? visibilityWord(modes[0]) : defaultVisibility;
  text = words.filter((word) => !modes.includes(word)).join(" ");

  if (/^odds(\s|$)/i.test(text)) {
    const odds = text.slice(4).trim();
    return odds ? { ok: true, kind: "ask", request: { kind: "odds", odds, question, visibility } } : fail("no_odds");
  }
  return parseRanks(text, question, visibility);
}

/** `chaos N`: the GM sets the Chaos Factor. */
function parseChaos(value) {
  const factor = /^\d$/.test(value) ? Number(value) : NaN;
  if (!(factor >= CHAOS_MIN && factor <= CHAOS_MAX)) return fail("bad_chaos", { value });
  return { ok: true, kind: "settings", request: { kind: "settings", chaos_factor: factor } };
}

/** `[named:] ACTING vs DIFFICULTY [shifts]` once the question and mode are taken out. */
function parseRanks(text, question, visibility) {
  let named = null;
  const prefix = /^([^\s:]+):\s*/.exec(text);
  if (prefix) {
    named = prefix[1].toLowerCase();
    if (!NAMED_KEY.test(named)) return fail("bad_named", { named: prefix[1] });
    text = text.slice(prefix[0].length);
  }
  const shifts = { ar: 0, dr: 0 };
  text = text.replace(SHIFT, (_all, space, amount, rank) => {
    shifts[rank.toLowerCase()] += Number(amount);
    return space;
  });
  const stray = text.split(/\s+/).find((word) => /^[+-]\d/.test(word));
  if (stray) return fail("bad_shift", { token: stray });
  for (const shift of [shifts.ar, shifts.dr]) {
    if (Math.abs(shift) > MAX_SHIFT) return fail("shift_range", { shift });
  }
  const sides = text.trim().split(VERSUS);
  if (sides.length !== 2) return fail("no_vs");
  const [acting, difficulty] = sides.map((side) => side.trim());
  if (!acting || !difficulty) return fail("no_rank");
  return {
    ok: true,
    kind: "ask",
    request: {
      kind: "question",
      acting_rank: acting,
      difficulty_rank: difficulty,
      acting_shift: shifts.ar,
      difficulty_shift: shifts.dr,
      named,
      modifiers: [],
      question,
      visibility,
    },
  };
}

/** `value` when it is a non-empty string, else null. */
const nonEmpty = (value) => (typeof value === "string" && value !== "" ? value : null);
/** `value` when it is an integer, else 0 (the bridge refuses what is out of its bounds). */
const integer = (value) => (Number.isInteger(value) ? value : 0);

/**
 * The bridge message for a relayed request, on the active GM's client. Only the request's own
 * fields are copied; who asked comes from Foundry (`userId` is the relay's sender id).
 *
 * @param {ChartRequest|ChartSettingsRequest} request what the asker's client sent
 * @param {{eventId: string, userId: string, userName?: string|null, isGM: boolean,
 *   actorId?: string|null, actorName?: string|null}} who the event id and the asker
 * @returns {object} a `chart_question`, `chart_odds_question` or `chart_settings` message
 * @throws {BridgeError} `bad_message` for a request of no known kind
 */
export function chartMessage(request, { eventId, userId, userName = null, isGM, actorId = null, actorName = null }) {
  const asker = { user_id: userId, user_name: userName ?? undefined, actor_id: actorId ?? undefined, actor_name: actorName ?? undefined };
  const drop = (message) => Object.fromEntries(Object.entries(message).filter(([, value]) => value !== undefined && value !== null));
  switch (request?.kind) {
    case "question":
      return drop({
        type: "chart_question", v: 1, event_id: eventId,
        acting_rank: String(request.acting_rank ?? ""),
        difficulty_rank: String(request.difficulty_rank ?? ""),
        acting_shift: integer(request.acting_shift),
        difficulty_shift: integer(request.difficulty_shift),
        named: nonEmpty(request.named),
        modifiers: Array.isArray(request.modifiers)
          ? request.modifiers.map((m) => ({ key: String(m?.key ?? ""), times: integer(m?.times) || 1 }))
          : [],
        question: nonEmpty(request.question),
        visibility: nonEmpty(request.visibility) ?? "public",
        ...asker,
      });
    case "odds":
      return drop({
        type: "chart_odds_question", v: 1, event_id: eventId, odds: String(request.odds ?? ""),
        question: nonEmpty(request.question), visibility: nonEmpty(request.visibility) ?? "public", ...asker,
      });
    case "settings":
      return drop({
        type: "chart_settings", v: 1, event_id: eventId, user_id: userId, user_is_gm: Boolean(isGM),
        odds_questions: typeof request.odds_questions === "boolean" ? request.odds_questions : undefined,
        chaos_factor: Number.isInteger(request.chaos_factor) ? request.chaos_factor : undefined,
      });
    default:
      throw new BridgeError("bad_message", `not a Fate Chart request: ${JSON.stringify(request?.kind)}`, { field: "kind" });
  }
}
