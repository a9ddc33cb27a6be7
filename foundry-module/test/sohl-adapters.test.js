import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import { readSohlCard, buildTest, targetFromModifier, splitItemUuid, CARD_ERRORS } from "../scripts/rulesets/sohl/card.js";
import { buildActor, isFatePoint } from "../scripts/rulesets/sohl/actor.js";
import { sample } from "./helpers/samples.js";
import { archeryCard, basicFolk, basicFolkItems } from "./helpers/sohl-fixtures.js";

const parser = new new JSDOM("").window.DOMParser();
const archeryItem = () => ({ ...sample("04-"), id: "PLACEHOLDERarc01" });

describe("sohl-card: the Archery card of sample 07", () => {
  test("reads the card and builds the test part of test_rolled", () => {
    const read = readSohlCard(archeryCard().message.content, parser);
    assert.equal(read.ok, true);
    assert.equal(read.card.target, 55);
    assert.equal(read.card.actorUuid, "Actor.d1cddnpaqRl0a0Q8");
    assert.equal(read.card.itemId, "PLACEHOLDERarc01");
    assert.equal(read.card.hasFateButton, true);
    const built = buildTest(read.card, archeryItem());
    assert.deepEqual(built, {
      ok: true,
      test: {
        kind: "skill",
        code: "archery",
        name: "Archery",
        eml: 55,
        roll: 88,
        level_mod: 0,
        basis: [],
        basic: false,
        item_id: "PLACEHOLDERarc01",
        skill_base_formula: "sb(attr.per, attr.dex)",
        reported_level: 0,
      },
    });
  });

  test("the decoded data-scope (sample 08) equals what the card carries", () => {
    const read = readSohlCard(archeryCard().message.content, parser);
    assert.deepEqual(read.card.result, sample("08-").data_scope_decoded.priorTestResult);
  });

  test("a card without the Fate button is read from the edit pencil", () => {
    const doc = parser.parseFromString(archeryCard().message.content, "text/html");
    doc.querySelector('button[data-action="fateTest"]').remove();
    const read = readSohlCard(doc.body.innerHTML, parser);
    assert.equal(read.ok, true);
    assert.equal(read.card.hasFateButton, false);
    assert.equal(read.card.itemId, "PLACEHOLDERarc01");
    assert.equal(buildTest(read.card, archeryItem()).test.roll, 88);
  });

  test("without a Target: row the target comes from baseValue + deltas", () => {
    const doc = parser.parseFromString(archeryCard().message.content, "text/html");
    for (const row of doc.querySelectorAll(".card-content")) if (row.textContent.includes("Target:")) row.remove();
    const read = readSohlCard(doc.body.innerHTML, parser);
    assert.equal(read.card.target, null);
    assert.equal(buildTest(read.card, archeryItem()).test.eml, 55);
  });

  test("the test data's rollMode names no audience: buildTest gives none (issue 13; the message's whisper/blind does)", () => {
    const read = readSohlCard(archeryCard().message.content, parser);
    read.card.result.rollMode = "blindroll";
    assert.equal("visibility" in buildTest(read.card, archeryItem()), false);
  });

  test("attribute and mystical ability kinds, and a Fate Test", () => {
    const read = readSohlCard(archeryCard().message.content, parser);
    const aura = { ...sample("01-"), id: "aura" };
    assert.equal(buildTest(read.card, aura).test.kind, "attribute");
    assert.equal(buildTest(read.card, aura).test.code, "aur");
    assert.equal("skill_base_formula" in buildTest(read.card, aura).test, false);
    assert.equal(buildTest(read.card, { ...sample("06-"), id: "m" }).test.kind, "mystical");
    read.card.result.masteryLevelModifier.type = "skill-Archery-fate-test";
    assert.equal(buildTest(read.card, archeryItem()).test.kind, "fate");
  });

  test("the Aura-based skill's formula is passed through untouched", () => {
    const read = readSohlCard(archeryCard().message.content, parser);
    const [mystic, swordplay] = sample("05-").items;
    assert.equal(buildTest(read.card, { ...mystic, id: "x" }).test.skill_base_formula, "sb(attr.aur, attr.wil)");
    assert.equal(buildTest(read.card, { ...swordplay, id: "y" }).test.skill_base_formula, "sb(attr.str, attr.dex) + attr.aur / 10");
  });

  test("non-SoHL content is null; broken SoHL cards give a reason", () => {
    assert.equal(readSohlCard("<p>Hello</p>", parser), null);
    assert.equal(readSohlCard('<div class="dnd5e chat-card">sohl</div>', parser), null);
    assert.equal(readSohlCard(undefined, parser), null);
    const fateCard = sample("07-").messages[2].content;
    assert.deepEqual(readSohlCard(fateCard, parser), { ok: false, reason: CARD_ERRORS.NO_SCOPE });
    const broken = archeryCard().message.content.replaceAll("{&quot;priorTestResult", "{oops");
    const read = readSohlCard(broken, parser);
    assert.equal(read.ok, false);
    assert.equal(read.reason, CARD_ERRORS.BAD_JSON);
    assert.match(read.detail, /JSON/);
  });

  test("unsupported or missing items are refused", () => {
    const read = readSohlCard(archeryCard().message.content, parser);
    assert.deepEqual(buildTest(read.card, null), { ok: false, reason: CARD_ERRORS.NO_ITEM });
    assert.deepEqual(buildTest(read.card, { id: "w", name: "Sword", type: "weapongear", system: {} }), { ok: false, reason: CARD_ERRORS.UNSUPPORTED_ITEM });
  });
});

describe("sohl-card: helpers", () => {
  test("targetFromModifier applies every op in order and holds to min/max", () => {
    const base = { baseValue: 50, minTarget: 5, maxTarget: 95 };
    assert.equal(targetFromModifier({ ...base, deltas: [{ op: "add", value: 10 }, { op: "multiply", value: 2 }] }), 95);
    assert.equal(targetFromModifier({ ...base, deltas: [{ op: "upgrade", value: 60 }, { op: "downgrade", value: 40 }] }), 40);
    assert.equal(targetFromModifier({ ...base, deltas: [{ op: "override", value: -3 }] }), 5);
    assert.equal(targetFromModifier({ ...base, deltas: [{ op: "custom", value: 1 }] }), null);
    assert.equal(targetFromModifier({}), null);
  });

  test("splitItemUuid handles world and token actors", () => {
    assert.deepEqual(splitItemUuid("Actor.a.Item.i"), { actorUuid: "Actor.a", itemId: "i" });
    assert.deepEqual(splitItemUuid("Scene.s.Token.t.Actor.a.Item.i"), { actorUuid: "Scene.s.Token.t.Actor.a", itemId: "i" });
    assert.deepEqual(splitItemUuid("Actor.a"), { actorUuid: null, itemId: null });
  });
});

describe("sohl-actor: Basic Folk with the Fate Mysteries", () => {
  const snapshot = (overrides = {}) => ({
    id: basicFolk()._id,
    name: basicFolk().name,
    hasPlayerOwner: true,
    ownerUserIds: ["gm", "player", "gm"],
    statuses: [],
    items: basicFolkItems(),
    ...overrides,
  });

  test("a Fate Mystery's spend_seq flag goes into its point (the bridge counts later spends)", () => {
    const items = basicFolkItems().map((item) =>
      item.name === "Lucky Star" ? { ...item, moduleFlags: { spend_seq: 7 } } : { ...item, moduleFlags: { spend_seq: "x" } });
    const points = Object.fromEntries(buildActor(snapshot({ items })).fate_points.map((p) => [p.name, p.spend_seq]));
    assert.deepEqual(points, { "Lucky Star": 7, "Blade of Destiny": null });
  });

  test("builds the actor part with points, aura and owners", () => {
    const actor = buildActor(snapshot());
    assert.equal(actor.actor_id, "d1cddnpaqRl0a0Q8");
    assert.equal(actor.name, "Basic Folk");
    assert.equal(actor.player_owned, true);
    assert.deepEqual(actor.owner_user_ids, ["gm", "player"]);
    assert.deepEqual(actor.aura, { eml: 55, disabled: false });
    assert.equal(actor.aural_shock, false);
    assert.deepEqual(actor.fate_points, [
      { point_id: "mystery00000000", name: "Lucky Star", skill_code: null, charges: 2, spend_seq: null },
      { point_id: "mystery00000001", name: "Blade of Destiny", skill_code: "melee", charges: null, spend_seq: null },
    ]);
  });

  test("the mysticalability named Fate is not a point", () => {
    assert.equal(isFatePoint({ ...sample("06-") }), false);
    assert.equal(buildActor(snapshot()).fate_points.some((point) => point.name === "Fate"), false);
  });

  test("runtime Aura EML wins over the score; disabled Aura is reported", () => {
    const items = basicFolkItems({ auraEml: 62 });
    assert.deepEqual(buildActor(snapshot({ items })).aura, { eml: 62, disabled: false });
    items.find((item) => item.system.shortcode === "aur").masteryLevel.disabled = "SOHL.disabled";
    assert.deepEqual(buildActor(snapshot({ items })).aura, { eml: 62, disabled: true });
    assert.equal(buildActor(snapshot({ items: items.filter((item) => item.system.shortcode !== "aur") })).aura, null);
  });

  test("Aural Shock from a trauma item or from the status", () => {
    const trauma = { id: "t", name: "Aural Shock", type: "trauma", system: { subType: "auralshock" } };
    assert.equal(buildActor(snapshot({ items: [...basicFolkItems(), trauma] })).aural_shock, true);
    assert.equal(buildActor(snapshot({ statuses: ["auralShock"] })).aural_shock, true);
    assert.equal(buildActor(snapshot({ statuses: ["prone"] })).aural_shock, false);
  });

  test("charges: null max or null value is unlimited", () => {
    const point = (charges) => ({ id: "p", name: "P", type: "mystery", system: { subType: "fate", assocSkillCode: "", charges } });
    const charges = (c) => buildActor(snapshot({ items: [point(c)] })).fate_points[0].charges;
    assert.equal(charges({ value: 3, max: null }), null);
    assert.equal(charges({ value: null, max: 3 }), null);
    assert.equal(charges({ value: 0, max: 3 }), 0);
    assert.equal(buildActor(snapshot({ items: [point({ value: 1, max: 1 })] })).fate_points[0].skill_code, null);
  });
});
