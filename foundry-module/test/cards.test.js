/**
 * Who sees a bridge card (scripts/logic/cards.js cardAudience, the one rule for every ruleset) and
 * the roll mode words the commands take.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import {
  VISIBILITIES, cardAudience, cardMessageData, checkedVisibility, contentVisibleTo, DICE_USER_FLAG, relayedResult, visibilityOfRollMode, visibilityWord,
} from "../scripts/logic/cards.js";
import { rollData } from "../scripts/logic/dice.js";

describe("cardAudience: Foundry's roll modes", () => {
  const users = { askerId: "player1", gmIds: ["gm1", "gm2"] };
  test("public: everyone; gm: every GM and the asker; blind: every GM, blind; self: the asker, as its author", () => {
    assert.deepEqual(cardAudience({ ...users, visibility: "public" }), { whisper: [], blind: false });
    assert.deepEqual(cardAudience({ ...users, visibility: "gm" }), { whisper: ["gm1", "gm2", "player1"], blind: false });
    assert.deepEqual(cardAudience({ ...users, visibility: "blind" }), { whisper: ["gm1", "gm2"], blind: true });
    assert.deepEqual(cardAudience({ ...users, visibility: "self" }), { whisper: ["player1"], blind: false, authorId: "player1" });
  });

  test("a GM asking is listed once; an unknown or missing visibility is the asker's only, never public", () => {
    assert.deepEqual(cardAudience({ visibility: "gm", askerId: "gm1", gmIds: ["gm1"] }), { whisper: ["gm1"], blind: false });
    assert.deepEqual(cardAudience({ ...users, visibility: "everyone" }), { whisper: ["player1"], blind: false, authorId: "player1" });
    assert.deepEqual(cardAudience({ ...users }), { whisper: ["player1"], blind: false, authorId: "player1" });
  });

  test("sameAs: an existing message's audience, copied (SoHL's Fate cards)", () => {
    const original = { whisper: ["gm1"], blind: true };
    const audience = cardAudience({ sameAs: original, visibility: "public" });
    assert.deepEqual(audience, { whisper: ["gm1"], blind: true });
    audience.whisper.push("x");
    assert.deepEqual(original.whisper, ["gm1"], "a copy");
  });
});

describe("contentVisibleTo: Foundry v13's ChatMessage#visible / #isContentVisible", () => {
  // client/documents/chat-message.mjs (v13): a whispered roll's content is the whisper list's and,
  // unless blind, its author's; a whispered message without rolls is its author's and the list's.
  const message = (fields) => ({ whisper: ["gm1"], blind: false, authorId: "player1", isRoll: false, ...fields });
  test("no whisper: everyone", () => {
    for (const isRoll of [false, true]) assert.equal(contentVisibleTo(message({ whisper: [], isRoll }), "anyone"), true);
  });
  test("without rolls, blind plays no part: a blind SoHL test shows its author the result", () => {
    assert.equal(contentVisibleTo(message({ blind: true }), "player1"), true);
    assert.equal(contentVisibleTo(message({ blind: true }), "gm1"), true);
    assert.equal(contentVisibleTo(message({ blind: true }), "player2"), false);
  });
  test("with rolls, blind hides the content from its author; the whisper list reads it", () => {
    assert.equal(contentVisibleTo(message({ blind: true, isRoll: true }), "player1"), false);
    assert.equal(contentVisibleTo(message({ blind: true, isRoll: true }), "gm1"), true);
    assert.equal(contentVisibleTo(message({ isRoll: true }), "player1"), true, "a private-GM roll: its author reads it");
    assert.equal(contentVisibleTo(message({ isRoll: true }), "player2"), false);
  });
  test("a GM off the whisper list does not read it (Foundry has no GM exception)", () => {
    assert.equal(contentVisibleTo(message({ whisper: ["player1"], isRoll: true }), "gm1"), false);
  });
  test("sameAs follows it: a blind test without rolls reaches its author too; with rolls the GMs only", () => {
    assert.deepEqual(cardAudience({ sameAs: message({ blind: true }) }), { whisper: ["gm1", "player1"], blind: false });
    assert.deepEqual(cardAudience({ sameAs: message({ blind: true, isRoll: true }) }), { whisper: ["gm1"], blind: true });
    assert.deepEqual(cardAudience({ sameAs: message({}) }), { whisper: ["gm1", "player1"], blind: false });
  });
  test("sameAs a self test (whispered to its author alone): its author only, as the card's author", () => {
    for (const isRoll of [false, true]) {
      assert.deepEqual(cardAudience({ sameAs: message({ whisper: ["player1"], isRoll }) }), { whisper: ["player1"], blind: false, authorId: "player1" });
    }
    assert.deepEqual(cardAudience({ sameAs: message({ whisper: ["player1", "player1"] }) }), { whisper: ["player1"], blind: false, authorId: "player1" });
  });
});

describe("cardMessageData: a card's dice ride on it as Rolls", () => {
  const card = () => ({ title: "t", html: "<p>x</p>", ruleset: "pool" });
  test("the ruleset's dice, when the reply carried none, as one Roll; the asker's flag for Dice So Nice's colours", () => {
    const data = cardMessageData(card(), { whisper: ["gm1"], dice: [{ faces: 6, results: [2, 5] }], diceUserId: "player1", flags: { a: 1 } });
    assert.deepEqual(data.rolls, [rollData([{ faces: 6, results: [2, 5] }])]);
    assert.deepEqual(data.flags, { a: 1, [DICE_USER_FLAG]: "player1" });
  });
  test("no dice: no rolls and no dice flag", () => {
    const data = cardMessageData(card(), { diceUserId: "player1" });
    assert.equal(data.rolls, undefined);
    assert.deepEqual(data.flags, {});
  });
  test("an author is passed on as Foundry's `author`; none leaves it to Foundry (the posting user)", () => {
    assert.equal(cardMessageData(card(), { whisper: ["player1"], authorId: "player1" }).author, "player1");
    assert.equal("author" in cardMessageData(card(), { whisper: ["gm1"] }), false);
    assert.throws(() => cardMessageData(card(), { authorId: "" }), /authorId must be a user id/);
  });
  test("bad dice are a TypeError naming them", () => {
    assert.throws(() => cardMessageData(card(), { dice: [{ faces: 6, results: [7] }] }), /d6 results must be whole numbers 1\.\.6/);
  });
});

test("relayedResult: a public answer whole; any other carries only its visibility", () => {
  assert.deepEqual(relayedResult("public", { answer: "yes" }), { answer: "yes" });
  for (const visibility of ["gm", "blind", "self"]) assert.deepEqual(relayedResult(visibility, { answer: "yes" }), { visibility });
  assert.deepEqual(relayedResult("nonsense", { answer: "yes" }), { visibility: "self" }, "unknown is the asker's own, as its card is");
});

test("roll modes and typed words -> visibility", () => {
  assert.deepEqual(VISIBILITIES, ["public", "gm", "blind", "self"]);
  assert.deepEqual(["publicroll", "gmroll", "blindroll", "selfroll", "gm", "ic"].map(visibilityOfRollMode), ["public", "gm", "blind", "self", "gm", "public"]);
  assert.equal(visibilityOfRollMode("constructor"), null);
  assert.equal(visibilityOfRollMode(undefined), null);
  assert.deepEqual(["GM", "BlindRoll", "self", "public"].map(visibilityWord), ["gm", "blind", "self", "public"]);
  assert.equal(visibilityWord("ic"), null, "not a word the commands take");
  assert.equal(visibilityWord("toString"), null);
  assert.deepEqual(["blind", "everyone", undefined].map(checkedVisibility), ["blind", "self", "self"], "an unknown mode is never public");
});
