import { test, describe, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import * as fvtt from "../scripts/foundry.js";
import { createFateFlow, gradedFlag, noticeKey, noticeLevel } from "../scripts/rulesets/sohl/fate-flow.js";
import { rollData } from "../scripts/logic/dice.js";
import { sohlMessageBuilders } from "../scripts/rulesets/sohl/messages.js";
import { BridgeError } from "../scripts/logic/errors.js";
import { createRelayHub } from "../scripts/logic/relay.js";
import { flush } from "./helpers/fake-socket.js";
import { uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { sampleWorld, postArchery } from "./helpers/world-setup.js";

const LUCKY = "mystery00000000";
const BLADE = "mystery00000001";

/** A scripted bridge: answers by message type from `replies`, records what it got. */
function scriptedConnection(replies, { ready = true } = {}) {
  const sent = [];
  return {
    sent,
    isStopped: () => !ready,
    request: async (message) => {
      sent.push(message);
      const reply = replies[message.type]?.(message);
      if (reply instanceof BridgeError) throw reply;
      return reply;
    },
  };
}

const graded = (message, overrides = {}) => ({
  type: "test_graded", v: 1, event_id: message.event_id, message_id: message.message_id, level: 0, label: "MF",
  success: false, critical: false, fate: { eligible: true, reasons: [], fate_ml: 77, points: [LUCKY] }, mismatch: null, ...overrides,
});

const resolved = (message, outcome, { charges = 1, choiceBy = [] } = {}) => ({
  type: "fate_resolved", v: 1, event_id: message.event_id, message_id: message.message_id, fate_roll: 34, fate_ml: 77, fate_level: 1,
  fate_label: "MS", outcome, gain: outcome === "choice" ? null : 1, level_before: 0, label_before: "MF", level_after: outcome === "choice" ? null : 1,
  label_after: outcome === "choice" ? null : "MS", point: { point_id: LUCKY, name: "Lucky Star", charges_after: charges },
  card: {
    title: "Archery: Fate", ruleset: "sohl", speaker_actor_id: "d1cddnpaqRl0a0Q8", speaker_alias: "Basic Folk",
    html: outcome === "choice"
      ? `<div data-fate-bridge-message-id="${message.message_id}"><button data-fate-bridge-choice="spend">Spend</button><button data-fate-bridge-choice="keep">Keep</button></div>`
      : `<div class="fate-bridge-card">${outcome}</div>`,
  },
  effects: outcome === "choice" ? [] : [
    { kind: "update_item", actor_id: "d1cddnpaqRl0a0Q8", item_id: LUCKY, path: "system.charges.value", value: charges, spend_seq: 7 },
    { kind: "flag_message", message_id: message.message_id, key: "fated", value: { outcome } },
  ],
  choice_by: choiceBy,
});

let env;
beforeEach(async () => {
  env = await sampleWorld({ diceSoNice: true });
  env.messageId = await postArchery(env.world);
});
afterEach(() => uninstallFakeFoundry());

/** The BridgeError a refused request rejects with (fails the test when it resolves instead). */
async function refusal(promise) {
  const outcome = await promise.then((value) => ({ resolved: value }), (error) => ({ error }));
  assert.ok(outcome.error instanceof BridgeError, `expected a refusal, got ${JSON.stringify(outcome)}`);
  return outcome.error;
}

const makeFlow = (connection) => createFateFlow({ foundry: fvtt, connection, build: sohlMessageBuilders(fvtt.randomId), domParser: fvtt.domParser() });

describe("grading a card", () => {
  test("sends test_rolled built from the card and the actor, stores the graded flag", async () => {
    const connection = scriptedConnection({ test_rolled: (m) => graded(m, { fate: { eligible: true, reasons: [], fate_ml: 77, points: [BLADE, LUCKY] } }) });
    const result = await makeFlow(connection).gradeMessage(env.messageId);
    assert.equal(result.ok, true);
    const [sent] = connection.sent;
    assert.equal(sent.type, "test_rolled");
    assert.equal(sent.message_id, env.messageId);
    assert.equal(sent.test.eml, 55);
    assert.equal(sent.test.roll, 88);
    assert.deepEqual(sent.actor.owner_user_ids, [env.gm, env.player]);
    assert.deepEqual(sent.actor.aura, { eml: 55, disabled: false });
    assert.deepEqual(env.world.messages.get(env.messageId).flags["fate-bridge"].graded, {
      level: 0, label: "MF", eligible: true, reasons: [], fate_ml: 77,
      points: [
        { point_id: BLADE, name: "Blade of Destiny", charges: null },
        { point_id: LUCKY, name: "Lucky Star", charges: 2 },
      ],
    });
  });

  test("a non-SoHL message is skipped without a request", async () => {
    const other = await env.world.createMessage({ content: "<p>hi</p>" });
    const connection = scriptedConnection({});
    assert.deepEqual(await makeFlow(connection).gradeMessage(other.id), { ok: false, code: "not_sohl" });
    assert.equal(connection.sent.length, 0);
  });

  test("gradedFlag drops ids the snapshot does not know", () => {
    const flag = gradedFlag({ level: 1, label: "MS", fate: { eligible: true, reasons: [], fate_ml: 60, points: ["ghost", LUCKY] } }, [{ point_id: LUCKY, name: "Lucky Star", charges: 2 }]);
    assert.deepEqual(flag.points, [{ point_id: LUCKY, name: "Lucky Star", charges: 2 }]);
  });
});

describe("spending", () => {
  test("re-grades, sends fate_spend with the sender's id, applies effects in order, posts a new card, shows the die", async () => {
    fvtt.installDiceAppearance(); // as main.js does: the dice take the asker's Dice So Nice appearance
    const connection = scriptedConnection({ test_rolled: (m) => graded(m), fate_spend: (m) => resolved(m, "spent") });
    const ok = await makeFlow(connection).requestSpend({ messageId: env.messageId, pointId: LUCKY, userId: env.player });
    assert.equal(ok, true);
    assert.deepEqual(connection.sent.map((m) => m.type), ["test_rolled", "fate_spend"]);
    const spend = connection.sent[1];
    assert.equal(spend.user_id, env.player);
    assert.equal(spend.user_name, "Player One");
    assert.equal(spend.user_is_gm, false, "looked up from Foundry's users");
    assert.equal(spend.point_id, LUCKY);
    assert.equal(env.actor.items.get(LUCKY).system.charges.value, 1);
    // charges and the bridge's spend number land in ONE update; the next snapshot carries it
    assert.deepEqual(env.actor.items.get(LUCKY).updates.at(-1).changes,
      { "system.charges.value": 1, "flags.fate-bridge.spend_seq": 7 });
    // the test's identity (issue 13: a repost is the same test), the grading, the bridge's fated flag
    assert.deepEqual(env.world.flagWrites.map((w) => w.key), ["test_key", "test_of", "test_item", "sohl_fate_actor", "graded", "fated"]);
    const card = [...env.world.messages.values()].at(-1);
    assert.notEqual(card.id, env.messageId);
    assert.equal(card.content, '<div class="fate-bridge-card">spent</div>');
    assert.deepEqual(card.speaker, { scene: null, token: null, actor: "d1cddnpaqRl0a0Q8", alias: "Basic Folk" });
    // A reply without `rolls` (an older bridge): its fate_roll rides on the card as the Roll 1d100 = 34.
    assert.deepEqual(card.rolls.map((roll) => roll.fromData), [rollData([{ faces: 100, results: [34] }])]);
    assert.equal(card.flags["fate-bridge"].card_for, env.messageId);
    assert.equal(card.flags["fate-bridge"].dice_user, env.player);
    // Thrown once on every client (a public test: everyone reads the card), as the player, by
    // Dice So Nice's own interception of the new card; never by a showForRoll of ours.
    assert.equal(env.world.diceShown.length, 0);
    assert.deepEqual(Object.values(env.world.animationsPerClient(card.id)), Array(env.world.users.size).fill(1));
    assert.deepEqual(new Set(env.world.diceAnimations.map((a) => a.userId)), new Set([env.player]));
    assert.deepEqual(env.world.diceAnimations[0].dice, [{ faces: 100, results: [34] }]);
    assert.equal(env.world.notices.length, 0);
  });

  test("a bridge refusal is the request's rejection, its code alone (for the relay's done to the asking window); nothing is applied", async () => {
    for (const code of ["not_eligible", "already_fated", "no_charges", "forbidden", "not_found"]) {
      env.world.emitted.length = 0;
      const before = env.world.messages.size;
      const connection = scriptedConnection({ test_rolled: (m) => graded(m), fate_spend: () => new BridgeError(code, "refused: 'Lucky Star' of Basic Folk") });
      const error = await refusal(makeFlow(connection).requestSpend({ messageId: env.messageId, pointId: LUCKY, userId: env.player }));
      assert.equal(error.code, code);
      assert.doesNotMatch(error.message, /Lucky Star/, "no detail of the bridge's: the done reaches every browser");
      assert.deepEqual(env.world.emitted, [], "no notice to every window of the player");
      assert.equal(env.world.messages.size, before);
      assert.equal(env.actor.items.get(LUCKY).system.charges.value, 2);
      assert.equal(env.world.messages.get(env.messageId).flags["fate-bridge"].fated, undefined);
    }
    assert.equal(env.world.itemUpdates.length, 0);
  });

  test("the GM's own refusal is thrown the same way, and nothing is emitted (its click shows it: rulesets/sohl/index.js)", async () => {
    const connection = scriptedConnection({ test_rolled: (m) => graded(m), fate_spend: () => new BridgeError("no_charges", "none") });
    assert.equal((await refusal(makeFlow(connection).requestSpend({ messageId: env.messageId, pointId: LUCKY, userId: env.gm }))).code, "no_charges");
    assert.deepEqual(env.world.emitted, []);
    assert.deepEqual(env.world.notices, []);
  });

  test("bridge link stopped for good (token refused, superseded): nothing sent, the player is told", async () => {
    const connection = scriptedConnection({}, { ready: false });
    assert.equal((await refusal(makeFlow(connection).requestSpend({ messageId: env.messageId, pointId: LUCKY, userId: env.player }))).code, "bridge_down");
    assert.equal(connection.sent.length, 0);
  });

  test("an effect naming a missing item: nothing applied, the GM told here and the player by the rejection", async () => {
    const connection = scriptedConnection({
      test_rolled: (m) => graded(m),
      fate_spend: (m) => {
        const reply = resolved(m, "spent");
        reply.effects.push({ kind: "update_item", actor_id: "d1cddnpaqRl0a0Q8", item_id: "gone", path: "system.charges.value", value: 0 });
        return reply;
      },
    });
    assert.equal((await refusal(makeFlow(connection).requestSpend({ messageId: env.messageId, pointId: LUCKY, userId: env.player }))).code, "apply_failed");
    assert.equal(env.world.itemUpdates.length, 0);
    assert.equal(env.world.messages.get(env.messageId).flags["fate-bridge"].fated, undefined);
    assert.deepEqual(env.world.notices.map((n) => [n.level, n.userId]), [["error", env.gm]]);
  });

  test("the same player in two windows clicks at once: the window whose click won gets its card and no refusal; the other alone is told", async () => {
    // The GM's browser and the player's two windows, each with its own relay hub, on one socket
    // that hands a payload to every other window with the sender's user id, as Foundry's server
    // does (both of the player's windows carry the same id).
    const connection = scriptedConnection({ test_rolled: (m) => graded(m), fate_spend: (m) => resolved(m, "spent") });
    const flow = makeFlow(connection);
    const wire = [];
    const windows = { gm: { id: env.gm, isGM: true }, first: { id: env.player, isGM: false }, second: { id: env.player, isGM: false } };
    const hubs = Object.fromEntries(Object.entries(windows).map(([name, user]) => {
      let n = 0;
      const hub = createRelayHub({
        timers: { setTimeout: () => 0, clearTimeout: () => {} },
        newId: () => `${name}-${++n}`,
        port: {
          send: (payload) => wire.push({ payload: structuredClone(payload), from: name }),
          isLinkHolder: () => name === "gm",
          linkHolderId: () => env.gm,
          currentUser: () => user,
          isGMUser: (id) => id === env.gm,
        },
      });
      hub.on("sohl", "spend", (data, sender) => flow.requestSpend({ messageId: data.message_id, pointId: data.point_id, userId: sender.userId }));
      return [name, hub];
    }));
    const deliver = () => {
      for (const { payload, from } of wire.splice(0)) for (const [name, hub] of Object.entries(hubs)) if (name !== from) hub.receive(payload, windows[from].id);
    };
    const click = { message_id: env.messageId, point_id: LUCKY };
    const outcomes = ["first", "second"].map((name) => hubs[name].request("sohl", "spend", click).then((applied) => ({ applied }), (error) => ({ code: error.code })));
    const cardsBefore = env.world.messages.size;
    for (let round = 0; round < 10; round += 1) { // request, ack, go, the handlers, done: a few socket round trips
      deliver();
      await flush();
    }
    assert.deepEqual(await Promise.all(outcomes), [{ applied: true }, { code: "already_fated" }]);
    assert.equal(env.world.messages.size, cardsBefore + 1, "one Fate card");
    assert.deepEqual(connection.sent.filter((m) => m.type === "fate_spend").length, 1);
    assert.deepEqual(env.world.emitted, [], "no notice to every window of the player");
  });

  test("unknown error codes read as internal", () => {
    assert.equal(noticeKey("something_new"), "FATE_BRIDGE.Error.internal");
    assert.equal(noticeKey("forbidden"), "FATE_BRIDGE.Error.forbidden");
    assert.deepEqual(["forbidden", "gm_no_answer", "relay_expired", "internal", "apply_failed", "something_new"].map(noticeLevel), ["warn", "warn", "warn", "error", "error", "error"]);
  });
});

describe("choice", () => {
  test("a choice card is posted with choice_by; the answer replaces its content", async () => {
    const connection = scriptedConnection({
      test_rolled: (m) => graded(m),
      fate_spend: (m) => resolved(m, "choice", { choiceBy: [env.gm, env.player] }),
      fate_choice: (m) => resolved(m, "kept", { charges: 2 }),
    });
    const flow = makeFlow(connection);
    await flow.requestSpend({ messageId: env.messageId, pointId: LUCKY, userId: env.player });
    const choiceCard = [...env.world.messages.values()].at(-1);
    assert.deepEqual(choiceCard.flags["fate-bridge"].choice_by, [env.gm, env.player]);
    assert.equal(env.world.messages.get(env.messageId).flags["fate-bridge"].pending_choice_card, choiceCard.id);
    const count = env.world.messages.size;

    assert.equal(await flow.requestChoice({ messageId: env.messageId, choice: "keep", userId: env.player }), true);
    const answer = connection.sent.at(-1);
    assert.deepEqual([answer.type, answer.choice, answer.user_id], ["fate_choice", "keep", env.player]);
    assert.equal(env.world.messages.size, count);
    assert.equal(choiceCard.content, '<div class="fate-bridge-card">kept</div>');
    assert.deepEqual(choiceCard.flags["fate-bridge"].choice_by, []);
    assert.equal(env.world.messages.get(env.messageId).flags["fate-bridge"].pending_choice_card, null);
    // The choice card's die was thrown once per client when it was posted; the answer (an update
    // of its content, no new Roll) throws none.
    assert.equal(env.world.diceShown.length, 0);
    assert.deepEqual(Object.values(env.world.animationsPerClient()), Array(env.world.users.size).fill(1));
  });

  test("a GM answering a player's Critical Success choice sends user_is_gm: true", async () => {
    const connection = scriptedConnection({
      test_rolled: (m) => graded(m),
      fate_spend: (m) => resolved(m, "choice", { choiceBy: [env.player] }),
      fate_choice: (m) => resolved(m, "spent", { charges: 1 }),
    });
    const flow = makeFlow(connection);
    await flow.requestSpend({ messageId: env.messageId, pointId: LUCKY, userId: env.player });
    assert.equal(await flow.requestChoice({ messageId: env.messageId, choice: "spend", userId: env.gm }), true);
    const answer = connection.sent.at(-1);
    assert.deepEqual([answer.type, answer.user_id, answer.user_name, answer.user_is_gm], ["fate_choice", env.gm, "Gamemaster", true]);
    assert.equal(connection.sent[1].user_is_gm, false, "the player's spend");
  });
});

test("the Fate Test's d100 as Roll data is an evaluated 1d100 with the bridge's value", () => {
  const data = rollData([{ faces: 100, results: [7] }]);
  assert.equal(data.formula, "1d100");
  assert.equal(data.total, 7);
  assert.equal(data.terms[0].faces, 100);
  assert.deepEqual(data.terms[0].results, [{ result: 7, active: true }]);
});
