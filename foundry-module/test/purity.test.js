import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";

const FOUNDRY_GLOBALS = /(?<![\w.$/-])(game|Hooks|ui|ChatMessage|Roll|CONFIG|canvas|fromUuid|fromUuidSync)\s*[.(]|(?<![\w.$/-])foundry\.(utils|applications|documents)\b/;

/** Every script but foundry.js: logic, wiring, the audit window, the ruleset api and the rulesets. */
function sources() {
  return readdirSync(new URL("../scripts/", import.meta.url), { recursive: true })
    .filter((name) => name.endsWith(".js") && name !== "foundry.js")
    .map((name) => `scripts/${name}`);
}

test("the check covers the wiring, the ruleset api and the rulesets", () => {
  const files = sources();
  for (const file of ["scripts/main.js", "scripts/module.js", "scripts/ruleset-api.js", "scripts/audit-window.js", "scripts/rulesets/index.js", "scripts/logic/relay.js"]) {
    assert.ok(files.includes(file), file);
  }
  assert.equal(files.includes("scripts/foundry.js"), false);
});

test("no Foundry global outside scripts/foundry.js", () => {
  const offenders = [];
  for (const file of sources()) {
    readFileSync(new URL(`../${file}`, import.meta.url), "utf8").split("\n").forEach((line, index) => {
      const code = line.replace(/\/\*.*?\*\//g, "").replace(/\/\/.*$/, "").replace(/^\s*\/?\*.*$/, "");
      if (FOUNDRY_GLOBALS.test(code)) offenders.push(`${file}:${index + 1}: ${line.trim()}`);
    });
  }
  assert.deepEqual(offenders, []);
});

test("the pattern catches what it must", () => {
  for (const bad of ["game.user.id", "Hooks.on('x')", "ui.notifications.warn('x')", "ChatMessage.create({})", "Roll.fromData(d)", "foundry.utils.randomID()", "fromUuid('x')", "canvas.tokens.controlled"]) {
    assert.equal(FOUNDRY_GLOBALS.test(bad), true, bad);
  }
  assert.equal(FOUNDRY_GLOBALS.test("fvtt.onHook('init')"), false);
  assert.equal(FOUNDRY_GLOBALS.test('import { decorateCard } from "./logic/card-ui.js";'), false);
});

test("the logic loads with no Foundry globals", async () => {
  for (const name of readdirSync(new URL("../scripts/logic/", import.meta.url))) {
    assert.equal(typeof globalThis.game, "undefined");
    await import(`../scripts/logic/${name}`);
  }
});
