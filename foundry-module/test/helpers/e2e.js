/**
 * What the end-to-end tests share: one REAL bridge process per test file (started in `before`,
 * stopped in `after`, with the world "e2e-world" the fake Foundry's world id names), the world
 * settings that point the module at it, and the REAL module (main.js) installed on the fake
 * Foundry and connected (hooks run, `welcome` received).
 * Python: $FATE_BRIDGE_PYTHON, else <repo>/.venv/bin/python (BridgeProcess).
 */
import { before, after } from "node:test";
import { install } from "../../scripts/main.js";
import { BridgeProcess } from "./bridge-process.js";
import { uninstallFakeFoundry } from "./fake-foundry.js";

/** The world the end-to-end tests register (the fake Foundry's `game.world.id`). */
export const E2E_WORLD = "e2e-world";

/**
 * Register `before`/`after` hooks for one bridge process of this test file.
 *
 * @param {string} tmpPrefix the temporary folder's prefix (names the test in /tmp)
 * @param {...string} serveArgs extra `bridge serve` arguments
 * @returns {{bridge: BridgeProcess, port: number, token: string,
 *   until(check: Function, what: string, ms?: number): Promise<any>, settings(): object}}
 *   filled in once `before` has run; `until` is BridgeProcess.until; `settings()` the world
 *   settings (token and URL) for `sampleWorld`/`capturedWorld`
 */
export function realBridge(tmpPrefix, ...serveArgs) {
  const real = {
    bridge: undefined,
    port: undefined,
    token: undefined,
    until: (check, what, ms) => real.bridge.until(check, what, ms),
    settings: () => ({ "fate-bridge.token": real.token, "fate-bridge.bridgeUrl": `ws://127.0.0.1:${real.port}` }),
  };
  before(async () => {
    real.bridge = new BridgeProcess(tmpPrefix);
    real.token = real.bridge.addWorld(E2E_WORLD);
    real.port = await real.bridge.serve(...serveArgs);
  });
  after(() => real.bridge?.stop());
  return real;
}

/**
 * Install the module on the fake Foundry (disposed, and the fake Foundry removed, after `t`), run
 * the init/setup/ready hooks and wait for the bridge's `welcome`.
 *
 * @param {import("node:test").TestContext} t
 * @param {{until: Function}} real from realBridge
 * @param {{world: object}} env from sampleWorld/capturedWorld
 * @param {object} [options] install()'s options (rulesets, timers)
 * @returns {Promise<{handle: object, connection: object}>} install()'s handle and its ready connection
 */
export async function startModule(t, real, env, options) {
  let handle;
  t.after(() => {
    handle?.dispose();
    uninstallFakeFoundry();
  });
  handle = install(options);
  for (const hook of ["init", "setup", "ready"]) env.world.callHook(hook);
  env.world.deliverSocket(); // the GM's link announcements (logic/link-holder.js)
  const connection = await real.until(() => handle.connection()?.isReady() && handle.connection(), "welcome");
  return { handle, connection };
}

/**
 * Record every reply `connection.request` resolves with, in order.
 *
 * @param {{request(message: object): Promise<object>}} connection
 * @returns {object[]} the replies (grows as they come)
 */
export function recordReplies(connection) {
  const replies = [];
  const request = connection.request.bind(connection);
  connection.request = async (message) => {
    const reply = await request(message);
    replies.push(reply);
    return reply;
  };
  return replies;
}

/**
 * A player's click relayed over the module socket (the fake world's queue), delivered in turn:
 * the GM's browser takes the request (and acks it), the player's says go, the GM's acts. Leaves
 * the GM as the current user.
 *
 * @param {{world: object, gm: string, player: string}} env from sampleWorld/capturedWorld
 */
export function deliverRelay(env) {
  env.world.asUser(env.gm);
  env.world.deliverSocket();
  env.world.asUser(env.player);
  env.world.deliverSocket();
  env.world.asUser(env.gm);
  env.world.deliverSocket();
}
