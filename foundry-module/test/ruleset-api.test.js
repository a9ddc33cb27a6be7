/**
 * The ruleset api through the real main.js on the fake Foundry globals: a fake ruleset gets a
 * chat command, relays a player's action to the active GM (attributed to Foundry's sender id),
 * asks the bridge, posts the bridge's card, and hears unsolicited bridge frames.
 */
import { test, describe, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import * as fvtt from "../scripts/foundry.js";
import { install } from "../scripts/main.js";
import { installRulesets } from "../scripts/ruleset-api.js";
import { BridgeError } from "../scripts/logic/errors.js";
import { rememberRolls } from "../scripts/logic/dice-trust.js";
import { uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { sampleWorld, clockedWorld, restoreTimers } from "./helpers/world-setup.js";
import { until } from "./helpers/fake-socket.js";

const WELCOME = { type: "welcome", v: 1, world_id: "e2e-world", bridge_version: "x", rulesets: ["sohl", "tarot"], settings: { fate_option: "everyone" } };
const CARD = { title: "Draw", html: '<div class="tarot">The Tower</div>', ruleset: "tarot", speaker_actor_id: "actor0000000001", speaker_alias: "Ann" };

let env;
/** A ruleset as the contract describes it, recording what reaches it. */
function tarotRuleset(log) {
  return {
    id: "tarot",
    install(api) {
      log.api = api;
      api.registerCommand("draw", (args, context) => {
        log.commands.push({ args, context });
        log.outcome = api.relay("tarot", "draw", { deck: args, user_id: "forged-id" }).then(
          (result) => ({ result }),
          (error) => ({ error }),
        );
        return false;
      });
      api.onRelay("draw", async (data, sender) => {
        log.relayed.push({ data, sender });
        const reply = await api.request({ type: "tarot_draw", v: 1, event_id: api.newEventId(), deck: data.deck, user_id: sender.userId });
        const message = await api.postCard(reply.card, { whisper: [sender.userId] });
        return { messageId: message.id, drawn: reply.drawn };
      });
      api.onBridgeMessage("reshuffle", (message) => log.frames.push(message));
    },
  };
}

beforeEach(async () => {
  env = await clockedWorld();
  env.log = { commands: [], relayed: [], frames: [] };
  env.handle = install({ rulesets: [tarotRuleset(env.log)] });
  for (const hook of ["init", "setup", "ready"]) env.world.callHook(hook);
  env.world.deliverSocket(); // the GM's link announcements (logic/link-holder.js)
  env.socket = env.Socket.instances[0];
  env.socket.open();
  env.socket.receive(WELCOME);
});
afterEach(() => {
  env.handle.dispose();
  restoreTimers();
  uninstallFakeFoundry();
});

/** The player types `/draw major`; the relay runs ack -> go -> the GM's handler. */
function playerDraws() {
  env.world.asUser(env.player);
  assert.equal(env.world.callHook("chatMessage", {}, "<p>/draw major</p>", {}), false, "the command is kept out of chat");
  env.world.deliverAs(env.gm); // request -> ack
  env.world.deliverAs(env.player); // ack -> go
  env.world.deliverAs(env.gm); // go -> the handler runs
}

describe("a ruleset installed through the api", () => {
  test("it is installed, and its api reaches Foundry through foundry.js only", () => {
    assert.deepEqual(env.handle.rulesets(), ["tarot"]);
    assert.equal(env.log.api.fvtt, fvtt);
    assert.equal(env.log.api.localize("FATE_BRIDGE.Error.no_gm"), "No GM with the bridge token is online to resolve Fate. Nothing was spent.");
    env.world.asUser(env.player);
    assert.equal(env.log.api.isActiveGM(), false);
    env.world.asUser(env.gm);
    assert.equal(env.log.api.isActiveGM(), true);
    env.log.api.notify("warn", "FATE_BRIDGE.Command.Failed", { command: "/x" });
    assert.equal(env.world.notices.at(-1).text, "Fate Bridge: the chat command /x failed. See the browser console for details.");
    assert.notEqual(env.log.api.newEventId(), env.log.api.newEventId());
    assert.equal(Object.isFrozen(env.log.api), true);
  });

  test("a player's command is relayed to the GM under Foundry's sender id, asks the bridge, posts the card", async () => {
    const before = env.world.messages.size;
    playerDraws();
    assert.deepEqual(env.log.commands, [{ args: "major", context: { userId: env.player, isGM: false } }]);
    assert.deepEqual(env.log.relayed, [{ data: { deck: "major", user_id: "forged-id" }, sender: { userId: env.player, isGM: false } }]);
    const asked = await until(() => env.socket.sent.find((m) => m.type === "tarot_draw"), "the bridge request");
    assert.equal(asked.user_id, env.player, "the sender's id, not the payload's");
    env.socket.receive({ type: "tarot_drawn", v: 1, event_id: asked.event_id, drawn: 16, card: CARD });
    await until(() => env.world.emitted.some((e) => e.payload.type === "done"), "done");
    env.world.deliverAs(env.player);
    const { result } = await env.log.outcome;
    const card = env.world.messages.get(result.messageId);
    assert.equal(result.drawn, 16);
    assert.equal(env.world.messages.size, before + 1);
    assert.equal(card.content, CARD.html);
    assert.deepEqual(card.speaker, { scene: null, token: null, actor: "actor0000000001", alias: "Ann" });
    assert.deepEqual(card.whisper, [env.player]);
    assert.equal(card.blind, false);
  });

  test("the bridge's refusal reaches the player as a BridgeError with its code; nothing is posted", async () => {
    const before = env.world.messages.size;
    playerDraws();
    const asked = await until(() => env.socket.sent.find((m) => m.type === "tarot_draw"), "the bridge request");
    env.socket.receive({ type: "error", v: 1, code: "forbidden", message: "not your deck", ref: asked.event_id, field: "user_id" });
    await until(() => env.world.emitted.some((e) => e.payload.type === "done"), "done");
    env.world.deliverAs(env.player);
    const { error } = await env.log.outcome;
    assert.ok(error instanceof BridgeError);
    assert.deepEqual([error.code, error.message, error.field], ["forbidden", "not your deck", "user_id"]);
    assert.equal(env.world.messages.size, before);
  });

  test("a GM's own command runs the handler locally as that GM", async () => {
    env.world.asUser(env.gm);
    env.world.callHook("chatMessage", {}, "/draw minor", {});
    assert.deepEqual(env.log.relayed, [{ data: { deck: "minor", user_id: "forged-id" }, sender: { userId: env.gm, isGM: true } }]);
    assert.deepEqual(env.world.emitted, [], "nothing on the socket");
    const asked = await until(() => env.socket.sent.find((m) => m.type === "tarot_draw"), "the bridge request");
    env.socket.receive({ type: "tarot_drawn", v: 1, event_id: asked.event_id, drawn: 2, card: CARD });
    const { result } = await env.log.outcome;
    assert.equal(result.drawn, 2);
  });

  test("no GM online: the relay rejects with no_gm at once", async () => {
    env.world.activeGMId = null;
    env.world.asUser(env.player);
    env.world.callHook("chatMessage", {}, "/draw major", {});
    const { error } = await env.log.outcome;
    assert.equal(error.code, "no_gm");
    assert.deepEqual(env.world.emitted, []);
  });

  test("the GM does not answer: the relay rejects with gm_no_answer after the ack deadline", async () => {
    env.world.asUser(env.player);
    env.world.callHook("chatMessage", {}, "/draw major", {});
    env.clock.advance(20_000);
    const { error } = await env.log.outcome;
    assert.equal(error.code, "gm_no_answer");
  });

  test("api.request: only on the link holder's client; a GM whose token is cleared lets go and is refused too", async () => {
    env.world.asUser(env.player);
    await assert.rejects(env.log.api.request({ type: "tarot_draw", v: 1, event_id: "e1" }), { code: "not_active_gm" });
    env.world.asUser(env.gm);
    await env.world.callHook("userConnected");
    await globalThis.game.settings.set("fate-bridge", "token", "");
    assert.equal(env.handle.connection(), null);
    assert.equal(env.log.api.isActiveGM(), false, "no token, no link: the GM no longer holds it");
    await assert.rejects(env.log.api.request({ type: "tarot_draw", v: 1, event_id: "e1" }), { code: "not_active_gm" });
  });

  test("unsolicited bridge frames reach the listener of their type", () => {
    env.socket.receive({ type: "reshuffle", v: 1, ruleset: "tarot", deck: "major" });
    env.socket.receive({ type: "something_else", v: 1 });
    assert.deepEqual(env.log.frames, [{ type: "reshuffle", v: 1, ruleset: "tarot", deck: "major" }]);
  });

  test("a failing command handler is reported to its user and kept out of chat", async () => {
    env.log.api.registerCommand("boom", () => {
      throw new Error("bug");
    });
    env.world.asUser(env.player);
    const errors = [];
    const realError = console.error;
    console.error = (...args) => errors.push(args);
    try {
      assert.equal(env.world.callHook("chatMessage", {}, "/boom", {}), false);
    } finally {
      console.error = realError;
    }
    assert.equal(errors.length, 1);
    assert.deepEqual(env.world.notices.at(-1), { level: "error", text: "Fate Bridge: the chat command /boom failed. See the browser console for details.", userId: env.player });
  });

  test("/fateaudit is a command like the others; names are not shared", () => {
    assert.throws(() => env.log.api.registerCommand("fateaudit", () => false), /already registered/);
    assert.throws(() => env.log.api.registerCommand("roll", () => false), /Foundry's own/);
    assert.throws(() => env.log.api.onRelay("draw", () => {}), /already has a relay handler/);
    env.world.asUser(env.player);
    assert.equal(env.world.callHook("chatMessage", {}, "<p>/fateaudit</p>", {}), false);
    assert.equal(env.world.notices.at(-1).text, "Only a GM can open the Fate audit.");
  });
});

describe("installing rulesets", () => {
  const parts = () => ({ commands: { register() {} }, relays: { on() {}, request() {} }, router: { on() {} }, bridgeLink: () => null });

  test("a ruleset breaking the contract is named in a TypeError", () => {
    assert.throws(() => installRulesets([{ install() {} }], parts()), /exports its id/);
    assert.throws(() => installRulesets([{ id: "Bad Id", install() {} }], parts()), /exports its id/);
    assert.throws(() => installRulesets([{ id: "pool" }], parts()), /pool does not export install/);
    assert.throws(() => installRulesets([{ id: "pool", install() {} }, { id: "pool", install() {} }], parts()), /pool is listed twice/);
  });

  test("a ruleset whose install throws is skipped; the others are installed", () => {
    const errors = [];
    const realError = console.error;
    console.error = (...args) => errors.push(args);
    try {
      const installed = installRulesets(
        [{ id: "hmtw", install() { throw new Error("bug"); } }, { id: "pool", install() {} }],
        parts(),
      );
      assert.deepEqual(installed, ["pool"]);
    } finally {
      console.error = realError;
    }
    assert.match(errors[0][0], /ruleset hmtw failed to install/);
  });
});

describe("api.postCard's dice and the link's state", () => {
  test("a card's dice ride on it as Rolls: Dice So Nice throws them once on each reader's client, the posting GM's included, as the asker; linkReady and onLinkUp follow the link", async () => {
    uninstallFakeFoundry();
    const { world, gm, player, stranger } = await sampleWorld({ diceSoNice: true });
    fvtt.installDiceAppearance();
    const welcomes = [];
    let link = null;
    const parts = { commands: { register() {} }, relays: { on() {}, request() {} }, router: { on() {} }, bridgeLink: () => link, onWelcome: (fn) => welcomes.push(fn) };
    let api;
    installRulesets([{ id: "dicey", install(given) { api = given; api.onLinkUp(() => {}); } }], parts);
    assert.equal(api.linked(), false);
    assert.equal(api.linkReady(), false);
    link = { isReady: () => true, request: async () => ({}) };
    assert.equal(api.linked(), true);
    assert.equal(api.linkReady(), true);
    assert.equal(welcomes.length, 1);
    const card = () => ({ title: "t", html: "<div>card</div>", ruleset: "dicey" });
    const count = (id) => world.animationsPerClient(id);

    // A private-GM card (the GMs and the asker): the asker's 2d6, thrown once each for the GM and the asker.
    const gmCard = await api.postCard(card(), { whisper: [gm, player], blind: false, dice: [{ faces: 6, results: [4, 6] }], diceUserId: player });
    assert.equal(world.messages.get(gmCard.id).rolls[0].fromData.formula, "2d6");
    assert.deepEqual(count(gmCard.id), { [gm]: 1, [player]: 1, [stranger]: 0 });
    assert.deepEqual(world.diceAnimations.map((a) => [a.userId, a.dice]), [[player, [{ faces: 6, results: [4, 6] }]], [player, [{ faces: 6, results: [4, 6] }]]]);

    // A blind card: the GM whose browser posts it sees the dice; the asker does not.
    const blindCard = await api.postCard(card(), { whisper: [gm], blind: true, dice: [{ faces: 100, results: [9] }], diceUserId: player });
    assert.deepEqual(count(blindCard.id), { [gm]: 1, [player]: 0, [stranger]: 0 });

    // The bridge's own `rolls` win over the ruleset's view of the dice; a public card: everyone, once.
    const reply = rememberRolls({ card: card(), rolls: [{ faces: 100, value: 55, source: "fair" }] });
    const publicCard = await api.postCard(reply.card, { dice: [{ faces: 100, results: [12] }], diceUserId: player });
    assert.deepEqual(count(publicCard.id), { [gm]: 1, [player]: 1, [stranger]: 1 });
    assert.deepEqual(world.diceAnimations.at(-1).dice, [{ faces: 100, results: [55] }]);

    // No dice: no Roll, nothing thrown; and never a showForRoll of ours.
    const plain = await api.postCard(card(), {});
    assert.deepEqual(world.messages.get(plain.id).rolls, []);
    assert.deepEqual(count(plain.id), { [gm]: 0, [player]: 0, [stranger]: 0 });
    assert.deepEqual(world.diceShown, []);
  });
});
