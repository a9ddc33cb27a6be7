import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import { createCommandRegistry, parseChatCommand } from "../scripts/logic/commands.js";
import { createBridgeRouter } from "../scripts/logic/bridge-events.js";
import { cardMessageData } from "../scripts/logic/cards.js";

const domParser = new new JSDOM("").window.DOMParser();

describe("chat commands", () => {
  test("typed text (v13) and editor HTML (v14) read the same", () => {
    assert.deepEqual(parseChatCommand("/fateaudit", domParser), { name: "fateaudit", args: "" });
    assert.deepEqual(parseChatCommand("  /FateAudit ", domParser), { name: "fateaudit", args: "" });
    assert.deepEqual(parseChatCommand("<p>/fateaudit</p>", domParser), { name: "fateaudit", args: "" });
    assert.deepEqual(parseChatCommand("<p>/draw  major &amp; minor</p>", domParser), { name: "draw", args: "major & minor" });
    assert.deepEqual(parseChatCommand("/draw <b>x</b>", domParser), { name: "draw", args: "<b>x</b>" }, "v13 text is not parsed as HTML");
    for (const text of ["fateaudit", "<p>hello</p>", "/ draw", "//draw", "", null, 42]) assert.equal(parseChatCommand(text, domParser), null, String(text));
  });

  test("a registered command consumes its text; others are left to Foundry", () => {
    const calls = [];
    const registry = createCommandRegistry({ domParser, onError: () => assert.fail("no error expected") });
    registry.register("draw", (args, context) => {
      calls.push([args, context]);
      return false;
    });
    registry.register("peek", () => undefined);
    assert.equal(registry.handle("<p>/draw major</p>", { userId: "u1", isGM: false }), false);
    assert.deepEqual(calls, [["major", { userId: "u1", isGM: false }]]);
    assert.equal(registry.handle("/peek", { userId: "u1", isGM: false }), undefined, "a handler not returning false lets the text through");
    assert.equal(registry.handle("/roll 1d20", { userId: "u1", isGM: false }), undefined);
    assert.equal(registry.handle("hello", { userId: "u1", isGM: false }), undefined);
  });

  test("a Promise keeps the text out; a throw or a rejection is reported with the command's name", async () => {
    const errors = [];
    const registry = createCommandRegistry({ domParser, onError: (error, name) => errors.push([error.message, name]) });
    registry.register("later", async () => {
      throw new Error("rejected");
    });
    registry.register("broken", () => {
      throw new Error("thrown");
    });
    assert.equal(registry.handle("/later", {}), false);
    assert.equal(registry.handle("/broken", {}), false);
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual(errors, [["thrown", "broken"], ["rejected", "later"]]);
  });

  test("names: lower-case words, not Foundry's, not taken", () => {
    const registry = createCommandRegistry({ domParser, onError: () => {} });
    registry.register("draw", () => false);
    assert.throws(() => registry.register("draw", () => false), /already registered/);
    assert.throws(() => registry.register("roll", () => false), /Foundry's own/);
    assert.throws(() => registry.register("w", () => false), /Foundry's own/);
    assert.throws(() => registry.register("Draw2", () => false), TypeError);
    assert.throws(() => registry.register("x y", () => false), TypeError);
    assert.throws(() => registry.register("ok", "not a function"), /not a function/);
  });
});

describe("unsolicited bridge frames", () => {
  test("routed by type to every listener, in order; a failing listener does not stop the others", () => {
    const seen = [];
    const errors = [];
    const router = createBridgeRouter({ onError: (error, type) => errors.push([error.message, type]) });
    router.on("reshuffle", (message) => seen.push(["a", message.deck]));
    router.on("reshuffle", () => {
      throw new Error("boom");
    });
    router.on("reshuffle", (message) => seen.push(["c", message.deck]));
    router.on("other", () => seen.push(["other"]));
    router.dispatch({ type: "reshuffle", deck: "major" });
    router.dispatch({ type: "unknown" });
    router.dispatch(null);
    router.dispatch({ deck: "no type" });
    assert.deepEqual(seen, [["a", "major"], ["c", "major"]]);
    assert.deepEqual(errors, [["boom", "reshuffle"]]);
    assert.throws(() => router.on("", () => {}), TypeError);
    assert.throws(() => router.on("x", null), TypeError);
  });
});

describe("bridge cards", () => {
  test("a card becomes ChatMessage data: html as content, the speaker, who sees it, the flags", () => {
    const card = { title: "Draw", html: "<p>The Tower</p>", ruleset: "hmtw", speaker_actor_id: "actor1", speaker_alias: "Ann" };
    assert.deepEqual(cardMessageData(card, { whisper: ["u1"], blind: true, flags: { card_for: "m1" } }), {
      content: "<p>The Tower</p>",
      speaker: { actor: "actor1", alias: "Ann" },
      whisper: ["u1"],
      blind: true,
      flags: { card_for: "m1" },
    });
    assert.deepEqual(cardMessageData({ title: "t", html: "", ruleset: "pool" }), {
      content: "",
      speaker: { actor: null, alias: undefined },
      whisper: [],
      blind: false,
      flags: {},
    });
    assert.throws(() => cardMessageData({ title: "t", ruleset: "pool" }), TypeError);
  });
});
