/**
 * d20 rolls in chat for the pool ruleset's "Reroll with Fate" (P7): read a ChatMessage's Roll
 * JSON (`message.rolls`: JSON strings since v12, or Roll objects serialized with `toJSON`) and
 * build the `roll` snapshot of a `pool_reroll`. Pure: plain data in and out.
 *
 * A roll qualifies when its first d20 term is `1d20`, `2d20kh` (advantage) or `2d20kl`
 * (disadvantage) with every result present, and it has no second d20 term (the bridge rerolls
 * one d20 term and keeps the rest of the total). The d20s are sent in roll order, discarded ones
 * included; the bridge keeps the higher or lower by the mode.
 */

const D20_FACES = 20;
/** Keep modifiers: `kh`/`kh1` keep the higher (advantage), `kl`/`kl1` the lower (disadvantage). */
const KEEP_MODES = Object.freeze({ kh: "advantage", kh1: "advantage", kl: "disadvantage", kl1: "disadvantage" });
/** Roll types (dnd5e-style `options.rollType` / `flags.dnd5e.roll.type`) -> the bridge's d20 roll kinds. */
const ROLL_KINDS = Object.freeze({ attack: "attack", save: "save", death: "save", injury: "injury_roll", disruption: "disruption_check" });
const DEFAULT_KIND = "ability_test";
/** The bridge's limits: totals within +-999, labels at most 256 characters. */
const MAX_TOTAL = 999;
const MAX_LABEL = 256;

/**
 * @param {unknown} roll one entry of `message.rolls`: a JSON string or a serialized Roll object
 * @returns {{mode: "normal"|"advantage"|"disadvantage", d20s: number[], total: number, rollType: string|null}|null}
 *   the roll's d20 part, or null when it has none the bridge can reroll
 */
export function readD20Roll(roll) {
  let data = roll;
  if (typeof roll === "string") {
    try {
      data = JSON.parse(roll);
    } catch {
      return null;
    }
  }
  if (!data || typeof data !== "object" || !Array.isArray(data.terms) || !Number.isInteger(data.total)) return null;
  const d20Terms = data.terms.filter((term) => term?.faces === D20_FACES);
  if (d20Terms.length !== 1 || Math.abs(data.total) > MAX_TOTAL) return null;
  const [term] = d20Terms;
  const modifiers = Array.isArray(term.modifiers) ? term.modifiers : [];
  const keep = modifiers.filter((modifier) => modifier in KEEP_MODES);
  const results = Array.isArray(term.results) ? term.results.map((result) => result?.result) : [];
  if (modifiers.length !== keep.length || keep.length > 1 || results.length !== term.number) return null;
  if (!results.every((value) => Number.isInteger(value) && value >= 1 && value <= D20_FACES)) return null;
  const mode = keep.length ? KEEP_MODES[keep[0]] : "normal";
  if (results.length !== (mode === "normal" ? 1 : 2)) return null;
  const rollType = typeof data.options?.rollType === "string" ? data.options.rollType : null;
  return { mode, d20s: results, total: data.total, rollType };
}

/**
 * The `roll` snapshot of a chat message's first reroll-able d20 roll.
 *
 * @param {{rolls: unknown[], speakerActorId: string|null, flavor?: string|null, rollType?: string|null}} message
 *   plain data of the ChatMessage (scripts/foundry.js messageRolls): its rolls, speaker actor id,
 *   flavor and a system's roll type (e.g. dnd5e's `flags.dnd5e.roll.type`)
 * @returns {{character_id: string, kind: string, mode: string, d20s: number[], total: number, label?: string}|null}
 *   null when the message has no speaker actor or no d20 roll the bridge can reroll
 */
export function d20Snapshot({ rolls, speakerActorId, flavor = null, rollType = null }) {
  if (typeof speakerActorId !== "string" || !speakerActorId || !Array.isArray(rolls)) return null;
  for (const roll of rolls) {
    const read = readD20Roll(roll);
    if (!read) continue;
    const type = rollType ?? read.rollType;
    const label = typeof flavor === "string" ? flavor.trim().slice(0, MAX_LABEL) : "";
    return {
      character_id: speakerActorId,
      kind: ROLL_KINDS[type] ?? DEFAULT_KIND,
      mode: read.mode,
      d20s: read.d20s,
      total: read.total,
      ...(label ? { label } : {}),
    };
  }
  return null;
}

/**
 * A `pool_reroll` message.
 *
 * @param {{rollId: string, roll: object|null, visibility?: string}} request the roll id (a ChatMessage
 *   id, or a bridge card's `data-fate-bridge-pool-reroll`), the snapshot (null for a roll the bridge
 *   holds) and who saw the roll (the rolled message's visibility: only `public` reaches the overlay)
 * @param {{userId: string, isGM: boolean, userName: string|null}} sender Foundry's sender
 * @param {string} eventId
 * @returns {object}
 */
export function rerollMessage({ rollId, roll, visibility }, sender, eventId) {
  return {
    type: "pool_reroll",
    v: 1,
    event_id: eventId,
    roll_id: rollId,
    user_id: sender.userId,
    user_is_gm: sender.isGM,
    ...(sender.userName ? { user_name: sender.userName.slice(0, MAX_LABEL) } : {}),
    ...(roll ? { roll } : {}),
    ...(visibility ? { visibility } : {}),
  };
}

/**
 * The dice the bridge rolled for a pool reply, for Dice So Nice (logic/dice.js groups): a check's
 * d6s (`pool_check_rolled.dice[].face`, explosions included), a save's d20s with its stat die and
 * Fate die (`[signed faces, value]`: the size is the faces' absolute value), a reroll's new d20s.
 *
 * @param {{type: string}} reply `pool_check_rolled`, `pool_save_rolled` or `pool_rerolled`
 * @returns {Array<{faces: number, results: number[]}>} empty for any other reply
 */
export function poolDice(reply) {
  const groups = (() => {
    switch (reply?.type) {
      case "pool_check_rolled":
        return [{ faces: 6, results: (reply.dice ?? []).map((die) => die.face) }];
      case "pool_save_rolled":
        return [
          { faces: 20, results: [...(reply.d20s ?? [])] },
          ...[reply.stat_die, reply.fate_die].filter(Array.isArray).map(([faces, value]) => ({ faces: Math.abs(faces), results: [value] })),
        ];
      case "pool_rerolled":
        return [{ faces: 20, results: [...(reply.d20s ?? [])] }];
      default:
        return [];
    }
  })();
  return groups.filter((group) => group.results.length > 0);
}

import { MOST_PHYSICAL } from "../../logic/dice-trust.js";

/** The bridge's faces of a pool d6 and of a d20 (bridge/rulesets/pool/rules.py D6, D20). */
const D6 = 6;
const D20 = 20;

/**
 * The physical dice a pool roll needs that the module can foresee, asked before the
 * request goes out; the bridge names every further die (logic/dice-trust.js withPhysicalDice).
 * - a check: max(stat modifier, 0) + Tier + Fate dice bought d6s (P1/P6): a stat given as a score
 *   counts 0 and an untyped Tier 1 (the world's stat table and the ledger's Tier are the bridge's);
 *   explosions (P2: one more d6 per 6) are asked as the bridge asks for them;
 * - a save: its d20s (two at advantage or disadvantage, P7/P9/P13); the stat and Fate dice (their
 *   faces are in the world's stat table) as the bridge asks for them;
 * - a reroll: the d20s of the roll's mode when its snapshot names it, else one.
 *
 * @param {{command: "check"|"save"|"reroll", fields?: object, tier?: number|null, roll?: {mode?: string}|null}} roll
 * @returns {{faces: number, count: number}}
 */
export function foreseenDice({ command, fields = {}, tier = null, roll = null }) {
  if (command === "check") {
    return { faces: D6, count: Math.min(Math.max(fields.stat_modifier ?? 0, 0) + (tier ?? 1) + (fields.fate ?? 0), MOST_PHYSICAL) };
  }
  const mode = command === "save"
    ? (Boolean(fields.advantage_sources) !== Boolean(fields.disadvantage_sources) ? "advantage" : "normal")
    : roll?.mode;
  return { faces: D20, count: mode === "advantage" || mode === "disadvantage" ? 2 : 1 };
}
