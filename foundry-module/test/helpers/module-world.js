/**
 * The real module (main.js and the given rulesets) booted on the fake Foundry of clockedWorld,
 * with a fake bridge socket the test answers by hand: shared by the tests that drive a ruleset's
 * whole flow on one process playing every client (test/physical-dice.test.js,
 * test/dice-so-nice.test.js).
 */
import { install } from "../../scripts/main.js";
import { DICE_SETTINGS_SETTING } from "../../scripts/logic/dice-trust.js";
import { clockedWorld } from "./world-setup.js";
import { until } from "./fake-socket.js";

/**
 * Boot main.js with `rulesets`; the bridge welcomes and its `dice_status` says physical dice are
 * allowed for `physical` (the GM's browser keeps that in the world setting every client reads).
 *
 * @param {Array<{id: string, install: Function}>} rulesets
 * @param {string[]} physical the rulesets the world allows physical dice for
 * @param {{diceSoNice?: boolean}} [options] pretend Dice So Nice is active
 * @returns {Promise<object>} clockedWorld's env plus `handle` (install's) and `socket` (the bridge's)
 */
export async function bootModule(rulesets, physical, { diceSoNice = false } = {}) {
  const env = await clockedWorld(undefined, { diceSoNice });
  env.handle = install({ rulesets });
  for (const hook of ["init", "setup", "ready"]) env.world.callHook(hook);
  env.world.deliverSocket(); // the GM's link announcements (logic/link-holder.js)
  env.socket = env.Socket.instances[0];
  env.socket.open();
  env.socket.receive({ type: "welcome", v: 1, world_id: "e2e-world", bridge_version: "x", rulesets: rulesets.map((r) => r.id), settings: { fate_option: "everyone" } });
  const status = await sentTo(env, "dice_status");
  status.answered = true;
  const settings = { provable: false, physical_rulesets: physical, override_mark: "everyone" };
  env.socket.receive({ type: "dice_status_reply", v: 1, query_id: status.query_id, session_id: null, commitment: null, fingerprint: null, settings });
  await until(() => env.world.registered && globalThis.game.settings.get("fate-bridge", DICE_SETTINGS_SETTING).physical_rulesets.length === physical.length, "the dice settings kept");
  return env;
}

/** The next request of `type` the bridge has not answered yet. */
export const sentTo = (env, type) => until(() => env.socket.sent.find((m) => m.type === type && !m.answered), type);

/** The bridge answers `message` with `reply` (its event_id added). */
export function answerTo(env, message, reply) {
  message.answered = true;
  env.socket.receive({ v: 1, event_id: message.event_id, ...reply });
}

/** A player's relay once it is out: request -> ack -> go -> the GM's handler runs. */
export async function relayAs(env, userId) {
  await until(() => env.world.emitted.some((e) => e.payload.type === "request"), "the relayed request");
  env.world.deliverAs(env.gm);
  env.world.deliverAs(userId);
  env.world.deliverAs(env.gm);
}

/** The GM's done reaches the player; returns every payload delivered (each client receives them all). */
export async function doneFor(env, userId) {
  await until(() => env.world.emitted.some((e) => e.payload.type === "done"), "done");
  return env.world.deliverAs(userId);
}

/** `userId` types `text` in chat (the chatMessage hook). */
export function typeAs(env, userId, text) {
  env.world.asUser(userId);
  return env.world.callHook("chatMessage", {}, text, {});
}
