/**
 * Turn a plain snapshot of a SoHL actor into the `actor` part of `test_rolled`
 * (bridge/rulesets/sohl/wire.py SohlActor). The snapshot is made by scripts/foundry.js; this file only reads it.
 */

/** Shortcode of SoHL's Aura attribute. */
export const AURA_CODE = "aur";

/** The module's flag scope, and the Fate Mystery flag holding the bridge's last applied spend. */
export const MODULE_FLAG_SCOPE = "fate-bridge";
export const SPEND_SEQ_FLAG = "spend_seq";

/** SoHL's Aural Shock: a `trauma` item of this subType, or this status id (any letter case). */
export const AURAL_SHOCK = "auralshock";

/** SoHL derives an attribute's Mastery Level as its score times this, when no runtime value is at hand. */
const ATTRIBUTE_ML_PER_SCORE = 5;

/**
 * SoHL's runtime Mastery Level of an item (its data model's `logic.masteryLevel`, prepared, not
 * stored), read into the snapshot's `masteryLevel` (scripts/foundry.js actorSnapshot `runtime`).
 */
export const ITEM_RUNTIME = Object.freeze({
  "masteryLevel.effective": "logic.masteryLevel.effective",
  "masteryLevel.disabled": "logic.masteryLevel.disabled",
});

/**
 * @typedef {object} ActorSnapshot
 * @property {string} id
 * @property {string} name
 * @property {boolean} hasPlayerOwner Foundry's `actor.hasPlayerOwner`
 * @property {string[]} ownerUserIds users with OWNER permission, GMs included
 * @property {string[]} [statuses] the actor's active status ids
 * @property {Array<{id: string, name: string, type: string, system: object,
 *   masteryLevel?: {effective?: number, disabled?: string|boolean}}>} items embedded items as
 *   plain data; `masteryLevel` is SoHL's runtime mastery level of the item when available
 */

/**
 * Build the wire `actor`.
 *
 * @param {ActorSnapshot} snapshot
 * @returns {{actor_id: string, name: string, player_owned: boolean, owner_user_ids: string[],
 *   aura: {eml: number, disabled: boolean}|null, aural_shock: boolean,
 *   fate_points: Array<{point_id: string, name: string, skill_code: string|null, charges: number|null}>}}
 */
export function buildActor(snapshot) {
  const items = snapshot.items ?? [];
  return {
    actor_id: snapshot.id,
    name: snapshot.name,
    player_owned: Boolean(snapshot.hasPlayerOwner),
    owner_user_ids: [...new Set(snapshot.ownerUserIds ?? [])],
    aura: auraOf(items),
    aural_shock: hasAuralShock(items, snapshot.statuses ?? []),
    fate_points: items.filter(isFatePoint).map(fatePoint),
  };
}

/**
 * The Aura attribute's EML and whether it is disabled, or null when the actor has none.
 * EML: SoHL's runtime effective mastery level; without it, the score times 5.
 *
 * @param {ActorSnapshot["items"]} items
 * @returns {{eml: number, disabled: boolean}|null}
 */
export function auraOf(items) {
  const aura = items.find((item) => item.type === "attribute" && item.system?.shortcode === AURA_CODE);
  if (!aura) return null;
  const runtime = aura.masteryLevel?.effective;
  const score = aura.system?.scoreBase;
  const eml = Number.isFinite(runtime) ? runtime : Number.isFinite(score) ? score * ATTRIBUTE_ML_PER_SCORE : 0;
  return { eml: Math.trunc(eml), disabled: Boolean(aura.masteryLevel?.disabled) };
}

/**
 * @param {ActorSnapshot["items"]} items
 * @param {string[]} statuses
 * @returns {boolean} true when an Aural Shock trauma or status is on the actor
 */
export function hasAuralShock(items, statuses) {
  return (
    items.some((item) => item.type === "trauma" && item.system?.subType === AURAL_SHOCK) ||
    statuses.some((status) => String(status).toLowerCase() === AURAL_SHOCK)
  );
}

/**
 * A Fate Point source is a `mystery` item with subType `fate` (a Mystical Ability named
 * "Fate" is not one).
 *
 * @param {{type: string, system?: object}} item
 * @returns {boolean}
 */
export function isFatePoint(item) {
  return item.type === "mystery" && item.system?.subType === "fate";
}

/**
 * @param {{id: string, name: string, system: object, moduleFlags?: object}} item a Fate Mystery
 * @returns {{point_id: string, name: string, skill_code: string|null, charges: number|null,
 *   spend_seq: number|null}} `skill_code` null = general point; `charges` null = unlimited (max
 *   or value null, rule S7); `spend_seq` the bridge's number of the last spend applied to the item
 *   (its flag `fate-bridge.spend_seq`), null when none
 */
function fatePoint(item) {
  const charges = item.system?.charges ?? {};
  const unlimited = charges.max === null || charges.max === undefined || charges.value === null || charges.value === undefined;
  const spendSeq = item.moduleFlags?.[SPEND_SEQ_FLAG];
  return {
    point_id: item.id,
    name: item.name,
    skill_code: item.system?.assocSkillCode || null,
    charges: unlimited ? null : Math.max(0, Math.trunc(charges.value)),
    spend_seq: Number.isSafeInteger(spendSeq) && spendSeq >= 0 ? spendSeq : null,
  };
}
