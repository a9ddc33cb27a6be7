/**
 * No route to Fate around the bridge (issue 24): in a SoHL world this module serves, SoHL's own
 * Fate entries (the sheet's Fate cell, the card's Fate button through its bound intrinsic action,
 * a macro's `item.logic.fateTest`) spend nothing and say where Fate is spent now, on every render
 * of the sheet. SoHL's routes are faked as SoHL 0.8.2 runs them (helpers/fake-sohl.js).
 */
import { test, afterEach } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { install } from "../scripts/main.js";
import * as sohlRuleset from "../scripts/rulesets/sohl/index.js";
import * as fvtt from "../scripts/foundry.js";
import { ROUTE_CLOSED_KEY, ROUTE_OPEN_KEY, SOHL_FATE_HOSTS } from "../scripts/rulesets/sohl/routes.js";
import { uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { installFakeSohl, uninstallFakeSohl } from "./helpers/fake-sohl.js";
import { fakeWebSocketClass } from "./helpers/fake-socket.js";
import { CAPTURED_IDS, capturedWorld } from "./helpers/world-setup.js";

const EN = JSON.parse(readFileSync(new URL("../lang/en.json", import.meta.url), "utf8"));
const LUCKY = "mystery00000000";

let handle;
afterEach(() => {
  handle?.dispose();
  handle = undefined;
  uninstallFakeSohl();
  uninstallFakeFoundry();
});

/**
 * A world booted as Foundry boots it: SoHL's and our `init`, `i18nInit`, the Documents (SoHL's
 * item logic), `setup`, `ready`. `withModule: false` boots SoHL alone.
 */
async function boot({ withModule = true, systemId = "sohl", sohlGlobal = true } = {}) {
  // The bridge link stays unopened (a fake socket): the notices are SoHL's routes' alone.
  const env = await capturedWorld({ WebSocket: fakeWebSocketClass(), settings: { "fate-bridge.token": "secret" } });
  globalThis.game.system.id = systemId;
  env.sohl = installFakeSohl(env.world);
  if (!sohlGlobal) globalThis.Hooks.once("init", () => { globalThis.sohl = { document: {} }; });
  if (withModule) handle = install({ rulesets: [sohlRuleset] });
  env.world.callHook("init");
  env.world.callHook("i18nInit");
  if (sohlGlobal) env.sohl.prepareDocuments();
  env.world.callHook("setup");
  env.world.callHook("ready");
  return env;
}

/** Click the Fate cell of `itemId` in a freshly rendered sheet of the actor, as the player. */
async function clickSheetFate(env, sheet) {
  env.world.asUser(env.player);
  await sheet.render(true);
  const cell = sheet.element.querySelector(`[data-item-id="${CAPTURED_IDS.item}"] [data-action="fateTest"]`);
  assert.ok(cell, "the sheet shows the Fate cell");
  cell.click();
  await sheet.lastAction;
}

const charges = (env) => env.actor.items.get(LUCKY).system.charges.value;

test("the fake is live: without the module, SoHL's sheet Fate cell spends a charge and posts its Fate card", async () => {
  const env = await boot({ withModule: false });
  const before = env.world.messages.size;
  await clickSheetFate(env, new env.sohl.BeingSheet({ document: env.actor }));
  assert.equal(charges(env), 1, "SoHL spent one of Lucky Star's two charges");
  assert.equal(env.sohl.fateTests.length, 1);
  assert.equal(env.world.messages.size, before + 1, "SoHL posted its Fate card");
});

test("with the module, the sheet's Fate cell spends nothing and says where Fate is spent, on every render", async () => {
  const env = await boot();
  const sheet = new env.sohl.BeingSheet({ document: env.actor });
  const before = env.world.messages.size;
  for (const round of [1, 2, 3]) {
    await clickSheetFate(env, sheet); // each call renders the sheet again, as SoHL does on any update
    assert.equal(env.world.notices.length, round);
    assert.deepEqual(env.world.notices.at(-1), { level: "info", text: EN[ROUTE_CLOSED_KEY], userId: env.player });
  }
  assert.equal(charges(env), 2, "no charge spent");
  assert.deepEqual(env.world.itemUpdates, []);
  assert.deepEqual(env.sohl.fateTests, []);
  assert.equal(env.world.messages.size, before, "no Fate card, no repost");
});

test("the card's Fate button (its intrinsic action, bound as SoHL builds the logic) and a macro's fateTest are closed too", async () => {
  const env = await boot();
  env.world.asUser(env.player);
  const logic = env.actor.items.get(CAPTURED_IDS.item).logic;
  await env.sohl.dispatchChatCardAction(logic, "fateTest", { priorTestResult: { successLevel: 0 } });
  await logic.fateTest({}); // a macro: item.logic.fateTest(...)
  const aura = [...env.actor.items.values()].find((item) => item.type === "attribute");
  await aura.logic.fateTest({});
  assert.deepEqual(env.world.notices.map((n) => n.text), [EN[ROUTE_CLOSED_KEY], EN[ROUTE_CLOSED_KEY], EN[ROUTE_CLOSED_KEY]]);
  assert.equal(charges(env), 2);
  assert.deepEqual(env.sohl.fateTests, []);
});

test("in another system's world nothing of the game system is replaced", async () => {
  const env = await boot({ systemId: "hm3" });
  await clickSheetFate(env, new env.sohl.BeingSheet({ document: env.actor }));
  assert.equal(charges(env), 1, "the classes named like SoHL's are left as they were");
  assert.ok(!env.world.notices.some((n) => n.text === EN[ROUTE_OPEN_KEY]), "and no GM warning");
});

test("a SoHL version without the Fate hosts: the route stays open and the GM is told at ready", async () => {
  const env = await boot({ sohlGlobal: false });
  assert.deepEqual(env.world.notices, [{ level: "warn", text: EN[ROUTE_OPEN_KEY], userId: env.gm }]);
});

test("wrapClassMethod: replaces once, on the prototype; a missing class or method is reported, not thrown", () => {
  class Host { async fateTest() { return "sohl"; } }
  globalThis.fakeSystem = { logic: { Host } };
  try {
    const made = [];
    const wrap = (original) => { made.push(original); return async function replaced() { return "bridge"; }; };
    assert.equal(fvtt.wrapClassMethod("fakeSystem.logic.Host", "fateTest", wrap), true);
    assert.equal(fvtt.wrapClassMethod("fakeSystem.logic.Host", "fateTest", wrap), true);
    assert.equal(made.length, 1, "a replaced method is not replaced again");
    assert.equal(made[0].name, "fateTest", "the replacement is given the original");
    assert.equal(Object.hasOwn(new Host(), "fateTest"), false);
    assert.equal(fvtt.wrapClassMethod("fakeSystem.logic.Missing", "fateTest", wrap), false);
    assert.equal(fvtt.wrapClassMethod("fakeSystem.logic.Host", "noSuchMethod", wrap), false);
    assert.equal(fvtt.wrapClassMethod("nothing.here", "fateTest", wrap), false);
  } finally {
    delete globalThis.fakeSystem;
  }
});

test("the hosts closed are SoHL's two Fate hosts", () => {
  assert.deepEqual(SOHL_FATE_HOSTS, ["sohl.document.item.logic.SkillLogic", "sohl.document.item.logic.AttributeLogic"]);
});
