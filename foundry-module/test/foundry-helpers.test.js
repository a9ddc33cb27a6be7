/**
 * The Foundry helpers the rulesets share (scripts/foundry.js): the roll mode, the GM users, the
 * controlled tokens' actors, an actor as plain data and a message's rolls, each on the fake
 * Foundry globals (test/helpers/fake-foundry.js) and the real Foundry 13 d20 captures.
 */
import { test, describe, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import * as fvtt from "../scripts/foundry.js";
import { installFakeFoundry, uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { foundrySample, hmtwSample } from "./helpers/samples.js";
import { contentVisibleTo } from "../scripts/logic/cards.js";

/** The HMtW adventurer sample (tests/fixtures/samples/hmtw/). */
const SILAN = hmtwSample("actor-character-adventurer.RECONSTRUCTED.json");

let world;
beforeEach(() => {
  world = installFakeFoundry();
  world.addUser({ id: "gmUser000000001", name: "Gamemaster", isGM: true });
  world.addUser({ id: "playerUser00001", name: "Player One" });
  world.addUser({ id: "assistantGm0001", name: "Assistant", isGM: true });
  world.asUser("playerUser00001");
});
afterEach(() => uninstallFakeFoundry());

describe("rollMode: the user's roll mode as the wire's visibility", () => {
  for (const [mode, visibility] of [["publicroll", "public"], ["gmroll", "gm"], ["blindroll", "blind"], ["selfroll", "self"]]) {
    test(`v13 core.rollMode ${mode} -> ${visibility}`, async () => {
      await globalThis.game.settings.set("core", "rollMode", mode);
      assert.equal(fvtt.rollMode(), visibility);
    });
  }

  test("never chosen: Foundry's default, public; a mode nobody here knows: self, never public", async () => {
    assert.equal(fvtt.rollMode(), "public");
    await globalThis.game.settings.set("core", "rollMode", "roll");
    assert.equal(fvtt.rollMode(), "self");
  });

  test("v14: a message mode a system or module registered (CONFIG.ChatMessage.modes) is self", async () => {
    world.registered.set("core.messageMode", { default: "public" });
    await globalThis.game.settings.set("core", "messageMode", "ooc-whisper");
    assert.equal(fvtt.rollMode(), "self");
  });

  test("v14: core.messageMode, when registered, wins over the deprecated core.rollMode; ic is public", async () => {
    await globalThis.game.settings.set("core", "rollMode", "gmroll");
    world.registered.set("core.messageMode", { default: "public" });
    assert.equal(fvtt.rollMode(), "public", "the registered default");
    for (const [mode, visibility] of [["blind", "blind"], ["self", "self"], ["gm", "gm"], ["ic", "public"]]) {
      await globalThis.game.settings.set("core", "messageMode", mode);
      assert.equal(fvtt.rollMode(), visibility, mode);
    }
  });
});

test("gmUserIds: every GM, whoever this client is", () => {
  assert.deepEqual(fvtt.gmUserIds(), ["gmUser000000001", "assistantGm0001"]);
  world.asUser("gmUser000000001");
  assert.deepEqual(fvtt.gmUserIds(), ["gmUser000000001", "assistantGm0001"]);
});

describe("actors as plain data", () => {
  let silan;
  let patches;
  beforeEach(() => {
    silan = world.addActor({ id: SILAN._id, name: SILAN.name, type: SILAN.type, system: SILAN.system, ownership: { playerUser00001: 3 } });
    patches = world.addActor({ id: "RECONhmtwActor02", name: "Patches", system: { swords: 1, pentacles: 3, cups: 1, wands: 2 } });
  });

  test("actorData: id, uuid, name, type and the system's scores (system.swords ...), a copy", () => {
    const data = fvtt.actorData(`Actor.${SILAN._id}`);
    assert.deepEqual([data.id, data.uuid, data.name, data.type], [SILAN._id, `Actor.${SILAN._id}`, "Silán Storysoul", "character"]);
    assert.deepEqual([data.system.swords, data.system.pentacles, data.system.cups, data.system.wands], [4, 2, 3, 0]);
    data.system.swords = 1;
    assert.equal(silan.system.swords, 4, "changing the copy leaves the actor alone");
    assert.equal(fvtt.actorData("Actor.nobody"), null);
  });

  test("a system data model gives its prepared values (toObject(false))", () => {
    silan.system = { swords: 2, toObject: (source) => ({ swords: source === false ? 3 : 2 }) };
    assert.deepEqual(fvtt.actorData(silan.uuid).system, { swords: 3 });
  });

  test("controlledActors: this client's selected tokens' actors, in selection order, each once", () => {
    assert.deepEqual(fvtt.controlledActors(), []);
    world.controlToken(patches);
    const second = world.controlToken(silan);
    world.controlToken(patches);
    assert.deepEqual(fvtt.controlledActors().map((a) => [a.id, a.name, a.system.cups]), [["RECONhmtwActor02", "Patches", 1], [SILAN._id, "Silán Storysoul", 3]]);
    world.releaseToken(second);
    assert.deepEqual(fvtt.controlledActors().map((a) => a.id), ["RECONhmtwActor02"]);
    world.asUser("gmUser000000001");
    assert.deepEqual(fvtt.controlledActors(), [], "another client's selection is its own");
  });

  test("controlledActors: no scene drawn, or a token without an actor", () => {
    world.controlToken(null);
    assert.deepEqual(fvtt.controlledActors(), []);
    delete globalThis.canvas;
    assert.deepEqual(fvtt.controlledActors(), []);
  });
});

describe("messageRolls: a message's rolls as plain data (real Foundry 13 captures)", () => {
  const SAVE = foundrySample("d20-v13-dnd5e-save-str-1d20.json");
  const ADVANTAGE = foundrySample("d20-v13-dnd5e-skill-adv-2d20kh-blind.json");

  test("by id: rolls parsed from their JSON strings, speaker actor, flavor, dnd5e's roll type", async () => {
    world.asUser(null); // the log as captured, with its own author
    const message = await world.createMessage(structuredClone(SAVE));
    const read = fvtt.messageRolls(message.id);
    assert.deepEqual([read.id, read.speakerActorId, read.flavor, read.rollType], [message.id, SAVE.speaker.actor, "Strength Saving Throw", "save"]);
    assert.deepEqual(read.rolls, SAVE.rolls.map((roll) => JSON.parse(roll)));
    assert.equal(read.rolls[0].terms.find((term) => term.faces === 20).results[0].result, 12);
  });

  test("from the ChatMessage a hook hands over: Roll objects are serialized with toJSON", async () => {
    world.asUser(null);
    const message = await world.createMessage(structuredClone(ADVANTAGE));
    message.rolls = ADVANTAGE.rolls.map((json) => ({ toJSON: () => JSON.parse(json) }));
    const read = fvtt.messageRolls(message);
    assert.deepEqual(read.rolls, [JSON.parse(ADVANTAGE.rolls[0])]);
    assert.deepEqual([read.flavor, read.rollType], ["Intelligence (History) Check (Advantage)", "skill"]);
  });

  test("no message, no rolls, no speaker, a roll that does not parse", async () => {
    assert.equal(fvtt.messageRolls("missing"), null);
    const plain = await world.createMessage({ content: "<p>hi</p>", rolls: ["{not json", "42"] });
    assert.deepEqual(fvtt.messageRolls(plain.id), { id: plain.id, speakerActorId: null, flavor: null, rollType: null, contentVisible: true, rolls: [] });
  });
});

describe("actorSnapshot: runtime values a ruleset asks for", () => {
  test("copies the named runtime values (SoHL's mastery level) and nothing else; none asked, none copied", () => {
    world.addActor({ id: "actor0000000001", name: "Ann", items: [
      { id: "aura000000000001", name: "Aura", type: "attribute", system: { scoreBase: 12 }, masteryLevel: { effective: 61, disabled: "", base: { deep: 1 } } },
      { id: "plain00000000001", name: "Rope", type: "gear", system: {} },
    ] });
    const runtime = { "masteryLevel.effective": "logic.masteryLevel.effective", "masteryLevel.disabled": "logic.masteryLevel.disabled", "masteryLevel.base": "logic.masteryLevel.base" };
    const [aura, rope] = fvtt.actorSnapshot("Actor.actor0000000001", { runtime }).items;
    assert.deepEqual(aura.masteryLevel, { effective: 61, disabled: "" }, "an object is not copied");
    assert.equal("logic" in aura.system, false, "the stored data only");
    assert.equal("masteryLevel" in rope, false);
    assert.equal("masteryLevel" in fvtt.actorSnapshot("Actor.actor0000000001").items[0], false);
  });
});

describe("messageData's isRoll and contentVisible: Foundry's own getters, as the fake plays v13's", () => {
  test("every whisper, blind, author and roll case agrees with logic/cards.js contentVisibleTo, for every user", async () => {
    const users = ["gmA", "playerA", "playerB"];
    for (const [id, isGM] of [["gmA", true], ["playerA", false], ["playerB", false]]) world.addUser({ id, name: id, isGM });
    const roll = globalThis.Roll.fromData({ class: "Roll", terms: [{ class: "Die", faces: 6, results: [{ result: 3, active: true }] }], total: 3 });
    let checked = 0;
    for (const whisper of [[], ["gmA"], ["playerA"], ["gmA", "playerA"]]) {
      for (const blind of [false, true]) {
        for (const isRoll of [false, true]) {
          world.asUser("playerA");
          const message = await world.createMessage({ content: "<p>x</p>", whisper, blind, author: "playerA", rolls: isRoll ? [roll] : [] });
          for (const userId of users) {
            world.asUser(userId);
            const data = fvtt.messageData(message.id);
            assert.equal(data.isRoll, isRoll);
            assert.equal(data.contentVisible, contentVisibleTo(data, userId), JSON.stringify({ whisper, blind, isRoll, userId }));
            checked += 1;
          }
        }
      }
    }
    assert.equal(checked, 48);
    // The two cases issue 24 turns on: a blind message without rolls is its author's; with rolls it is not.
    world.asUser("playerA");
    const plain = await world.createMessage({ content: "<p>x</p>", whisper: ["gmA"], blind: true, author: "playerA" });
    const rolled = await world.createMessage({ content: "<p>x</p>", whisper: ["gmA"], blind: true, author: "playerA", rolls: [roll] });
    assert.deepEqual([fvtt.messageData(plain.id).contentVisible, fvtt.messageData(rolled.id).contentVisible], [true, false]);
  });
});

describe("permissionState: the browser's answer under the first name it knows (navigator.permissions)", () => {
  /** Put `navigator` in place for one test; returns the undo (Node may have its own navigator, or none). */
  function stubNavigator(value) {
    const previous = Object.getOwnPropertyDescriptor(globalThis, "navigator");
    Object.defineProperty(globalThis, "navigator", { value, configurable: true });
    return () => (previous ? Object.defineProperty(globalThis, "navigator", previous) : delete globalThis.navigator);
  }
  /** A Permissions API that knows `known` (name -> state) and rejects any other name as Chromium does. */
  function permissionsKnowing(known, asked) {
    return {
      async query({ name }) {
        asked.push(name);
        if (!(name in known)) throw new TypeError(`The provided value '${name}' is not a valid enum value of type PermissionName.`);
        return { name, state: known[name] };
      },
    };
  }

  test("the first name the browser knows answers; an unknown one is skipped", async (t) => {
    const asked = [];
    t.after(stubNavigator({ permissions: permissionsKnowing({ "local-network-access": "denied" }, asked) }));
    assert.equal(await fvtt.permissionState(["loopback-network", "local-network-access"]), "denied");
    assert.deepEqual(asked, ["loopback-network", "local-network-access"]);
  });

  test("a browser that knows none of the names does not say (null)", async (t) => {
    const asked = [];
    t.after(stubNavigator({ permissions: permissionsKnowing({}, asked) }));
    assert.equal(await fvtt.permissionState(["loopback-network", "local-network-access"]), null);
    assert.deepEqual(asked, ["loopback-network", "local-network-access"]);
  });

  test("a browser without the Permissions API does not say (null)", async (t) => {
    t.after(stubNavigator({}));
    assert.equal(await fvtt.permissionState(["loopback-network"]), null);
  });
});
