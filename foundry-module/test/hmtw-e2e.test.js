/**
 * End to end for His Majesty the Worm: a REAL bridge process (`python -m bridge serve`) drawing
 * from its own decks with its own CSPRNG, and the REAL module code (main.js with the hmtw ruleset,
 * on the fake Foundry globals, `ws` as the WebSocket). The cards are random, so the assertions
 * follow from what the bridge reports. Python: $FATE_BRIDGE_PYTHON, else <repo>/.venv/bin/python.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { WebSocket } from "ws";
import * as hmtw from "../scripts/rulesets/hmtw/index.js";
import { deliverRelay, realBridge, startModule } from "./helpers/e2e.js";
import { sampleWorld } from "./helpers/world-setup.js";

/** Pentacles 2 fails unless a Knight, Queen or King comes up (45 of 57 cards): 30 tries all but surely fail once. */
const MAX_TESTS = 30;
const OBSTACLE = "the sea witch's conch";

const real = realBridge("fate-bridge-hmtw-e2e-", "--rate-limit", "0");
/** Poll `check` until it returns a truthy value or `ms` pass (BridgeProcess.until). */
const { until } = real;

test("tests of fate drawn by the bridge: a failure binds the obstacle, the drawer pushes, the GM clears it and reads the decks", async (t) => {
  const env = await sampleWorld({ WebSocket, settings: real.settings(), diceSoNice: true });
  globalThis.game.system = { id: "hmtw-foundry", version: "0.1.0" };
  const silan = env.world.addActor({ id: "RECONhmtwActor01", name: "Silán Storysoul", hasPlayerOwner: true, ownership: { [env.player]: 3 } });
  silan.system = { swords: 4, pentacles: 2, cups: 3, wands: 0 };
  const { connection } = await startModule(t, real, env, { rulesets: [hmtw] });
  const replies = [];
  const request = connection.request.bind(connection);
  connection.request = async (message) => {
    try {
      const reply = await request(message);
      replies.push(reply);
      return reply;
    } catch (error) {
      replies.push({ type: "error", code: error.code, message: error.message });
      throw error;
    }
  };
  /** The player's relayed request, all the way: request, ack, go, the GM's work, done. */
  async function relayed(count) {
    deliverRelay(env);
    await until(() => replies.length > count && env.world.emitted.some((e) => e.payload.type === "done"), "the GM's work");
    env.world.asUser(env.player);
    env.world.deliverSocket();
    return replies.at(-1);
  }
  const playerTypes = (text) => {
    env.world.asUser(env.player);
    assert.equal(env.world.callHook("chatMessage", {}, text, {}), false);
  };

  env.world.asUser(env.player);
  env.world.controlToken(silan);

  // 1. Tests of Pentacles 2 against the conch until one fails (a success does not bind it).
  let failed = null;
  for (let n = 0; n < MAX_TESTS && !failed; n += 1) {
    const size = env.world.messages.size;
    playerTypes(`/tof pentacles "${OBSTACLE}"`);
    const reply = await relayed(replies.length);
    assert.equal(reply.type, "hmtw_tested", JSON.stringify(reply));
    const { test: drawn } = reply;
    assert.equal(drawn.total, drawn.first.value + 2, "card + Pentacles 2");
    assert.equal(drawn.outcome === "failure", drawn.total <= 13);
    assert.equal(reply.bound, drawn.outcome === "failure", "a failure binds the obstacle (H9)");
    await until(() => env.world.messages.size >= size + 1, "the card");
    if (drawn.outcome === "failure") failed = { reply, card: [...env.world.messages.values()][size] };
  }
  assert.ok(failed, `no failure in ${MAX_TESTS} tests`);
  t.diagnostic(`failed on ${failed.reply.test.first.name}: ${failed.reply.test.total}`);
  assert.equal(failed.card.content, failed.reply.card.html);
  assert.deepEqual(failed.reply.test.push_by, [env.player]);

  // 2. The obstacle is bound by fate: the next test against it is refused, nothing drawn.
  const notices = env.world.notices.length;
  playerTypes(`/tof pentacles "${OBSTACLE.toUpperCase()}"`);
  const refusal = await relayed(replies.length);
  assert.equal(refusal.code, "not_eligible");
  await until(() => env.world.notices.length > notices, "the refusal told");
  assert.match(env.world.notices.at(-1).text, /bound by fate/);

  // 3. Only the drawer sees "Push fate"; the push draws one more card.
  env.world.asUser(env.gm);
  assert.equal(env.world.render(failed.card.id).querySelector("[data-fate-bridge-hmtw-push]"), null);
  env.world.asUser(env.player);
  env.world.render(failed.card.id).querySelector("[data-fate-bridge-hmtw-push]").click();
  const pushed = await relayed(replies.length);
  assert.equal(pushed.type, "hmtw_tested", JSON.stringify(pushed));
  const { test: after } = pushed;
  t.diagnostic(`pushed ${after.pushed.name}: ${after.total} ${after.outcome}`);
  assert.equal(after.total, failed.reply.test.total + after.pushed.value);
  assert.equal(after.outcome, after.pushed.code !== "fool" && after.total >= 14 ? "success" : "great_failure", "H6");
  assert.equal(pushed.bound, after.outcome === "great_failure");
  await until(() => failed.card.flags["fate-bridge"][hmtw.FLAGS.PUSHED], "the pushed flag");
  env.world.asUser(env.player);
  assert.equal(env.world.render(failed.card.id).querySelector("[data-fate-bridge-hmtw-push]"), null, "pushed once only");

  // 4. The GM clears the obstacle if it is still bound, then reads the decks (whispered).
  env.world.asUser(env.gm);
  if (pushed.bound) {
    env.world.callHook("chatMessage", {}, `/tof clear "${OBSTACLE}"`, {});
    const cleared = await until(() => replies.find((r) => r.type === "hmtw_obstacle_cleared"), "the obstacle cleared");
    assert.equal(cleared.obstacle, OBSTACLE);
  }
  const size = env.world.messages.size;
  env.world.callHook("chatMessage", {}, "/tof decks", {});
  const decks = await until(() => replies.find((r) => r.type === "hmtw_decks"), "the deck status");
  assert.equal(decks.decks.player_on_table, 0, "H14: the pushed test is finished, its cards discarded");
  assert.equal(decks.decks.player_undrawn + decks.decks.player_discarded, 57);
  assert.equal(decks.decks.gm_undrawn, 21);
  assert.deepEqual(decks.bound, []);
  await until(() => env.world.messages.size > size, "the status card");
  assert.deepEqual([...env.world.messages.values()].at(-1).whisper, [env.gm]);
  await until(() => /type=hmtw_push/.test(real.bridge.log), "the push decision's log line");

  // Issue 24: each draw rides on its (public) card as a Roll, thrown once on every client as the
  // drawer; the deck status rolls nothing, and nothing is thrown twice.
  const withDice = [...env.world.messages.values()].filter((m) => m.rolls.length);
  assert.ok(withDice.length >= 2, "the tests and the push drew");
  for (const message of env.world.messages.values()) {
    assert.deepEqual(Object.values(env.world.animationsPerClient(message.id)), message.rolls.length ? [1, 1, 1] : [0, 0, 0], message.content);
  }
  assert.equal(env.world.diceAnimations.length, 3 * withDice.length);
  assert.deepEqual(new Set(env.world.diceAnimations.map((a) => a.userId)), new Set([env.player]));
  assert.deepEqual(env.world.diceShown, []);
});
