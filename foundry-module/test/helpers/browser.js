/**
 * What the real-browser tests share: Debian's chromium driven by playwright-core (never a
 * downloaded browser), the flags the project runs it with, the skip reason when it is missing, and
 * the GM's forwarder speaking the wire contract over `ws` to a BridgeProcess.
 */
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import path from "node:path";
import { WebSocket } from "ws";
import { chromium } from "playwright-core";

export const CHROMIUM = "/usr/bin/chromium";
/** The flags the project runs chromium with: no GPU, no network of its own, no first-run UI. */
export const CHROMIUM_FLAGS = [
  "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
  "--disable-background-networking", "--disable-component-update", "--disable-sync",
];
/** A test's `skip`: false, or why it cannot run here. */
export const CHROMIUM_SKIP = existsSync(CHROMIUM) ? false : `${CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium; .ci/run does)`;

/**
 * @param {string} dir a temporary folder for the browser profile
 * @param {{width: number, height: number}} [viewport] playwright's default when absent
 * @param {string} [profile] the profile's folder name inside `dir` (one per browser a test file opens)
 * @param {string[]} [extraArgs] chromium flags on top of CHROMIUM_FLAGS
 * @returns {Promise<import("playwright-core").BrowserContext>}
 */
export function launchChromium(dir, viewport, profile = "chromium-profile", extraArgs = []) {
  return chromium.launchPersistentContext(path.join(dir, profile), {
    executablePath: CHROMIUM, headless: true, args: [...CHROMIUM_FLAGS, ...extraArgs], viewport,
  });
}

/**
 * The GM's forwarder on `bridge` (a started BridgeProcess): `ask` sends one message and awaits its
 * reply (BridgeProcess.until bounds the wait).
 *
 * @param {import("./bridge-process.js").BridgeProcess} bridge
 * @param {{worldId: string, token: string}} world
 * @returns {Promise<{ask(message: object): Promise<object>, close(): void}>} after `welcome`
 */
export async function forwarder(bridge, { worldId, token }) {
  const ws = new WebSocket(`ws://127.0.0.1:${bridge.port}`, { maxPayload: 16 * 1024 * 1024 });
  const inbox = [];
  ws.on("message", (data) => inbox.push(JSON.parse(String(data))));
  await new Promise((resolve, reject) => {
    ws.once("open", resolve);
    ws.once("error", reject);
  });
  const ask = async (message) => {
    const seen = inbox.length;
    ws.send(JSON.stringify({ v: 1, ...message }));
    return bridge.until(() => inbox[seen], `the reply to ${message.type}`);
  };
  const client = { module_version: "0.1.0", foundry_version: "13.345", system_id: "sohl", system_version: "0.9.0" };
  assert.equal((await ask({ type: "hello", world_id: worldId, token, client })).type, "welcome");
  return { ask, close: () => ws.close() };
}

/**
 * Basic Folk's Archery `test_rolled` (EML 55, rolled 88: MF; Fate ML 77, an unlimited Lucky Star).
 *
 * @param {string} messageId
 * @param {{visibility?: string, actorName?: string, actorId?: string}} [options]
 * @returns {object} the message (without `v`: `ask` adds it)
 */
export function archery(messageId, { visibility = "public", actorName = "Basic Folk", actorId = "d1cddnpaqRl0a0Q8" } = {}) {
  return {
    type: "test_rolled", event_id: `rolled-${messageId}`, ruleset: "sohl", message_id: messageId, visibility,
    actor: {
      actor_id: actorId, name: actorName, player_owned: true, owner_user_ids: ["player0000000001"],
      aura: { eml: 55, disabled: false }, aural_shock: false,
      fate_points: [{ point_id: "luckystar1item0", name: "Lucky Star", skill_code: null, charges: null }],
    },
    test: { kind: "skill", code: "archery", name: "Archery Test", eml: 55, roll: 88, level_mod: 0, basis: [], basic: false },
  };
}
