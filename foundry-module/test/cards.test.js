/**
 * Who sees a bridge card (scripts/logic/cards.js cardAudience, the one rule for every ruleset) and
 * the roll mode words the commands take.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { VISIBILITIES, cardAudience, checkedVisibility, visibilityOfRollMode, visibilityWord } from "../scripts/logic/cards.js";

describe("cardAudience: Foundry's roll modes", () => {
  const users = { askerId: "player1", gmIds: ["gm1", "gm2"] };
  test("public: everyone; gm: every GM and the asker; blind: every GM, blind; self: the asker", () => {
    assert.deepEqual(cardAudience({ ...users, visibility: "public" }), { whisper: [], blind: false });
    assert.deepEqual(cardAudience({ ...users, visibility: "gm" }), { whisper: ["gm1", "gm2", "player1"], blind: false });
    assert.deepEqual(cardAudience({ ...users, visibility: "blind" }), { whisper: ["gm1", "gm2"], blind: true });
    assert.deepEqual(cardAudience({ ...users, visibility: "self" }), { whisper: ["player1"], blind: false });
  });

  test("a GM asking is listed once; an unknown visibility is public", () => {
    assert.deepEqual(cardAudience({ visibility: "gm", askerId: "gm1", gmIds: ["gm1"] }), { whisper: ["gm1"], blind: false });
    assert.deepEqual(cardAudience({ ...users, visibility: "everyone" }), { whisper: [], blind: false });
    assert.deepEqual(cardAudience({ ...users }), { whisper: [], blind: false });
  });

  test("sameAs: an existing message's audience, copied (SoHL's Fate cards)", () => {
    const original = { whisper: ["gm1"], blind: true };
    const audience = cardAudience({ sameAs: original, visibility: "public" });
    assert.deepEqual(audience, { whisper: ["gm1"], blind: true });
    audience.whisper.push("x");
    assert.deepEqual(original.whisper, ["gm1"], "a copy");
  });
});

test("roll modes and typed words -> visibility", () => {
  assert.deepEqual(VISIBILITIES, ["public", "gm", "blind", "self"]);
  assert.deepEqual(["publicroll", "gmroll", "blindroll", "selfroll", "gm", "ic"].map(visibilityOfRollMode), ["public", "gm", "blind", "self", "gm", "public"]);
  assert.equal(visibilityOfRollMode("constructor"), null);
  assert.equal(visibilityOfRollMode(undefined), null);
  assert.deepEqual(["GM", "BlindRoll", "self", "public"].map(visibilityWord), ["gm", "blind", "self", "public"]);
  assert.equal(visibilityWord("ic"), null, "not a word the commands take");
  assert.equal(visibilityWord("toString"), null);
  assert.deepEqual(["blind", "everyone", undefined].map(checkedVisibility), ["blind", "public", "public"]);
});
