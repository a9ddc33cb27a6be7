/**
 * His Majesty the Worm through the real main.js on the fake Foundry globals, the bridge played by
 * a fake socket: the `/tof` chat command, the sheet's dialog, the push button for the drawer
 * only, group tests, the GM's commands and the reshuffle notice (DECISIONS.md H1-H10).
 */
import { test, describe, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { install } from "../scripts/main.js";
import * as hmtw from "../scripts/rulesets/hmtw/index.js";
import { uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { clockedWorld, restoreTimers } from "./helpers/world-setup.js";
import { until } from "./helpers/fake-socket.js";

const WELCOME = { type: "welcome", v: 1, world_id: "e2e-world", bridge_version: "x", rulesets: ["sohl", "hmtw"], settings: { fate_option: "everyone" } };
const SILAN = "RECONhmtwActor01";
const PATCHES = "RECONhmtwActor02";

let env;
beforeEach(async () => {
  env = await clockedWorld();
  globalThis.game.system = { id: "hmtw-foundry", version: "0.1.0" };
  env.silan = env.world.addActor({ id: SILAN, name: "Silán Storysoul", hasPlayerOwner: true, ownership: { [env.player]: 3 } });
  env.silan.system = { swords: 4, pentacles: 2, cups: 3, wands: 0 };
  env.patches = env.world.addActor({ id: PATCHES, name: "Patches", hasPlayerOwner: true, ownership: { [env.stranger]: 3 } });
  env.patches.system = { swords: 1, pentacles: 3, cups: 1, wands: 2 };
  env.handle = install({ rulesets: [hmtw] });
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

/** A player's relayed request: request -> ack -> go -> the GM's handler runs. */
function relayFrom(userId) {
  env.world.deliverAs(env.gm);
  env.world.deliverAs(userId);
  env.world.deliverAs(env.gm);
}
/** `userId` selects `actor`'s token (Foundry's `canvas.tokens.controlled` of that client). */
function select(userId, actor) {
  env.world.asUser(userId);
  return env.world.controlToken(actor);
}
function type(userId, text) {
  env.world.asUser(userId);
  return env.world.callHook("chatMessage", {}, text, {});
}
const sent = (type_) => until(() => env.socket.sent.find((m) => m.type === type_ && !m.answered), type_);
/** The bridge answers `message` with `reply` (its event_id filled in). */
function answer(message, reply) {
  message.answered = true;
  env.socket.receive({ v: 1, event_id: message.event_id, ...reply });
}
/** End a request the test is done with: the bridge refuses it, and the asker hears so. */
async function settle(message, userId) {
  const notices = env.world.notices.length;
  answer(message, { type: "error", code: "not_found", message: "test over", ref: message.event_id, field: null });
  if (userId !== env.gm) {
    await until(() => env.world.emitted.some((e) => e.payload.type === "done"), "done");
    env.world.deliverAs(userId);
  }
  await until(() => env.world.notices.length > notices, "the refusal told");
  assert.equal(env.world.notices.at(-1).text, "Test of fate: test over");
}
const face = (code, name, suit, value) => ({ code, name, suit, value, symbol: "*" });
const pushButton = (testId, drawer) => `<button type="button" data-fate-bridge-hmtw-push="${testId}" data-fate-bridge-drawer="${drawer}">Push fate</button>`;

/** A `hmtw_tested` reply: IV of Pentacles, Pentacles 2 = 6, a failure the player may push. */
function failed(testId, drawer) {
  return {
    type: "hmtw_tested",
    test: { test_id: testId, actor_id: SILAN, actor_name: "Silán Storysoul", user_id: drawer, attribute: "pentacles", score: 2,
      modifier: 0, first: face("pentacles-4", "IV of Pentacles", "pentacles", 4), pushed: null, total: 6, outcome: "failure", push_by: [drawer] },
    obstacle: null, bound: false, decks: { player_undrawn: 56, player_discarded: 1, player_on_table: 0, gm_undrawn: 21, gm_discarded: 0 },
    reshuffles: [], notice: null,
    card: { title: "Test of fate: Pentacles", html: `<div data-fate-bridge-hmtw-test="${testId}">Total: 6 ${pushButton(testId, drawer)}</div>`, ruleset: "hmtw", speaker_actor_id: SILAN, speaker_alias: "Silán Storysoul" },
  };
}

/** The player's `/tof pentacles` for Silán, answered as a failure: the card posted, the relay done and delivered. */
async function failedTest() {
  select(env.player, env.silan);
  type(env.player, "/tof pentacles");
  relayFrom(env.player);
  const asked = await sent("hmtw_test");
  answer(asked, failed(asked.test_id, env.player));
  const card = await until(() => [...env.world.messages.values()].find((m) => m.flags["fate-bridge"]?.[hmtw.FLAGS.TESTS]), "the card");
  await until(() => env.world.emitted.some((e) => e.payload.type === "done"), "done");
  env.world.deliverAs(env.player);
  return { testId: asked.test_id, card };
}

describe("/tof: a test of fate (H3-H5)", () => {
  test("the selected adventurer's score is read from the HMtW sheet; the GM asks the bridge as the player", async () => {
    select(env.player, env.silan);
    assert.equal(type(env.player, '<p>/tof pentacles favor "the sea witch\'s conch"</p>'), false, "kept out of chat");
    relayFrom(env.player);
    const asked = await sent("hmtw_test");
    assert.deepEqual({ ...asked, event_id: undefined, test_id: undefined, client_seed: undefined }, {
      type: "hmtw_test", v: 1, event_id: undefined, test_id: undefined, client_seed: undefined, attribute: "pentacles", score: 2, favor: true, disfavor: false,
      actor: { actor_id: SILAN, name: "Silán Storysoul", owner_user_ids: [env.gm, env.player] },
      user_id: env.player, user_name: "Player One", user_is_gm: false, obstacle: "the sea witch's conch", visibility: "public",
    });
    assert.equal(asked.test_id, asked.event_id);
    assert.match(asked.client_seed, /^[0-9a-f]{32}$/, "the player's own random value (issue 19)");
    const before = env.world.messages.size;
    answer(asked, failed(asked.test_id, env.player));
    await until(() => env.world.messages.size === before + 1, "the test card");
    const card = [...env.world.messages.values()].at(-1);
    assert.deepEqual(card.flags["fate-bridge"], { [hmtw.FLAGS.TESTS]: [asked.test_id], decision: asked.event_id });
    assert.equal(card.speaker.actor, SILAN);
    assert.deepEqual(card.whisper, [], "a test of fate is drawn in front of the table");
  });

  test("outside the HMtW system the score is typed", async () => {
    globalThis.game.system = { id: "dnd5e", version: "5.1.1" };
    select(env.player, env.silan);
    type(env.player, "/tof pentacles");
    assert.equal(env.world.notices.at(-1).text, "/tof: type the pentacles score (1-4), e.g. /tof pentacles 2.");
    assert.deepEqual(env.world.emitted, []);
    type(env.player, "/tof pentacles 3 disfavor");
    relayFrom(env.player);
    const asked = await sent("hmtw_test");
    assert.deepEqual([asked.score, asked.disfavor], [3, true]);
    await settle(asked, env.player);
  });

  test("no token, several tokens, a sheet score of 0: told, nothing asked", () => {
    type(env.player, "/tof cups");
    assert.equal(env.world.notices.at(-1).text, "/tof: select your adventurer's token first.");
    select(env.player, env.silan);
    type(env.player, "/tof wands");
    assert.match(env.world.notices.at(-1).text, /Silán Storysoul has wands 0 on the sheet|has wands 0/);
    select(env.player, env.patches);
    type(env.player, "/tof cups");
    assert.equal(env.world.notices.at(-1).text, "/tof: several tokens are selected; select your adventurer's token only.");
    type(env.player, "/tof cups 7");
    assert.equal(env.world.notices.at(-1).text, "/tof: an attribute score is 1 to 4, not 7.");
    assert.deepEqual(env.world.emitted, []);
  });

  test("a deselected token is no longer the adventurer", () => {
    const token = select(env.player, env.silan);
    env.world.releaseToken(token);
    type(env.player, "/tof cups");
    assert.equal(env.world.notices.at(-1).text, "/tof: select your adventurer's token first.");
  });

  test("the bridge's refusal (bound by fate, H9) reaches the player; nothing is posted", async () => {
    select(env.player, env.silan);
    type(env.player, '/tof cups "the locked door"');
    relayFrom(env.player);
    const asked = await sent("hmtw_test");
    const before = env.world.messages.size;
    env.socket.receive({ type: "error", v: 1, code: "not_eligible", ref: asked.event_id, field: "obstacle",
      message: "'the locked door' is bound by fate after test t0 (Failure)" });
    await until(() => env.world.emitted.some((e) => e.payload.type === "done"), "done");
    env.world.deliverAs(env.player);
    await until(() => env.world.notices.length, "the notice");
    assert.deepEqual(env.world.notices.at(-1), { level: "warn", userId: env.player,
      text: "Test of fate: 'the locked door' is bound by fate after test t0 (Failure)" });
    assert.equal(env.world.messages.size, before);
  });
});

describe("the push button (H6)", () => {
  test("only the drawer sees it", async () => {
    const { card } = await failedTest();
    env.world.asUser(env.player);
    assert.ok(env.world.render(card.id).querySelector("[data-fate-bridge-hmtw-push]"));
    for (const other of [env.stranger, env.gm]) {
      env.world.asUser(other);
      assert.equal(env.world.render(card.id).querySelector("[data-fate-bridge-hmtw-push]"), null, other);
    }
  });

  test("the drawer's click pushes, the new card is posted and the old button goes", async () => {
    const { testId, card } = await failedTest();
    env.world.asUser(env.player);
    env.world.render(card.id).querySelector("[data-fate-bridge-hmtw-push]").click();
    relayFrom(env.player);
    const asked = await sent("hmtw_push");
    assert.deepEqual([asked.test_id, asked.user_id, asked.user_name], [testId, env.player, "Player One"]);
    const pushed = failed(testId, env.player);
    pushed.test = { ...pushed.test, pushed: face("cups-8", "VIII of Cups", "cups", 8), total: 14, outcome: "success", push_by: [] };
    pushed.card = { ...pushed.card, html: `<div data-fate-bridge-hmtw-test="${testId}">Total: 14</div>` };
    const before = env.world.messages.size;
    answer(asked, pushed);
    await until(() => card.flags["fate-bridge"][hmtw.FLAGS.PUSHED], "the pushed flag");
    assert.deepEqual(card.flags["fate-bridge"][hmtw.FLAGS.PUSHED], [testId]);
    assert.equal(env.world.messages.size, before + 1);
    env.world.asUser(env.player);
    assert.equal(env.world.render(card.id).querySelector("[data-fate-bridge-hmtw-push]"), null);
  });

  test("a refused push is told and the button comes back", async () => {
    const { card } = await failedTest();
    env.world.asUser(env.player);
    const html = env.world.render(card.id);
    const button = html.querySelector("[data-fate-bridge-hmtw-push]");
    button.click();
    assert.equal(button.disabled, true);
    relayFrom(env.player);
    const asked = await sent("hmtw_push");
    env.socket.receive({ type: "error", v: 1, code: "not_eligible", ref: asked.event_id, field: "test_id",
      message: "the table has drawn since this test: fate can no longer be pushed on it (H6)" });
    await until(() => env.world.emitted.some((e) => e.payload.type === "done"), "done");
    env.world.deliverAs(env.player);
    await until(() => !button.disabled, "the button released");
    assert.match(env.world.notices.at(-1).text, /can no longer be pushed/);
  });
});

describe("the dialog", () => {
  test("the HMtW sheet's header button opens it with the scores; drawing asks the bridge", async () => {
    env.world.asUser(env.player);
    const buttons = [];
    env.world.callHook("getActorSheetHeaderButtons", { actor: env.silan }, buttons);
    assert.deepEqual(buttons.map((b) => [b.label, b.class]), [["Test of fate", "fate-bridge-hmtw-test"]]);
    await buttons[0].onclick();
    const form = await until(() => globalThis.document.querySelector("form.fate-bridge-hmtw-dialog"), "the dialog");
    assert.equal(form.querySelector('[name="score"]'), null, "the sheet gives the score");
    assert.match(form.querySelector("option[value=cups]").textContent, /Cups \(3\)/);
    form.elements.namedItem("attribute").value = "cups";
    form.elements.namedItem("obstacle").value = "the clockwork mechanism";
    form.querySelector('[name="draw"]').click();
    assert.equal(globalThis.document.querySelector("form.fate-bridge-hmtw-dialog"), null, "closed");
    relayFrom(env.player);
    const asked = await sent("hmtw_test");
    assert.deepEqual([asked.attribute, asked.score, asked.obstacle, asked.actor.actor_id], ["cups", 3, "the clockwork mechanism", SILAN]);
    await settle(asked, env.player);
  });

  test("no header button outside the HMtW system or for a non-owner", () => {
    const buttons = [];
    env.world.asUser(env.stranger);
    env.world.callHook("getActorSheetHeaderButtons", { actor: env.silan }, buttons);
    globalThis.game.system = { id: "dnd5e", version: "5.1.1" };
    env.world.asUser(env.player);
    env.world.callHook("getActorSheetHeaderButtons", { actor: env.silan }, buttons);
    assert.deepEqual(buttons, []);
  });

  test("/tof alone opens it for the selected token, with the score typed outside the system", async () => {
    globalThis.game.system = { id: "dnd5e", version: "5.1.1" };
    select(env.player, env.silan);
    type(env.player, "/tof");
    const form = await until(() => globalThis.document.querySelector("form.fate-bridge-hmtw-dialog"), "the dialog");
    form.elements.namedItem("score").value = "9";
    form.querySelector('[name="draw"]').click();
    assert.deepEqual(env.world.emitted, [], "the browser's own check (max 4) stops the form");
    assert.ok(form.isConnected, "still open");
    form.elements.namedItem("score").value = "4";
    form.elements.namedItem("favor").checked = true;
    form.querySelector('[name="draw"]').click();
    relayFrom(env.player);
    const asked = await sent("hmtw_test");
    assert.deepEqual([asked.attribute, asked.score, asked.favor], ["swords", 4, true]);
    await settle(asked, env.player);
  });
});

describe("group tests (H10), Challenge Actions (H8) and the GM's commands", () => {
  test("the most and the least qualified of the selected tokens draw, each for its own player", async () => {
    select(env.gm, env.patches);
    select(env.gm, env.silan);
    type(env.gm, '/tof group cups "the winter wolf"');
    const asked = await sent("hmtw_group_test");
    assert.deepEqual(asked.members.map((m) => [m.actor.actor_id, m.score, m.user_id]), [[SILAN, 3, env.player], [PATCHES, 1, env.stranger]]);
    assert.deepEqual([asked.test_id, asked.obstacle, asked.user_id, asked.user_is_gm], [asked.event_id, "the winter wolf", env.gm, true]);
    await settle(asked, env.gm);
  });

  test("a Challenge Action carries no obstacle", async () => {
    select(env.player, env.silan);
    type(env.player, "/tof challenge swords favor");
    relayFrom(env.player);
    const asked = await sent("hmtw_challenge_action");
    assert.deepEqual([asked.action_id, asked.score, asked.favor, "obstacle" in asked], [asked.event_id, 4, true, false]);
    await settle(asked, env.player);
  });

  test("the GM's commands: the counts whispered to the GM, a reshuffle's notice for everyone", async () => {
    type(env.gm, "/tof reshuffle");
    const asked = await sent("hmtw_deck_command");
    assert.deepEqual([asked.command, asked.user_id, asked.user_is_gm], ["reshuffle", env.gm, true]);
    const before = env.world.messages.size;
    answer(asked, { type: "hmtw_decks", command: "reshuffle", decks: {}, reshuffle_after_test: false, reshuffle_at_round_end: false,
      open_tests: [], bound: [], reshuffles: [{ reason: "gm", decks: ["player", "gm"] }],
      notice: { title: "The decks are reshuffled", html: "<div>The GM reshuffles both decks</div>", ruleset: "hmtw" },
      card: { title: "Decks reshuffled", html: "<div>57 to draw</div>", ruleset: "hmtw" } });
    await until(() => env.world.messages.size === before + 2, "the counts and the notice");
    const [counts, notice] = [...env.world.messages.values()].slice(-2);
    assert.deepEqual(counts.whisper, [env.gm]);
    assert.deepEqual(notice.whisper, []);
    assert.equal(notice.content, "<div>The GM reshuffles both decks</div>");
  });

  test("players may not command the decks", () => {
    type(env.player, "/tof gm-draw");
    assert.equal(env.world.notices.at(-1).text, "/tof: only a GM commands the decks and clears obstacles.");
    assert.deepEqual(env.world.emitted, []);
  });

  test("a GM clears an obstacle: the table is told", async () => {
    type(env.gm, '/tof clear "the locked door"');
    const asked = await sent("hmtw_clear_obstacle");
    assert.equal(asked.obstacle, "the locked door");
    answer(asked, { type: "hmtw_obstacle_cleared", obstacle: "the locked door", test_id: "t0",
      card: { title: "Circumstances changed", html: "<div>the locked door may be tested again</div>", ruleset: "hmtw" } });
    const card = await until(() => [...env.world.messages.values()].find((m) => m.content.includes("tested again")), "the card");
    assert.deepEqual(card.whisper, []);
  });

  test("help and parse errors are told to the typist", () => {
    type(env.player, "/tof help");
    assert.match(env.world.notices.at(-1).text, /^Test of fate: \/tof ATTRIBUTE/);
    type(env.player, "/tof pentacles sneakily");
    assert.equal(env.world.notices.at(-1).text, "/tof: 'sneakily' is not understood here. Type /tof help.");
  });
});

describe("who sees the cards: the roll mode (typed, chosen, else the drawer's own)", () => {
  const GM2 = "gmUser000000002";
  beforeEach(() => {
    env.world.addUser({ id: GM2, name: "Assistant GM", isGM: true });
  });
  const lastMessage = () => [...env.world.messages.values()].at(-1);

  test("a player's gmroll: the bridge is told gm, the card is whispered to every GM and the drawer; a typed mode wins", async () => {
    await globalThis.game.settings.set("core", "rollMode", "gmroll");
    select(env.player, env.silan);
    type(env.player, "/tof pentacles");
    relayFrom(env.player);
    const asked = await sent("hmtw_test");
    assert.equal(asked.visibility, "gm");
    const before = env.world.messages.size;
    answer(asked, failed(asked.test_id, env.player));
    await until(() => env.world.messages.size === before + 1, "the test card");
    assert.deepEqual([lastMessage().whisper, lastMessage().blind], [[env.gm, GM2, env.player], false]);
    await until(() => env.world.emitted.some((e) => e.payload.type === "done"), "done");
    env.world.deliverAs(env.player);

    type(env.player, "/tof cups blind");
    relayFrom(env.player);
    const blind = await sent("hmtw_test");
    assert.equal(blind.visibility, "blind");
    answer(blind, failed(blind.test_id, env.player));
    await until(() => env.world.messages.size === before + 2, "the blind card");
    assert.deepEqual([lastMessage().whisper, lastMessage().blind], [[env.gm, GM2], true]);
  });

  test("v14's message mode is read when Foundry has it", async () => {
    env.world.registered.set("core.messageMode", { default: "public" });
    await globalThis.game.settings.set("core", "messageMode", "self");
    await globalThis.game.settings.set("core", "rollMode", "gmroll");
    select(env.player, env.silan);
    type(env.player, "/tof swords");
    relayFrom(env.player);
    const asked = await sent("hmtw_test");
    assert.equal(asked.visibility, "self");
    answer(asked, failed(asked.test_id, env.player));
    await until(() => lastMessage()?.flags["fate-bridge"]?.[hmtw.FLAGS.TESTS], "the card");
    assert.deepEqual(lastMessage().whisper, [env.player]);
  });

  test("a push's card is seen by whoever saw the test's card", async () => {
    await globalThis.game.settings.set("core", "rollMode", "gmroll");
    const { testId, card } = await failedTest();
    await globalThis.game.settings.set("core", "rollMode", "publicroll");
    env.world.asUser(env.player);
    env.world.render(card.id).querySelector("[data-fate-bridge-hmtw-push]").click();
    relayFrom(env.player);
    const push = await sent("hmtw_push");
    const pushed = failed(testId, env.player);
    pushed.test = { ...pushed.test, pushed: face("cups-8", "VIII of Cups", "cups", 8), total: 14, outcome: "success", push_by: [] };
    answer(push, pushed);
    await until(() => card.flags["fate-bridge"][hmtw.FLAGS.PUSHED], "the pushed flag");
    assert.notEqual(lastMessage().id, card.id);
    assert.deepEqual([lastMessage().whisper, lastMessage().blind], [card.whisper, false]);
  });

  test("the dialog starts on the user's roll mode", async () => {
    await globalThis.game.settings.set("core", "rollMode", "selfroll");
    select(env.player, env.silan);
    type(env.player, "/tof");
    const form = await until(() => globalThis.document.querySelector("form.fate-bridge-hmtw-dialog"), "the dialog");
    assert.equal(form.elements.namedItem("visibility").value, "self");
    form.elements.namedItem("attribute").value = "cups";
    form.querySelector('[name="draw"]').click();
    relayFrom(env.player);
    const asked = await sent("hmtw_test");
    assert.equal(asked.visibility, "self");
    await settle(asked, env.player);
  });

  test("the GM deck's cards are whispered to every GM", async () => {
    type(env.gm, "/tof gm-draw");
    const asked = await sent("hmtw_gm_draw");
    const before = env.world.messages.size;
    answer(asked, { type: "hmtw_gm_drawn", drawn: face("major-13", "XIII Death", null, 13), decks: {}, reshuffles: [], notice: null,
      card: { title: "GM deck", html: "<div>XIII Death</div>", ruleset: "hmtw" } });
    await until(() => env.world.messages.size === before + 1, "the card");
    assert.deepEqual([lastMessage().whisper, lastMessage().blind], [[env.gm, GM2], false]);
  });
});
