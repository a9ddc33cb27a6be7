/**
 * Read a Song of Heroic Lands Success Test chat card.
 *
 * SoHL writes no flags on chat messages: the test result lives, HTML-escaped JSON, in the
 * `data-scope` attribute of the GM edit pencil (`a.edit-action[data-action=resultEdit]`) and,
 * when SoHL offers Fate, of its own Fate button (`button[data-action=fateTest]`). Both carry
 * `{priorTestResult: {...}}`. We read `message.content` (never the rendered DOM, which SoHL
 * trims for some viewers) with an injected DOMParser, so this file runs in Node.
 */

/** SoHL item type of the tested item -> wire `test.kind`. Other types are not Success Tests we grade. */
export const KIND_BY_ITEM_TYPE = Object.freeze({
  skill: "skill",
  attribute: "attribute",
  mysticalability: "mystical",
});

/** SoHL names a Fate Test's modifier type `<kind>-<name>-fate-test`. */
const FATE_TEST_TYPE_SUFFIX = "-fate-test";

/** Why a SoHL card could not be read (the `reason` of a failed read). */
export const CARD_ERRORS = Object.freeze({
  NO_SCOPE: "no_scope",
  BAD_JSON: "bad_json",
  NOT_A_TEST: "not_a_test",
  NO_ITEM: "no_item",
  UNSUPPORTED_ITEM: "unsupported_item",
  NO_TARGET: "no_target",
});

const SCOPE_SELECTORS = ['button[data-action="fateTest"]', 'a.edit-action[data-action="resultEdit"]'];
const UUID_ATTRIBUTES = ["data-handler-uuid", "data-action-handler-uuid"];

/**
 * Parse a chat message's content as a SoHL test card.
 *
 * @param {string} content the ChatMessage's `content` HTML
 * @param {{parseFromString(text: string, type: string): Document}} domParser a DOMParser
 * @returns {null | {ok: false, reason: string, detail?: string} | {ok: true, card: {
 *   result: object, target: number|null, actorUuid: string|null, itemId: string|null,
 *   hasFateButton: boolean, testKey: string|null}}}
 *   null when the content is not a SoHL chat card at all; `ok: false` with a CARD_ERRORS
 *   reason when it is one but holds no readable test; otherwise the decoded `priorTestResult`,
 *   the card's rendered `Target:` value (null when absent), the tested item's address (a GM's
 *   edit repost names only the actor: `itemId` null) and the test's identity (see testKey).
 */
export function readSohlCard(content, domParser) {
  if (typeof content !== "string" || !content.includes("sohl")) return null;
  const doc = domParser.parseFromString(content, "text/html");
  const root = doc.querySelector("div.sohl.chat-card");
  if (!root) return null;

  const fateButton = root.querySelector(SCOPE_SELECTORS[0]);
  const holder = SCOPE_SELECTORS.map((selector) => root.querySelector(selector)).find((el) => el?.hasAttribute("data-scope"));
  if (!holder) return { ok: false, reason: CARD_ERRORS.NO_SCOPE };

  let scope;
  try {
    scope = JSON.parse(holder.getAttribute("data-scope"));
  } catch (error) {
    return { ok: false, reason: CARD_ERRORS.BAD_JSON, detail: error.message };
  }
  const result = scope?.priorTestResult;
  if (!result || typeof result !== "object" || !Array.isArray(result.roll?.rolls)) {
    return { ok: false, reason: CARD_ERRORS.NOT_A_TEST };
  }

  const uuid = UUID_ATTRIBUTES.map((name) => holder.getAttribute(name)).find(Boolean) ?? null;
  const { actorUuid, itemId } = splitItemUuid(uuid);
  // A repost (the GM's edit, SoHL's own Fate) names the actor alone, on the card and the handler.
  const cardActor = root.getAttribute("data-actor-uuid") || (uuid && !itemId ? uuid : null);
  const actor = actorUuid ?? cardActor ?? (result.speaker?.actor ? `Actor.${result.speaker.actor}` : null);
  return {
    ok: true,
    card: {
      result,
      target: renderedTarget(root),
      actorUuid: actor,
      itemId,
      hasFateButton: Boolean(fateButton),
      testKey: testKey(result, actor),
    },
  };
}

/**
 * Recognise SoHL's own Fate card (S11): what SoHL 0.8.x posts after its own Fate Test
 * (templates/chat/fate-roll-card.hbs, posted by `postFateResultCard` in
 * src/document/item/logic/fate-host.ts). Read from its structure, never its (translated) text:
 * a SoHL chat card naming its actor (`data-actor-uuid`) whose content shows a mastery level's
 * adjustments (`.adjustment`, the Fate ML's) and that carries no `data-scope` and no action (a
 * Success Test card has both; the Skill Development Roll card, sdr-card.hbs, the one other card
 * of the same shape, shows no adjustments).
 *
 * @param {string} content the ChatMessage's `content` HTML
 * @param {{parseFromString(text: string, type: string): Document}} domParser a DOMParser
 * @returns {{actorUuid: string} | null} the actor whose Fate SoHL spent, or null for any other content
 */
export function readSohlFateCard(content, domParser) {
  if (typeof content !== "string" || !content.includes("sohl")) return null;
  const root = domParser.parseFromString(content, "text/html").querySelector("div.sohl.chat-card[data-actor-uuid]");
  if (!root || root.querySelector("[data-scope], [data-action]")) return null;
  if (!root.querySelector(".card-content .adjustment") || !root.querySelector("footer.card-footer")) return null;
  const actorUuid = root.getAttribute("data-actor-uuid");
  return actorUuid ? { actorUuid } : null;
}

/**
 * What identifies one SoHL test across its chat messages. SoHL's edit action (the GM's pencil)
 * and its own Fate flow post a new ChatMessage for the same test, with no flag or id linking it
 * to the first (samples/sohl/captured: `*-edit-original` / `*-edit-repost`, `fate-original-test`
 * / `fate-reposted-test`); the speaker and the item address may be gone and the deltas, the
 * level and the roll mode may change. What stays: the die rolled, the title, the Mastery Level's
 * `baseValue` and the `testType`, and the actor.
 *
 * @param {object} result the decoded `priorTestResult`
 * @param {string|null} actorUuid the tested actor's UUID
 * @returns {string|null} a key equal for every message of one test, or null when the card lacks
 *   one of those parts
 */
export function testKey(result, actorUuid) {
  const die = result?.roll?.rolls?.[0];
  const base = result?.masteryLevelModifier?.baseValue;
  const { title, testType } = result ?? {};
  if (!actorUuid || !Number.isInteger(die) || !Number.isFinite(base) || typeof title !== "string" || typeof testType !== "string") return null;
  return JSON.stringify([actorUuid, testType, title, base, die]);
}

/**
 * Split an embedded item's UUID (`Actor.a.Item.i`, or `Scene.s.Token.t.Actor.a.Item.i` for a
 * synthetic token actor) into the owning actor's UUID and the item id.
 *
 * @param {string|null} uuid
 * @returns {{actorUuid: string|null, itemId: string|null}}
 */
export function splitItemUuid(uuid) {
  const match = typeof uuid === "string" ? /^(.*)\.Item\.([^.]+)$/.exec(uuid) : null;
  return match ? { actorUuid: match[1], itemId: match[2] } : { actorUuid: null, itemId: null };
}

/**
 * The number the card shows after its `Target:` label, or null.
 *
 * @param {Element} root the card's root element
 * @returns {number|null}
 */
function renderedTarget(root) {
  for (const row of root.querySelectorAll(".card-content")) {
    const label = row.querySelector(".label")?.textContent.trim();
    if (label && /^target\b/i.test(label)) {
      const value = Number.parseInt(row.querySelector(".value")?.textContent.trim() ?? "", 10);
      return Number.isFinite(value) ? value : null;
    }
  }
  return null;
}

/**
 * The target from SoHL's MasteryLevelModifier: `baseValue` with each delta applied in order
 * (add, multiply, upgrade = at least, downgrade = at most, override), held to
 * minTarget..maxTarget. A `custom` delta cannot be evaluated here: null.
 *
 * @param {{baseValue?: number, deltas?: Array<{op: string, value: number}>, minTarget?: number,
 *   maxTarget?: number}} modifier
 * @returns {number|null}
 */
export function targetFromModifier(modifier) {
  if (!modifier || !Number.isFinite(modifier.baseValue)) return null;
  let value = modifier.baseValue;
  for (const delta of modifier.deltas ?? []) {
    const amount = Number(delta?.value);
    if (!Number.isFinite(amount)) return null;
    switch (delta.op) {
      case "add": value += amount; break;
      case "multiply": value *= amount; break;
      case "upgrade": value = Math.max(value, amount); break;
      case "downgrade": value = Math.min(value, amount); break;
      case "override": value = amount; break;
      default: return null;
    }
  }
  const min = Number.isFinite(modifier.minTarget) ? modifier.minTarget : -Infinity;
  const max = Number.isFinite(modifier.maxTarget) ? modifier.maxTarget : Infinity;
  return Math.round(Math.min(max, Math.max(min, value)));
}

/**
 * Build the `test` part of `test_rolled` from a read card and the tested item.
 *
 * @param {{result: object, target: number|null, itemId: string|null}} card from readSohlCard
 * @param {{id: string, name: string, type: string, system: object}|null} item the tested item
 *   as plain data (null when it no longer exists)
 * @returns {{ok: true, test: object} | {ok: false, reason: string}}
 *   `test` follows bridge/rulesets/sohl/wire.py SohlTest: kind, code, name, eml, roll, level_mod, basis (always
 *   empty: the bridge derives it from `skill_base_formula`, rule S6), skill_base_formula (skills
 *   only), basic, reported_level, item_id.
 */
export function buildTest(card, item) {
  if (!item) return { ok: false, reason: CARD_ERRORS.NO_ITEM };
  const { result } = card;
  const modifier = result.masteryLevelModifier ?? {};
  const isFateTest = String(modifier.type ?? "").endsWith(FATE_TEST_TYPE_SUFFIX);
  const kind = isFateTest ? "fate" : ownValue(KIND_BY_ITEM_TYPE, item.type);
  if (!kind) return { ok: false, reason: CARD_ERRORS.UNSUPPORTED_ITEM };

  const eml = card.target ?? targetFromModifier(modifier);
  if (eml === null) return { ok: false, reason: CARD_ERRORS.NO_TARGET };
  const roll = result.roll.rolls[0];
  if (!Number.isInteger(roll)) return { ok: false, reason: CARD_ERRORS.NOT_A_TEST };

  const test = {
    kind,
    code: String(item.system?.shortcode ?? ""),
    name: item.name,
    eml,
    roll,
    level_mod: Number.isInteger(modifier.successLevelMod) ? modifier.successLevelMod : 0,
    basis: [],
    basic: false,
    item_id: item.id,
  };
  const formula = item.system?.skillBaseFormula;
  if (item.type === "skill" && typeof formula === "string" && formula.trim()) test.skill_base_formula = formula;
  if (Number.isInteger(result.successLevel)) test.reported_level = result.successLevel;
  // No visibility here: who saw the test is the chat message's (cards.js visibilityOfMessage).
  return { ok: true, test };
}

/** `table[key]` for the table's own keys only (so "constructor" is not a kind). */
function ownValue(table, key) {
  return typeof key === "string" && Object.hasOwn(table, key) ? table[key] : undefined;
}
