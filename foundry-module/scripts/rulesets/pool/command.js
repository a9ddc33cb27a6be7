/**
 * The `/pool` chat command of the pool ruleset (docs/protocol.md "pool"): parse what a user typed,
 * pick the ledger character it is for, and build the bridge message. Pure: plain data in and out.
 *
 * Grammar (words in any case, numbers as typed):
 *   /pool <modifier> | score <n>  task <1-5> [tier <n>] [need <n>] [adv]... [dis]... [fate <n>] [MODE] [as <name>] [for <label>]
 *   /pool save <body|mind|sense|heart|cunning> <score> fate <score> dc <n> | effect <1-5> [bonus <n>] [adv]... [dis]... [MODE] [as <name>] [for <label>]
 *   /pool save fate <score> dc <n> | effect <1-5> ...      (a Fate save: the Fate die once)
 *   /pool fate      your characters' Fate          /pool ledger    the GM's ledger panel
 * `tier` is the character's Tier as the player believes it: the ledger's Tier is used, and a
 * different one is refused (`tier_mismatch`) rather than silently ignored. MODE (`public`, `gm`,
 * `blind`, `self`, or Foundry's `gmroll` ...) is who sees the card, before `as` and `for` (whose
 * text runs to the end); without it, the roll mode the caller passes.
 */

import { visibilityWord } from "../../logic/cards.js";

export const SAVES = Object.freeze(["body", "mind", "sense", "heart", "cunning", "fate"]);
const INTEGER = /^[+-]?\d{1,2}$/;
const TASK_TIERS = Object.freeze({ min: 1, max: 5 });
/** Keywords that take one number. */
const NUMBER_WORDS = new Set(["task", "tier", "need", "fate", "score", "dc", "effect", "bonus"]);
/** What `adv` / `dis` count (P13: any number is one source on the bridge). */
const SOURCE_WORDS = Object.freeze({ adv: "advantage_sources", advantage: "advantage_sources", dis: "disadvantage_sources", disadvantage: "disadvantage_sources" });
/** The bridge's wire limit on names and labels. */
const MAX_NAME = 256;

/**
 * @typedef {{ok: true, command: "help"|"fate"|"ledger"} |
 *   {ok: true, command: "check"|"save", fields: object, tier: number|null, as: string|null, visibility: string} |
 *   {ok: false, error: string, token: string}} PoolCommand
 *   `fields` are the bridge message's own fields (pool_check / pool_save) without the ids;
 *   `visibility` who sees the card (the pool wire has none: the module alone applies it);
 *   `error` is a key under `FATE_BRIDGE.Pool.Parse.` naming what is wrong, `token` the word
 */

/**
 * @param {string} args the text after `/pool`
 * @param {{visibility?: string}} [defaults] `visibility` when no mode is typed (`public` by default)
 * @returns {PoolCommand}
 */
export function parsePoolCommand(args, { visibility = "public" } = {}) {
  const words = String(args ?? "").trim().split(/\s+/).filter(Boolean);
  const first = words[0]?.toLowerCase();
  if (!first || first === "help") return { ok: true, command: "help" };
  if ((first === "fate" || first === "ledger") && words.length === 1) return { ok: true, command: first };
  const isSave = first === "save";
  const read = readWords(isSave ? words.slice(1) : words, isSave);
  if (!read.ok) return read;
  const command = isSave ? saveCommand(read) : checkCommand(read);
  return command.ok ? { ...command, visibility: read.visibility ?? visibility } : command;
}

/** Split the words into numbers by keyword, sources, the leading values, the mode, `as` and `for`. */
function readWords(words, isSave) {
  const numbers = {};
  const sources = { advantage_sources: 0, disadvantage_sources: 0 };
  const leading = [];
  let as = null;
  let label = null;
  let visibility = null;
  for (let index = 0; index < words.length; index += 1) {
    const word = words[index];
    const key = word.toLowerCase();
    if (key === "for" || key === "as") {
      const stop = key === "as" ? words.findIndex((w, i) => i > index && w.toLowerCase() === "for") : -1;
      const end = stop === -1 ? words.length : stop;
      const text = words.slice(index + 1, end).join(" ").slice(0, MAX_NAME);
      if (!text) return fail("missing_text", word);
      if (key === "as") as = text;
      else label = text;
      index = end - 1;
    } else if (visibilityWord(key)) {
      if (visibility) return fail("twice", word);
      visibility = visibilityWord(key);
    } else if (key in SOURCE_WORDS) {
      sources[SOURCE_WORDS[key]] += 1;
    } else if (NUMBER_WORDS.has(key) && !(isSave && leading.length === 0 && key === "fate")) {
      const value = words[index + 1];
      if (!INTEGER.test(value ?? "")) return fail("number_after", word);
      if (key in numbers) return fail("twice", word);
      numbers[key] = Number(value);
      index += 1;
    } else if (leading.length < 2 && Object.keys(numbers).length === 0) {
      leading.push(word);
    } else {
      return fail("unknown_word", word);
    }
  }
  return { ok: true, numbers, sources, leading, as, label, visibility };
}

function fail(error, token) {
  return { ok: false, error, token: String(token ?? "") };
}

function taskTier(value, word) {
  return Number.isInteger(value) && value >= TASK_TIERS.min && value <= TASK_TIERS.max ? null : fail("task_tier", word);
}

function checkCommand({ numbers, sources, leading, as, label }) {
  const [modifier, extra] = leading;
  if (extra !== undefined) return fail("unknown_word", extra);
  const hasModifier = modifier !== undefined;
  if (hasModifier && !INTEGER.test(modifier)) return fail("unknown_word", modifier);
  if (hasModifier === ("score" in numbers)) return fail("stat", hasModifier ? "score" : "");
  if (!("task" in numbers)) return fail("task_missing", "task");
  const bad = taskTier(numbers.task, "task") ?? ["dc", "effect", "bonus"].map((w) => (w in numbers ? fail("unknown_word", w) : null)).find(Boolean);
  if (bad) return bad;
  if ((numbers.fate ?? 0) < 0 || (numbers.need ?? 1) < 1) return fail("number_after", numbers.fate < 0 ? "fate" : "need");
  const fields = {
    ...(hasModifier ? { stat_modifier: Number(modifier) } : { stat_score: numbers.score }),
    task_tier: numbers.task,
    ...("need" in numbers ? { successes_needed: numbers.need } : {}),
    ...sources,
    fate: numbers.fate ?? 0,
    ...(label ? { label } : {}),
  };
  return { ok: true, command: "check", fields, tier: numbers.tier ?? null, as };
}

function saveCommand({ numbers, sources, leading, as, label }) {
  const [save, score] = leading;
  const name = save?.toLowerCase();
  if (!SAVES.includes(name)) return fail("save_name", save ?? "save");
  if (!INTEGER.test(score ?? "")) return fail("number_after", save);
  const isFateSave = name === "fate";
  if (!isFateSave && !("fate" in numbers)) return fail("fate_score", "fate");
  if (("dc" in numbers) === ("effect" in numbers)) return fail("dc", "dc");
  const bad = ("effect" in numbers ? taskTier(numbers.effect, "effect") : null)
    ?? ["task", "tier", "need", "score"].map((w) => (w in numbers ? fail("unknown_word", w) : null)).find(Boolean)
    ?? (isFateSave && "fate" in numbers ? fail("twice", "fate") : null);
  if (bad) return bad;
  const fields = {
    save: name,
    ...(isFateSave ? { fate_score: Number(score) } : { stat_score: Number(score), fate_score: numbers.fate }),
    ...("dc" in numbers ? { dc: numbers.dc } : { effect_tier: numbers.effect }),
    bonus: numbers.bonus ?? 0,
    ...sources,
    ...(label ? { label } : {}),
  };
  return { ok: true, command: "save", fields, tier: null, as };
}

/**
 * Which ledger character a command is for: the one named with `as` (case-insensitive) among
 * those the user may roll for, or the user's only player character.
 *
 * @param {Array<{character_id: string, name: string, kind: string, owner_user_ids: string[], tier: number}>} entries
 *   the ledger entries the user may see (pool_ledger_query's answer)
 * @param {{as: string|null, tier: number|null}} command
 * @returns {{ok: true, entry: object} | {ok: false, error: "no_character"|"several_characters"|"unknown_character"|"tier_mismatch", name?: string, tier?: number}}
 */
export function pickCharacter(entries, { as, tier }) {
  let entry;
  if (as) {
    entry = entries.find((each) => each.name.toLowerCase() === as.toLowerCase());
    if (!entry) return { ok: false, error: "unknown_character", name: as };
  } else {
    const pcs = entries.filter((each) => each.kind === "pc");
    if (pcs.length !== 1) return { ok: false, error: pcs.length ? "several_characters" : "no_character" };
    [entry] = pcs;
  }
  if (tier !== null && tier !== entry.tier) return { ok: false, error: "tier_mismatch", name: entry.name, tier: entry.tier };
  return { ok: true, entry };
}

/**
 * The bridge message of a parsed check or save, for `entry`, asked by `sender`. Its `visibility`
 * is the command's roll mode (typed, else the asker's own): the roll mode of the card that shows
 * the result, so the bridge sends a `public` one to the stream overlay (docs/protocol.md, pool).
 *
 * @param {{command: "check"|"save", fields: object, visibility?: string}} command
 * @param {{character_id: string}} entry
 * @param {{userId: string, isGM: boolean, userName: string|null}} sender Foundry's sender
 * @param {string} eventId
 * @returns {object} a `pool_check` or `pool_save` message
 */
export function rollMessage(command, entry, sender, eventId) {
  return {
    ...command.fields,
    type: command.command === "check" ? "pool_check" : "pool_save",
    v: 1,
    event_id: eventId,
    character_id: entry.character_id,
    user_id: sender.userId,
    user_is_gm: sender.isGM,
    ...(sender.userName ? { user_name: sender.userName.slice(0, MAX_NAME) } : {}),
    ...(command.visibility ? { visibility: command.visibility } : {}),
  };
}

/**
 * One line per character for its owner: `Aldric: Fate 4 (3 session, 1 earned), Destiny 2, stamina 3`.
 *
 * @param {Array<{name: string, kind: string, fate: number, session_fate: number, earned_fate: number, destiny: number, stamina: number}>} entries
 * @param {(key: string, data?: object) => string} t localize
 * @returns {string}
 */
export function fateSummary(entries, t) {
  if (entries.length === 0) return t("FATE_BRIDGE.Pool.NoCharacters");
  return entries
    .map((entry) => t(entry.kind === "pc" ? "FATE_BRIDGE.Pool.FateLine" : "FATE_BRIDGE.Pool.NoFateLine", {
      name: entry.name, fate: String(entry.fate), session: String(entry.session_fate),
      earned: String(entry.earned_fate), destiny: String(entry.destiny), stamina: String(entry.stamina), kind: entry.kind,
    }))
    .join("; ");
}
