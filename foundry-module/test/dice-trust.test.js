/**
 * logic/dice-trust.js (issue 19): client seeds from the asking player's browser, the bridge's dice
 * as real Rolls on the card, physical values checked as the bridge checks them, dice sessions
 * posted and verified, GM overrides.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { createHash, webcrypto } from "node:crypto";
import {
  commitmentMatches, createClientSeeds, createDiceSessions, DICE_SESSION_FLAG, installDiceCommands, newClientSeed, overrideRequest,
  parseDiceSettings, parseOverride, parsePhysical, rememberRolls, rollDataOf, rollsForCard, VERIFIED_MARK,
  DICE_SCHEDULE_SETTING, DICE_SETTINGS_SETTING, nextPhysicalDie, physicalAllowed, relayedPhysical, withPhysicalDice,
} from "../scripts/logic/dice-trust.js";
import { BridgeError } from "../scripts/logic/errors.js";
import { DECISION_FLAG } from "../scripts/logic/receipts.js";
import { cardMessageData } from "../scripts/logic/cards.js";
import { rollData } from "../scripts/logic/dice.js";

/** The Fate Test d100 as one evaluated Roll (logic/dice.js rollData). */
const fateRollData = (value) => rollData([{ faces: 100, results: [value] }]);

const sha256 = (bytes) => webcrypto.subtle.digest("SHA-256", bytes);
/** SHA-256 settled in a microtask (WebCrypto's digest runs on a thread, not in a microtask). */
const hashNow = async (bytes) => createHash("sha256").update(bytes).digest();
const SEED = "00".repeat(31) + "01";
const COMMITMENT = createHash("sha256").update(Buffer.from(SEED, "hex")).digest("hex");

describe("client seeds: the asking player's own random value", () => {
  test("a fresh seed is 16 random bytes as hex", () => {
    assert.equal(newClientSeed((bytes) => bytes.fill(171)), "ab".repeat(16));
    assert.match(newClientSeed((bytes) => webcrypto.getRandomValues(bytes)), /^[0-9a-f]{32}$/);
  });

  test("a relayed request carries the sender's seed; the GM stamps it on that player's bridge request", () => {
    let n = 0;
    const player = createClientSeeds(() => `p${++n}`.padEnd(32, "0").replace("p", "a"));
    const gm = createClientSeeds(() => "f".repeat(32));
    const relayed = player.seedRelayRequest({ type: "request", request_id: "r1", ruleset: "sohl", action: "spend", data: {} });
    assert.equal(relayed.client_seed, "a1".padEnd(32, "0"));
    assert.deepEqual(player.seedRelayRequest({ type: "go", request_id: "r1" }), { type: "go", request_id: "r1" });
    gm.rememberRelaySeed(relayed, "player1");
    gm.rememberRelaySeed({ type: "request", client_seed: "<not hex>" }, "player2");
    assert.equal(gm.stampRequest({ type: "fate_spend", event_id: "e1", user_id: "player1" }).client_seed, relayed.client_seed);
    assert.equal(gm.stampRequest({ type: "fate_spend", event_id: "e2", user_id: "player1" }).client_seed, "f".repeat(32), "each seed is used once");
    assert.equal(gm.stampRequest({ type: "fate_spend", event_id: "e3", user_id: "player2" }).client_seed, "f".repeat(32));
    assert.deepEqual(gm.stampRequest({ type: "audit_query", query_id: "q" }), { type: "audit_query", query_id: "q" });
    assert.equal(gm.stampRequest({ event_id: "e4", client_seed: "kept" }).client_seed, "kept");
  });
});

describe("the bridge's dice become the card's Rolls", () => {
  test("one d100 has exactly the shape the Fate flow already gives Dice So Nice", () => {
    assert.deepEqual(rollDataOf([{ faces: 100, value: 34, source: "fair" }]), [fateRollData(34)]);
  });

  test("runs of the same die are one Roll each, values in order", () => {
    const rolls = rollDataOf([6, 6, 6].map((f, i) => ({ faces: f, value: i + 1, source: "fair" })).concat([{ faces: 57, value: 12, source: "fair" }]));
    assert.deepEqual(rolls.map((r) => [r.formula, r.total, r.terms[0].results.map((x) => x.result)]), [["3d6", 6, [1, 2, 3]], ["1d57", 12, [12]]]);
  });

  test("a reply's card carries its rolls into the ChatMessage data; a card without dice carries none", () => {
    const reply = rememberRolls({ type: "chart_answered", card: { title: "t", html: "<p>x</p>", ruleset: "mythic" }, rolls: [{ faces: 100, value: 57, source: "physical" }] });
    assert.deepEqual(rollsForCard(reply.card), [fateRollData(57)]);
    assert.deepEqual(cardMessageData(reply.card).rolls, [fateRollData(57)]);
    assert.equal("rolls" in cardMessageData({ title: "t", html: "<p>y</p>", ruleset: "mythic" }), false);
  });
});

describe("physical dice", () => {
  test("values are read in order and checked against their dice", () => {
    assert.deepEqual(parsePhysical("57", [100]), [57]);
    assert.deepEqual(parsePhysical("3, 6 1", [6, 6, 6]), [3, 6, 1]);
    assert.throws(() => parsePhysical("101", [100]), { name: "RangeError", message: "physical[0]: 101 is not a possible d100 roll (allowed 1..100)" });
    assert.throws(() => parsePhysical("3 x", [6, 6]), /physical\[1\]: x is not a possible d6 roll \(allowed 1..6\)/);
    assert.throws(() => parsePhysical("3", [6, 6]), /enter 2 dice \(d6, d6\), got 1/);
  });
});

describe("dice sessions", () => {
  function fakes(seed = SEED) {
    const posted = [];
    const requests = [];
    const foundry = {
      createChatMessage: async (data) => { posted.push({ id: `m${posted.length}`, ...data }); return `m${posted.length - 1}`; },
      updateChatMessage: async (id, data) => { Object.assign(posted.find((m) => m.id === id), data); },
      messagesWithFlag: (key) => posted.filter((m) => m.flags[key]).map((m) => ({ id: m.id, content: m.content, flag: m.flags[key] })),
      sha256,
      gmUserIds: () => ["gm"],
    };
    const replies = {
      dice_session_start: { session_id: COMMITMENT.slice(0, 16), commitment: COMMITMENT, card: { html: "<p>commitment</p>" } },
      dice_session_end: { session_id: COMMITMENT.slice(0, 16), commitment: COMMITMENT, seed, card: { html: "<p>reveal</p>" } },
    };
    const link = () => ({ request: async (message) => { requests.push(message); return replies[message.type]; } });
    return { posted, requests, sessions: createDiceSessions({ link, foundry, newEventId: () => `ev${requests.length}` }) };
  }

  test("start posts the commitment; end posts the reveal and marks the commitment verified", async () => {
    const { posted, requests, sessions } = fakes();
    await sessions.start("gm");
    assert.deepEqual(posted[0].flags, { [DICE_SESSION_FLAG]: { session_id: COMMITMENT.slice(0, 16), commitment: COMMITMENT, verified: false } });
    assert.equal(await sessions.end("gm"), true);
    assert.deepEqual(requests.map((r) => [r.type, r.user_id, r.user_is_gm]), [["dice_session_start", "gm", true], ["dice_session_end", "gm", true]]);
    assert.equal(posted[1].content, "<p>reveal</p>");
    assert.equal(posted[0].content, "<p>commitment</p>" + VERIFIED_MARK);
    assert.equal(posted[0].flags[DICE_SESSION_FLAG].verified, true);
  });

  test("a seed that does not hash to the posted commitment is not marked", async () => {
    const { posted, sessions } = fakes("00".repeat(32));
    await sessions.start("gm");
    assert.equal(await sessions.end("gm"), false);
    assert.equal(posted[0].content, "<p>commitment</p>");
    assert.equal(await commitmentMatches(SEED, COMMITMENT, sha256), true);
    assert.equal(await commitmentMatches("zz", COMMITMENT, sha256), false);
  });
});

describe("GM overrides", () => {
  test("the request names the target, the result and a required reason", () => {
    assert.deepEqual(overrideRequest({ eventId: "e", targetEventId: "t", result: " Yes ", reason: " story ", userId: "gm", isGM: true }), {
      type: "gm_override", v: 1, event_id: "e", target_event_id: "t", message_id: null, result: "Yes", values: [], reason: "story", user_id: "gm", user_is_gm: true,
    });
    assert.throws(() => overrideRequest({ eventId: "e", targetEventId: "t", result: "Yes", reason: " " }), /needs a reason/);
    assert.deepEqual(parseOverride("msg1 Exceptional Yes | the story needs it"), { target: "msg1", result: "Exceptional Yes", reason: "the story needs it" });
    assert.throws(() => parseOverride("msg1 Yes"), /TARGET RESULT \| REASON/);
  });
});

describe("dice settings", () => {
  const current = { provable: false, physical_rulesets: [], override_mark: "everyone" };
  test("words change only what they name", () => {
    assert.deepEqual(parseDiceSettings("provable=on physical=mythic,pool", current), { provable: true, physical_rulesets: ["mythic", "pool"], override_mark: "everyone" });
    assert.deepEqual(parseDiceSettings("mark=gm physical=none", { ...current, physical_rulesets: ["pool"] }), { provable: false, physical_rulesets: [], override_mark: "gm" });
    assert.throws(() => parseDiceSettings("provable=maybe", current), /provable=maybe: write provable=on\|off/);
  });
});

describe("the GM's dice commands", () => {
  /**
   * The dice commands on fakes: `replies` answers a request type (a function of the request, or
   * an Error the link rejects with) beside the defaults; `messages` are the chat log's messages
   * by id (as foundry.js messageData gives them).
   */
  function install({ settings = new Map(), status = { session_id: null, settings: null }, now = 1_000, replies = {}, messages = {} } = {}) {
    const commands = new Map();
    const handlers = new Map();
    const welcome = [];
    const timers = { pending: [], setTimeout(fn, ms) { this.pending.push({ fn, ms }); return this.pending.length; }, clearTimeout(id) { this.pending[id - 1] = null; }, now: () => now };
    const requests = [];
    const posted = [];
    const updated = [];
    const notices = [];
    const shown = []; // each notice's data
    const reply = {
      dice_session_start: { session_id: COMMITMENT.slice(0, 16), commitment: COMMITMENT, card: { html: "<p>c</p>" } },
      dice_session_end: { session_id: COMMITMENT.slice(0, 16), commitment: COMMITMENT, seed: SEED, card: { html: "<p>r</p>" } },
      dice_status: status,
    };
    installDiceCommands({
      commands: { register: (name, fn) => commands.set(name, fn) },
      relays: { on: (r, a, fn) => handlers.set(`${r}/${a}`, fn), request: (r, a, data) => handlers.get(`${r}/${a}`)(data, { userId: "gm", isGM: true }) },
      link: () => ({
        request: async (m) => {
          requests.push(m);
          const answer = replies[m.type] ?? reply[m.type];
          if (answer instanceof Error) throw answer;
          return typeof answer === "function" ? answer(m) : answer;
        },
      }),
      foundry: {
        createChatMessage: async (data) => { posted.push({ id: `m${posted.length}`, ...data }); return `m${posted.length - 1}`; },
        updateChatMessage: async (id, data) => {
          updated.push([id, data]);
          Object.assign(posted.find((m) => m.id === id) ?? messages[id], data);
        },
        messagesWithFlag: (key) => posted.filter((m) => m.flags[key]).map((m) => ({ id: m.id, content: m.content, flag: m.flags[key] })),
        sha256: hashNow, gmUserIds: () => ["gm"], messageData: (id) => messages[id] ?? null,
        notify: (level, key, data) => { notices.push([level, key]); shown.push(data); },
        getSetting: (key) => settings.get(key) ?? null, setSetting: async (key, value) => settings.set(key, value), isActiveGM: () => true,
      },
      newEventId: () => `ev${requests.length}`,
      timers,
      onWelcome: (listener) => welcome.push(listener),
    });
    // Everything the commands do here settles in microtasks (the link, the fake Foundry and
    // hashNow answer at once), so one turn of the event loop's check phase runs it all: no
    // wall-clock wait that a loaded machine could outrun.
    const flush = () => new Promise((resolve) => setImmediate(resolve));
    return { commands, timers, requests, notices, shown, posted, updated, flush, settings, welcome: () => welcome.forEach((listener) => listener()) };
  }

  /** The bridge's `override_applied` for a `gm_override` (marked: players see the mark). */
  const applied = (m) => ({
    type: "override_applied", event_id: m.event_id, target_event_id: m.target_event_id, message_id: m.message_id,
    result: m.result, marked: true, card: { html: `<p>${m.result}</p>` }, gm_card: { html: "<p>gm</p>" },
  });

  test("an override names the decision a card shows, a chat message the bridge knows, or an event id", async () => {
    const messages = {
      card1: { id: "card1", content: "<p>fate</p>", flags: { [DECISION_FLAG]: "ev-fate", receipt: { seq: 4 } } },
      roll1: { id: "roll1", content: "<p>roll</p>", flags: {} },
    };
    const { commands, requests, posted, updated, flush } = install({ replies: { gm_override: applied }, messages });
    for (const target of ["card1", "roll1", "ev-mythic"]) commands.get("diceoverride")(`${target} Yes | the story`, { isGM: true });
    await flush();
    assert.deepEqual(requests.map((r) => [r.target_event_id, r.message_id]), [["ev-fate", "card1"], ["roll1", "roll1"], ["ev-mythic", null]]);
    // the two chat messages show the hand-set result; the event id alone gets a card of its own
    assert.deepEqual(updated.map(([id, data]) => [id, data.content]), [["card1", "<p>Yes</p>"], ["roll1", "<p>Yes</p>"]]);
    assert.deepEqual(posted.map((m) => [m.content, m.flags]), [["<p>Yes</p>", { override: "ev-mythic" }]]);
  });

  test("an override the bridge refuses (no such decision) shows its reason and posts or changes no card", async () => {
    const refusal = new BridgeError("not_found", "target_event_id: this world holds no decision 'ev-nowhere' to override: give the event id of a decision that passed, or the id of the chat message showing its result", { field: "target_event_id" });
    const messages = { card1: { id: "card1", content: "<p>fate</p>", flags: { [DECISION_FLAG]: "ev-nowhere" } } };
    const { commands, requests, notices, shown, posted, updated, flush } = install({ replies: { gm_override: refusal }, messages });
    commands.get("diceoverride")("ev-nowhere Yes | the story", { isGM: true });
    commands.get("diceoverride")("card1 Yes | the story", { isGM: true });
    await flush();
    assert.deepEqual(requests.map((r) => r.target_event_id), ["ev-nowhere", "ev-nowhere"]);
    assert.deepEqual(notices, [["error", "FATE_BRIDGE.Dice.Refused"], ["error", "FATE_BRIDGE.Dice.Refused"]]);
    assert.deepEqual(shown, [{ message: refusal.message }, { message: refusal.message }]);
    assert.deepEqual([posted, updated, messages.card1.content], [[], [], "<p>fate</p>"]);
  });

  test("start MINUTES ends the session by itself; a bad argument shows the usage; players are refused", async () => {
    const { commands, timers, requests, notices, flush } = install();
    assert.equal(commands.get("dicesession")("start 30", { isGM: true }), false);
    await flush();
    assert.deepEqual(timers.pending.map((t) => t.ms), [30 * 60_000]);
    timers.pending[0].fn();
    await flush();
    assert.deepEqual(requests.map((r) => r.type), ["dice_session_start", "dice_session_end"]);
    assert.deepEqual(notices.at(-1), ["info", "FATE_BRIDGE.Dice.Verified"]);
    commands.get("dicesession")("start 0", { isGM: true });
    commands.get("dicesession")("end", { isGM: false });
    assert.deepEqual(notices.slice(-2), [["info", "FATE_BRIDGE.Dice.Usage"], ["warn", "FATE_BRIDGE.Dice.GmOnly"]]);
    assert.equal(requests.length, 2);
  });

  test("ending by hand clears the schedule", async () => {
    const { commands, timers, requests, flush, settings } = install();
    commands.get("dicesession")("start 5", { isGM: true });
    await flush();
    assert.deepEqual(settings.get(DICE_SCHEDULE_SETTING), { session_id: COMMITMENT.slice(0, 16), ends_at: 1_000 + 5 * 60_000, user_id: "gm" });
    commands.get("dicesession")("end", { isGM: true });
    await flush();
    assert.deepEqual(timers.pending, [null]);
    assert.equal(settings.get(DICE_SCHEDULE_SETTING), null);
    assert.deepEqual(requests.map((r) => r.type), ["dice_session_start", "dice_session_end"]);
  });

  test("after a welcome: the world's dice settings are kept, the planned end of the open session is armed for the time left", async () => {
    const sid = COMMITMENT.slice(0, 16);
    const plan = { session_id: sid, ends_at: 10 * 60_000, user_id: "gm" };
    const allowed = { provable: false, physical_rulesets: ["sohl"], override_mark: "everyone" };
    const { timers, requests, flush, settings, welcome } = install({
      settings: new Map([[DICE_SCHEDULE_SETTING, plan]]), status: { session_id: sid, settings: allowed }, now: 4 * 60_000,
    });
    welcome();
    await flush();
    assert.deepEqual(settings.get(DICE_SETTINGS_SETTING), allowed);
    assert.deepEqual(timers.pending.map((t) => t.ms), [6 * 60_000]);
    welcome(); // a reconnect re-arms, never twice
    await flush();
    assert.deepEqual(timers.pending.map((t) => t?.ms ?? null), [null, 6 * 60_000]);
    timers.pending[1].fn();
    await flush();
    assert.deepEqual(requests.map((r) => r.type), ["dice_status", "dice_status", "dice_session_end"]);
    assert.equal(settings.get(DICE_SCHEDULE_SETTING), null);
  });

  test("a plan whose time passed ends at once; a plan of a session no longer open is dropped", async () => {
    const sid = COMMITMENT.slice(0, 16);
    const late = install({ settings: new Map([[DICE_SCHEDULE_SETTING, { session_id: sid, ends_at: 0, user_id: "gm" }]]), status: { session_id: sid, settings: null } });
    late.welcome();
    await late.flush();
    assert.deepEqual(late.timers.pending.map((t) => t.ms), [0]);
    const stale = install({ settings: new Map([[DICE_SCHEDULE_SETTING, { session_id: "other", ends_at: 9e9, user_id: "gm" }]]), status: { session_id: sid, settings: null } });
    stale.welcome();
    await stale.flush();
    assert.deepEqual(stale.timers.pending, []);
    assert.equal(stale.settings.get(DICE_SCHEDULE_SETTING), null);
  });
});

describe("physical dice: what the world allows, and a list that runs out", () => {
  // The bridge's refusal text (bridge/fairness/dice.py TableDice.roll), as the relay carries it back.
  const runsOut = (given, faces) => new BridgeError("bad_message",
    `physical: ${given} physical dice given, but this roll needs more: die ${given + 1} is a d${faces} (1..${faces})`, { field: "physical" });

  test("the world's settings name the rulesets; the refusal names the next die", () => {
    assert.equal(physicalAllowed({ physical_rulesets: ["sohl", "pool"] }, "pool"), true);
    assert.equal(physicalAllowed({ physical_rulesets: ["sohl"] }, "mythic"), false);
    assert.equal(physicalAllowed(null, "sohl"), false);
    assert.equal(nextPhysicalDie(runsOut(3, 6)), 6);
    assert.equal(nextPhysicalDie(runsOut(1, 8)), 8);
    assert.equal(nextPhysicalDie(new BridgeError("bad_message", "physical[0]: 101 is not a possible d100 roll (allowed 1..100)", { field: "physical[0]" })), null);
    assert.equal(nextPhysicalDie(new BridgeError("not_eligible", "needs more: die 2 is a d6 (1..6)", { field: "physical" })), null);
    assert.equal(nextPhysicalDie(new BridgeError("bad_message", "physical: 2 physical dice given, but this roll used 1", { field: "physical" })), null);
    assert.deepEqual(relayedPhysical([3, 6]), [3, 6]);
    assert.equal(relayedPhysical(undefined), null);
    assert.throws(() => relayedPhysical([1.5]), (error) => error.code === "bad_message" && error.field === "physical");
    assert.throws(() => relayedPhysical(Array(65).fill(1)), /at most 64/);
  });

  test("each die the bridge asks for is thrown and the request sent again, each try on its own", async () => {
    const sent = [];
    const asked = [];
    const bridge = async (physical) => {
      sent.push(physical);
      // a pool of 2d6 that rolled a 6 (and the extra die a 6 again): 2 + 2 dice
      const needed = physical.filter((v) => v === 6).length + 2;
      if (physical.length < needed) throw runsOut(physical.length, 6);
      return { faces: physical };
    };
    const thrown = [6, 2];
    const reply = await withPhysicalDice([3, 6], async (faces, count) => { asked.push([faces, count]); return [thrown.shift()]; }, bridge);
    assert.deepEqual(reply, { faces: [3, 6, 6, 2] });
    assert.deepEqual(sent, [[3, 6], [3, 6, 6], [3, 6, 6, 2]]);
    assert.deepEqual(asked, [[6, 1], [6, 1]]);
  });

  test("bridge dice (null) are sent once; another refusal is not retried", async () => {
    let tries = 0;
    await assert.rejects(withPhysicalDice(null, async () => [1], async () => { tries += 1; throw runsOut(0, 6); }), /needs more/);
    assert.equal(tries, 1);
    await assert.rejects(withPhysicalDice([5], async () => [1], async () => { tries += 1; throw new BridgeError("no_charges", "none left"); }), /none left/);
    assert.equal(tries, 2);
  });
});
