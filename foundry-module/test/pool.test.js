import { test, describe, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import * as fvtt from "../scripts/foundry.js";
import * as pool from "../scripts/rulesets/pool/index.js";
import { RULESETS } from "../scripts/rulesets/index.js";
import { BridgeError } from "../scripts/logic/errors.js";
import { fateSummary, parsePoolCommand, pickCharacter, rollMessage } from "../scripts/rulesets/pool/command.js";
import { d20Snapshot, poolDice, readD20Roll, rerollMessage } from "../scripts/rulesets/pool/rolls.js";
import { decoratePoolMessage, renderLedgerPanel, REROLL_CLASS } from "../scripts/rulesets/pool/ui.js";
import { installFakeFoundry, uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { foundrySample } from "./helpers/samples.js";

const ATTACK = foundrySample("d20-v13-dnd5e-attack-1d20.json");
const SAVE = foundrySample("d20-v13-dnd5e-save-str-1d20.json");
const ADVANTAGE = foundrySample("d20-v13-dnd5e-skill-adv-2d20kh-blind.json");
const DISADVANTAGE = foundrySample("d20-v13-dnd5e-skill-disadv-2d20kl.json");
const BASIC_2D20 = foundrySample("d20-v13-dnd5e-chat-roll-basicroll-2d20.json");
const D100 = foundrySample("d100-v13-mythic-fatechart-chatmessage.RECONSTRUCTED.json");
const LILLY = ATTACK.speaker.actor;
const POOL_SCHEMA = JSON.parse(readFileSync(new URL("../../schemas/client-messages.schema.json", import.meta.url), "utf8"));

const t = (key, data) => fvtt.localize(key, data);
const ALDRIC = { character_id: LILLY, name: "Lilly", kind: "pc", owner_user_ids: ["playerUser00001"], level: 3, tier: 2, stamina: 4, session_fate: 3, earned_fate: 1, destiny: 2, fate: 4 };
const BREN = { ...ALDRIC, character_id: "actorBren0000001", name: "Bren", kind: "retainer", level: 1, tier: 1, session_fate: 0, earned_fate: 0, destiny: 0, fate: 0 };

describe("the /pool command", () => {
  test("the issue's example: modifier, Tier, task tier, advantage, one Fate die", () => {
    assert.deepEqual(parsePoolCommand("3 tier 2 task 2 adv fate 1"), {
      ok: true, command: "check", tier: 2, as: null, visibility: "public",
      fields: { stat_modifier: 3, task_tier: 2, advantage_sources: 1, disadvantage_sources: 0, fate: 1 },
    });
  });

  test("a score, a rule's number of successes, sources counted, a character and a label", () => {
    const parsed = parsePoolCommand("score 14 task 1 need 3 adv ADV dis as Lilly of Hay for Climb the wall");
    assert.deepEqual(parsed.fields, { stat_score: 14, task_tier: 1, successes_needed: 3, advantage_sources: 2, disadvantage_sources: 1, fate: 0, label: "Climb the wall" });
    assert.equal(parsed.as, "Lilly of Hay");
  });

  test("saves, and a Fate save naming its score once", () => {
    assert.deepEqual(parsePoolCommand("save heart 14 fate 12 dc 15 bonus -1 dis").fields,
      { save: "heart", stat_score: 14, fate_score: 12, dc: 15, bonus: -1, advantage_sources: 0, disadvantage_sources: 1 });
    assert.deepEqual(parsePoolCommand("save fate 16 effect 3").fields,
      { save: "fate", fate_score: 16, effect_tier: 3, bonus: 0, advantage_sources: 0, disadvantage_sources: 0 });
  });

  test("the roll mode: typed before 'as' and 'for' wins, else the default given; the bridge is told it", () => {
    assert.equal(parsePoolCommand("3 task 2 gm").visibility, "gm");
    assert.equal(parsePoolCommand("3 task 2", { visibility: "blind" }).visibility, "blind");
    assert.equal(parsePoolCommand("save heart 14 fate 12 dc 15 SelfRoll as Lilly", { visibility: "gm" }).visibility, "self");
    const labelled = parsePoolCommand("3 task 2 for Hide from the gm", { visibility: "self" });
    assert.deepEqual([labelled.visibility, labelled.fields.label], ["self", "Hide from the gm"]);
    assert.deepEqual(parsePoolCommand("3 task 2 gm public"), { ok: false, error: "twice", token: "public" });
    const sender = { userId: "playerUser00001", isGM: false, userName: "Player One" };
    for (const [text, def] of [["3 task 2 adv fate 1 blind for Climb", "PoolCheck"], ["save heart 14 fate 12 dc 15 gm", "PoolSave"]]) {
      const command = parsePoolCommand(text);
      const message = rollMessage(command, ALDRIC, sender, "ev1");
      assert.equal(message.visibility, command.visibility, "the card's roll mode decides the overlay");
      const known = Object.keys(POOL_SCHEMA.$defs[def].properties);
      for (const key of Object.keys(message)) assert.ok(known.includes(key), `${def}.${key}`);
    }
  });

  test("the short forms", () => {
    assert.deepEqual(parsePoolCommand(""), { ok: true, command: "help" });
    assert.deepEqual(parsePoolCommand("fate"), { ok: true, command: "fate" });
    assert.deepEqual(parsePoolCommand("Ledger"), { ok: true, command: "ledger" });
  });

  for (const [args, error, token] of [
    ["3", "task_missing", "task"],
    ["3 task 6", "task_tier", "task"],
    ["task 2", "stat", ""],
    ["3 score 12 task 2", "stat", "score"],
    ["3 task", "number_after", "task"],
    ["3 task 2 task 3", "twice", "task"],
    ["3 task 2 jump", "unknown_word", "jump"],
    ["3 task 2 dc 12", "unknown_word", "dc"],
    ["3 task 2 as", "missing_text", "as"],
    ["save luck 12 dc 3", "save_name", "luck"],
    ["save body 12 dc 12", "fate_score", "fate"],
    ["save body 12 fate 10", "dc", "dc"],
    ["save body 12 fate 10 dc 12 effect 2", "dc", "dc"],
    ["save fate 12 fate 10 dc 12", "twice", "fate"],
  ]) {
    test(`refused: /pool ${args}`, () => {
      assert.deepEqual(parsePoolCommand(args), { ok: false, error, token });
    });
  }

  test("every parse error has its notice", () => {
    for (const error of ["missing_text", "number_after", "twice", "unknown_word", "task_tier", "stat", "task_missing", "save_name", "fate_score", "dc"]) {
      installFakeFoundry();
      assert.notEqual(t(`FATE_BRIDGE.Pool.Parse.${error}`, { token: "x" }), `FATE_BRIDGE.Pool.Parse.${error}`, error);
      uninstallFakeFoundry();
    }
  });

  test("the character: the only player character, a named one, or a refusal", () => {
    assert.equal(pickCharacter([ALDRIC, BREN], { as: null, tier: null }).entry, ALDRIC);
    assert.equal(pickCharacter([ALDRIC, BREN], { as: "bren", tier: null }).entry, BREN);
    assert.deepEqual(pickCharacter([ALDRIC, BREN], { as: "Cara", tier: null }), { ok: false, error: "unknown_character", name: "Cara" });
    assert.deepEqual(pickCharacter([BREN], { as: null, tier: null }), { ok: false, error: "no_character" });
    assert.deepEqual(pickCharacter([ALDRIC, { ...ALDRIC, character_id: "x" }], { as: null, tier: null }), { ok: false, error: "several_characters" });
    assert.deepEqual(pickCharacter([ALDRIC], { as: null, tier: 3 }), { ok: false, error: "tier_mismatch", name: "Lilly", tier: 2 });
  });

  test("the bridge message: the sender's ids always win over typed fields", () => {
    const command = { command: "check", fields: { stat_modifier: 2, task_tier: 1, user_id: "forged", user_is_gm: true, character_id: "other" } };
    const message = rollMessage(command, ALDRIC, { userId: "playerUser00001", isGM: false, userName: "Player One" }, "ev1");
    assert.deepEqual(message, { stat_modifier: 2, task_tier: 1, type: "pool_check", v: 1, event_id: "ev1", character_id: LILLY, user_id: "playerUser00001", user_is_gm: false, user_name: "Player One" });
  });

  test("each owner's Fate in one line", () => {
    installFakeFoundry();
    assert.equal(fateSummary([ALDRIC, BREN], t), "Lilly: Fate 4 (3 session, 1 earned), Destiny 2, stamina 4; Bren (retainer, no Fate): stamina 4");
    assert.equal(fateSummary([], t), "no character of yours is in the ledger");
    uninstallFakeFoundry();
  });
});

describe("d20 rolls in chat (real Foundry 13 captures)", () => {
  test("1d20, 2d20kh and 2d20kl with their totals; the discarded die is sent too", () => {
    assert.deepEqual(readD20Roll(ATTACK.rolls[0]), { mode: "normal", d20s: [2], total: 8, rollType: "attack" });
    assert.deepEqual(readD20Roll(ADVANTAGE.rolls[0]), { mode: "advantage", d20s: [8, 2], total: 9, rollType: "skill" });
    assert.deepEqual(readD20Roll(DISADVANTAGE.rolls[0]), { mode: "disadvantage", d20s: [16, 11], total: 14, rollType: "skill" });
  });

  test("no d20 roll: a d100, 2d20 summed, broken JSON", () => {
    assert.equal(readD20Roll(D100.rolls[0]), null);
    assert.equal(readD20Roll(BASIC_2D20.rolls[0]), null);
    assert.equal(readD20Roll("{not json"), null);
  });

  test("the snapshot: speaker actor, kind from the system's roll type, flavor as label", () => {
    const snapshot = (sample) => d20Snapshot({ rolls: sample.rolls, speakerActorId: sample.speaker.actor, flavor: sample.flavor, rollType: sample.flags.dnd5e?.roll?.type ?? null });
    assert.deepEqual(snapshot(SAVE), { character_id: LILLY, kind: "save", mode: "normal", d20s: [12], total: 13, label: "Strength Saving Throw" });
    assert.equal(snapshot(ATTACK).kind, "attack");
    assert.equal(snapshot(ADVANTAGE).kind, "ability_test");
    assert.equal(d20Snapshot({ rolls: ATTACK.rolls, speakerActorId: null }), null);
  });

  test("the reroll message carries the snapshot only the first time", () => {
    const sender = { userId: "playerUser00001", isGM: false, userName: null };
    assert.deepEqual(rerollMessage({ rollId: "m1", roll: null }, sender, "ev"), { type: "pool_reroll", v: 1, event_id: "ev", roll_id: "m1", user_id: "playerUser00001", user_is_gm: false });
    assert.equal(rerollMessage({ rollId: "m1", roll: { d20s: [3] } }, sender, "ev").roll.d20s[0], 3);
    assert.equal(rerollMessage({ rollId: "m1", roll: null, visibility: "blind" }, sender, "ev").visibility, "blind");
  });
});

describe("the Reroll with Fate button", () => {
  let world;
  beforeEach(() => {
    world = installFakeFoundry();
  });
  afterEach(() => uninstallFakeFoundry());

  function element(content = "") {
    const li = world.dom.window.document.createElement("li");
    li.innerHTML = `<div class="message-content">${content}</div>`;
    return li;
  }
  const snapshot = { character_id: LILLY, kind: "attack", mode: "normal", d20s: [2], total: 8 };
  const owner = { isGM: false, ownsActor: true, actorHasPlayerOwner: true };

  test("added to a player character's d20 message for its owner; a click asks with the snapshot", () => {
    const root = element();
    const clicks = [];
    const result = decoratePoolMessage({ root, message: { id: "m1", snapshot }, viewer: owner, t, onReroll: (...args) => clicks.push(args) });
    assert.deepEqual(result, { added: true, wired: 0 });
    const button = root.querySelector(`.${REROLL_CLASS} button`);
    assert.equal(button.textContent, "Reroll with Fate");
    button.click();
    assert.equal(button.disabled, true);
    assert.deepEqual(clicks.map(([id, roll]) => [id, roll]), [["m1", snapshot]]);
    clicks[0][2]();
    assert.equal(button.disabled, false, "release enables it again");
  });

  for (const [name, message, viewer] of [
    ["a message without a d20 roll", { id: "m1", snapshot: null }, owner],
    ["another player's character", { id: "m1", snapshot }, { ...owner, ownsActor: false }],
    ["an actor with no player owner", { id: "m1", snapshot }, { ...owner, actorHasPlayerOwner: false, isGM: true }],
  ]) {
    test(`absent on ${name}`, () => {
      const root = element();
      assert.deepEqual(decoratePoolMessage({ root, message, viewer, t, onReroll: () => assert.fail("no click") }), { added: false, wired: 0 });
      assert.equal(root.querySelector("button"), null);
    });
  }

  test("the bridge's own button: wired for the owner or a GM (no snapshot), removed for others", () => {
    const card = '<div data-fate-bridge-roll-id="ev-save"><button data-fate-bridge-pool-reroll="ev-save">Reroll</button></div>';
    const mine = element(card);
    const clicks = [];
    assert.deepEqual(decoratePoolMessage({ root: mine, message: { id: "m2", snapshot: null }, viewer: owner, t, onReroll: (...args) => clicks.push(args) }), { added: false, wired: 1 });
    mine.querySelector("button").click();
    assert.deepEqual(clicks.map(([id, roll]) => [id, roll]), [["ev-save", null]]);
    const theirs = element(card);
    decoratePoolMessage({ root: theirs, message: { id: "m2", snapshot: null }, viewer: { ...owner, ownsActor: false }, t, onReroll: () => {} });
    assert.equal(theirs.querySelector("button"), null);
  });
});

describe("the GM's ledger panel", () => {
  let world;
  beforeEach(() => {
    world = installFakeFoundry();
  });
  afterEach(() => uninstallFakeFoundry());

  test("rows, session buttons, per-character actions and entering an actor", () => {
    const actions = [];
    const panel = renderLedgerPanel(world.dom.window.document, {
      entries: [ALDRIC, BREN], sessionOpen: true, error: null,
      actors: [{ id: LILLY, name: "Lilly" }, { id: "actorCara0000001", name: "Cara <b>" }],
    }, t, (action, data) => actions.push([action, data]));
    const rows = [...panel.querySelectorAll(".pool-ledger-row")];
    assert.deepEqual(rows.map((row) => [...row.querySelectorAll("td")].slice(0, 4).map((td) => td.textContent)), [
      ["Lilly", "3 (Tier 2)", "3 session + 1 earned", "2"],
      ["Bren (retainer)", "1 (Tier 1)", "-", "-"],
    ]);
    assert.equal(panel.querySelector(".pool-session-state").textContent, "Session running");
    panel.querySelector('[data-action="session_start"]').click();
    rows[0].querySelector('[data-action="award"]').click();
    rows[0].querySelector('[data-action="level_gained"]').click();
    assert.equal(rows[1].querySelector('[data-action="award"]'), null, "no Fate actions for a retainer");
    const stamina = rows[1].querySelector('input[name="stamina"]');
    stamina.value = "1";
    stamina.dispatchEvent(new world.dom.window.Event("change"));
    const add = panel.querySelector(".pool-ledger-add");
    assert.deepEqual([...add.querySelectorAll('select[name="actor"] option')].map((o) => o.textContent), ["Cara <b>"]);
    add.querySelector('select[name="kind"]').value = "follower";
    add.querySelector('input[name="level"]').value = "2";
    add.querySelector('[data-action="character"]').click();
    assert.deepEqual(actions, [
      ["session_start", {}],
      ["award", { character_ids: [LILLY] }],
      ["level_gained", { character_id: LILLY }],
      ["stamina", { character_id: BREN.character_id, stamina: 1 }],
      ["character", { character_id: "actorCara0000001", name: "Cara <b>", kind: "follower", level: 2, stamina: 0 }],
    ]);
  });

  test("a refusal is shown", () => {
    const panel = renderLedgerPanel(world.dom.window.document, { entries: [], sessionOpen: false, error: "nope", actors: [] }, t, () => {});
    assert.equal(panel.querySelector(".pool-ledger-error").textContent, "nope");
    assert.equal(panel.querySelector(".pool-session-state").textContent, "No session running");
  });
});

/**
 * The ruleset installed on a fake api over the fake Foundry world: `relay` runs the GM-side
 * handler at once with this client's user as Foundry's sender; `request` answers as the bridge
 * from `replies` (by message type) and records what was sent.
 */
function fakeApi(world, replies) {
  const commands = new Map();
  const handlers = new Map();
  const api = {
    fvtt,
    sent: [],
    cards: [],
    audiences: [],
    dice: [],
    registerCommand: (name, handler) => commands.set(name, handler),
    onRelay: (action, handler) => handlers.set(action, handler),
    relay: async (ruleset, action, data) => handlers.get(action)(structuredClone(data), { userId: world.currentUserId, isGM: fvtt.currentUserIsGM() }),
    request: async (message) => {
      api.sent.push(message);
      const reply = replies[message.type];
      if (reply instanceof Error) throw reply;
      return typeof reply === "function" ? reply(message) : reply;
    },
    // The card's audience and flags; its dice (ridden on the card as Rolls, thrown by Dice So Nice as `diceUserId`) apart.
    postCard: async (card, { dice = [], diceUserId, flags = {}, ...audience } = {}) => {
      api.cards.push(card);
      api.audiences.push(Object.keys(flags).length ? { ...audience, flags } : audience);
      if (dice.length) api.dice.push({ dice, diceUserId, audience });
    },
    onBridgeMessage: () => {},
    newEventId: () => `ev${api.sent.length}`,
    // the world allows no physical dice (test/physical-dice.test.js: when it does)
    physicalDice: () => null,
    sendWithPhysical: (physical, send) => send(physical),
    isActiveGM: fvtt.isActiveGM,
    localize: fvtt.localize,
    notify: fvtt.notify,
    command: (text) => commands.get("pool")(text, { userId: world.currentUserId, isGM: fvtt.currentUserIsGM() }),
  };
  return api;
}

describe("the pool ruleset in a world", () => {
  let world;
  let api;
  const flush = () => new Promise((resolve) => setImmediate(resolve));
  const CARD = { title: "t", html: "<div>card</div>", ruleset: "pool" };
  beforeEach(() => {
    world = installFakeFoundry();
    world.addUser({ id: "gmUser000000001", name: "Gamemaster", isGM: true });
    world.addUser({ id: "playerUser00001", name: "Player One" });
    world.addUser({ id: "strangerUser001", name: "Player Two" });
    world.activeGMId = "gmUser000000001";
    world.addActor({ id: LILLY, name: "Lilly", hasPlayerOwner: true, ownership: { playerUser00001: 3 } });
    world.addActor({ id: "npcGoblin0000001", name: "Goblin" });
    api = fakeApi(world, {
      pool_ledger_query: { session_open: true, characters: [ALDRIC, BREN] },
      pool_check: { type: "pool_check_rolled", card: CARD, dice: [{ face: 6, explosion: false, success: true }, { face: 2, explosion: true, success: false }] },
      pool_reroll: { type: "pool_rerolled", card: CARD, d20s: [17, 4] },
      pool_session_start: { type: "pool_ledger", card: CARD },
    });
    pool.install(api);
  });
  afterEach(() => uninstallFakeFoundry());

  test("registered in the ruleset list", () => {
    assert.ok(RULESETS.includes(pool));
    assert.equal(pool.id, "pool");
  });

  test("a player's check goes to the bridge for their only player character, and its card is posted", async () => {
    world.asUser("playerUser00001");
    assert.equal(typeof (await api.command("3 tier 2 task 2 adv fate 1")), "boolean");
    const check = api.sent.find((m) => m.type === "pool_check");
    assert.deepEqual(check, {
      stat_modifier: 3, task_tier: 2, advantage_sources: 1, disadvantage_sources: 0, fate: 1,
      type: "pool_check", v: 1, event_id: check.event_id, character_id: LILLY, user_id: "playerUser00001", user_is_gm: false, user_name: "Player One",
      visibility: "public",
    });
    assert.deepEqual(api.cards, [CARD]);
    // the bridge's d6s (explosion included), as the player, to the card's audience, before the card (issue 13)
    assert.deepEqual(api.dice, [{ dice: [{ faces: 6, results: [6, 2] }], diceUserId: "playerUser00001", audience: { whisper: [], blind: false } }]);
  });

  test("the card is seen per the player's roll mode (every GM and the player for gmroll); a typed mode wins", async () => {
    world.addUser({ id: "gmUser000000002", name: "Assistant GM", isGM: true });
    await globalThis.game.settings.set("core", "rollMode", "gmroll");
    world.asUser("playerUser00001");
    await api.command("3 task 2");
    assert.deepEqual(api.audiences.at(-1), { whisper: ["gmUser000000001", "gmUser000000002", "playerUser00001"], blind: false });
    assert.equal(api.sent.at(-1).visibility, "gm", "the bridge is told who sees it: not public, not on the overlay");
    await api.command("3 task 2 blind");
    assert.deepEqual(api.audiences.at(-1), { whisper: ["gmUser000000001", "gmUser000000002"], blind: true });
    assert.equal(api.sent.at(-1).visibility, "blind");
    await globalThis.game.settings.set("core", "rollMode", "publicroll");
    await api.command("3 task 2");
    assert.deepEqual(api.audiences.at(-1), { whisper: [], blind: false });
    assert.equal(api.sent.at(-1).visibility, "public", "a public card reaches the stream overlay");
    await api.command("3 task 2 self");
    assert.deepEqual(api.audiences.at(-1), { whisper: ["playerUser00001"], blind: false, authorId: "playerUser00001" });
    assert.equal(api.sent.at(-1).visibility, "self");
  });

  test("a visibility no mode has, from a client, is the asker's own: never public", async () => {
    world.asUser("playerUser00001");
    await api.relay("pool", pool.ACTIONS.ROLL, { args: "3 task 2", visibility: "everyone" });
    assert.deepEqual(api.audiences.at(-1), { whisper: ["playerUser00001"], blind: false, authorId: "playerUser00001" });
  });

  test("a Tier that is not the ledger's is refused before the bridge is asked", async () => {
    world.asUser("playerUser00001");
    await api.command("3 tier 3 task 2");
    assert.equal(api.sent.some((m) => m.type === "pool_check"), false);
    assert.match(world.notices.at(-1).text, /The ledger has Lilly, Tier 2/);
  });

  test("a typo is told at once and nothing is sent", () => {
    world.asUser("playerUser00001");
    assert.equal(api.command("3 task 9"), false);
    assert.deepEqual(api.sent, []);
    assert.match(world.notices.at(-1).text, /from 1 \(Basic\) to 5/);
  });

  test("the bridge's refusal is told to the player", async () => {
    api = fakeApi(world, { pool_ledger_query: { characters: [ALDRIC] }, pool_check: new BridgeError("no_charges", "'Lilly' holds 0 Fate, 1 needed") });
    uninstallFakeFoundry();
    world = installFakeFoundry();
    world.addUser({ id: "playerUser00001", name: "Player One" });
    world.asUser("playerUser00001");
    pool.install(api);
    await api.command("2 task 1 fate 1");
    assert.equal(world.notices.at(-1).text, "The bridge refused: 'Lilly' holds 0 Fate, 1 needed");
  });

  test("/pool fate shows the owner its Fate", async () => {
    world.asUser("playerUser00001");
    await api.command("fate");
    assert.equal(world.notices.at(-1).text, "Your Fate: Lilly: Fate 4 (3 session, 1 earned), Destiny 2, stamina 4; Bren (retainer, no Fate): stamina 4");
    assert.deepEqual(api.sent[0].user_id, "playerUser00001");
  });

  test("the Reroll with Fate button on a player character's d20 message, and its absence elsewhere", async () => {
    const attack = await world.createMessage(structuredClone(ATTACK));
    const d100 = await world.createMessage(structuredClone(D100));
    const goblin = await world.createMessage({ ...structuredClone(SAVE), speaker: { actor: "npcGoblin0000001" } });
    world.asUser("playerUser00001");
    const li = world.render(attack.id);
    assert.equal(world.render(d100.id).querySelector(`.${REROLL_CLASS}`), null);
    assert.equal(world.render(goblin.id).querySelector(`.${REROLL_CLASS}`), null);
    world.asUser("strangerUser001");
    assert.equal(world.render(attack.id).querySelector(`.${REROLL_CLASS}`), null);
    world.asUser("playerUser00001");
    li.querySelector(`.${REROLL_CLASS} button`).click();
    await flush();
    assert.deepEqual(api.sent.at(-1), {
      type: "pool_reroll", v: 1, event_id: api.sent.at(-1).event_id, roll_id: attack.id, user_id: "playerUser00001",
      user_is_gm: false, user_name: "Player One",
      roll: { character_id: LILLY, kind: "attack", mode: "normal", d20s: [2], total: 8, label: "Dagger - Attack Roll" },
      visibility: "public",
    });
    assert.deepEqual(api.cards, [CARD]);
    assert.deepEqual(api.audiences, [{ whisper: [], blind: false }], "public: the clicker's roll mode");
  });

  test("a reroll's card reaches whoever saw the rolled message (issue 13), not the clicker's roll mode", async () => {
    const attack = await world.createMessage(structuredClone(ATTACK));
    await globalThis.game.settings.set("core", "rollMode", "selfroll");
    world.asUser("playerUser00001");
    world.render(attack.id).querySelector(`.${REROLL_CLASS} button`).click();
    await flush();
    assert.equal(api.sent.at(-1).type, "pool_reroll");
    assert.equal(api.sent.at(-1).roll.label, "Dagger - Attack Roll", "the flavor is read from the message");
    assert.deepEqual(api.audiences, [{ whisper: [], blind: false }], "the attack was public");
    assert.equal(api.sent.at(-1).visibility, "public", "the bridge is told the rolled message's, not the clicker's selfroll");
    const blind = await world.createMessage({ ...structuredClone(ATTACK), whisper: ["gmUser000000001"], blind: true, author: "playerUser00001" });
    await globalThis.game.settings.set("core", "rollMode", "publicroll");
    // Its roller sees Foundry's "rolled privately" stub (a blind roll): no d20, no reroll button.
    assert.match(world.render(blind.id).textContent, /rolled privately/);
    assert.equal(world.render(blind.id).querySelector(`.${REROLL_CLASS}`), null);
    world.asUser("gmUser000000001");
    world.render(blind.id).querySelector(`.${REROLL_CLASS} button`).click();
    await flush();
    assert.deepEqual(api.audiences.at(-1), { whisper: ["gmUser000000001"], blind: true }, "a blind roll's reroll: the GMs only");
    assert.equal(api.sent.at(-1).visibility, "blind", "never on the overlay");
    assert.deepEqual(api.dice.at(-1), { dice: api.dice.at(-1).dice, diceUserId: "gmUser000000001", audience: { whisper: ["gmUser000000001"], blind: true } });
  });

  test("the GM opens the ledger panel, starts a session from it; a player cannot open it", async () => {
    world.asUser("playerUser00001");
    api.command("ledger");
    assert.equal(world.notices.at(-1).text, "Only a GM opens the Fate ledger.");
    world.asUser("gmUser000000001");
    api.command("ledger");
    await flush();
    const panel = world.dom.window.document.querySelector("#fate-bridge-pool-ledger");
    assert.ok(panel, "the panel is open");
    assert.equal(panel.querySelectorAll(".pool-ledger-row").length, 2);
    panel.querySelector('[data-action="session_start"]').click();
    await flush();
    await flush();
    assert.deepEqual(api.sent.find((m) => m.type === "pool_session_start"), {
      type: "pool_session_start", v: 1, event_id: api.sent.find((m) => m.type === "pool_session_start").event_id,
      user_id: "gmUser000000001", user_is_gm: true,
    });
    assert.deepEqual(api.cards, [CARD]);
  });

  test("a player's ledger action is refused on the GM's side", async () => {
    world.asUser("playerUser00001");
    await assert.rejects(api.relay("pool", pool.ACTIONS.GM, { action: "session_start" }), { code: "forbidden" });
    assert.equal(api.sent.length, 0);
  });
});

describe("poolDice: the bridge's dice of a pool reply", () => {
  test("a save's d20s with its stat and Fate dice (sizes from the signed faces); a reroll's d20s; nothing else", () => {
    assert.deepEqual(poolDice({ type: "pool_save_rolled", d20s: [3, 18], stat_die: [-8, 5], fate_die: [6, 6] }),
      [{ faces: 20, results: [3, 18] }, { faces: 8, results: [5] }, { faces: 6, results: [6] }]);
    assert.deepEqual(poolDice({ type: "pool_save_rolled", d20s: [11], stat_die: [10, 2], fate_die: null }), [{ faces: 20, results: [11] }, { faces: 10, results: [2] }]);
    assert.deepEqual(poolDice({ type: "pool_rerolled", d20s: [20] }), [{ faces: 20, results: [20] }]);
    assert.deepEqual(poolDice({ type: "pool_ledger" }), []);
  });
});
