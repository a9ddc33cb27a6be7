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

test("the logic and every ruleset's folder load with no Foundry globals", async () => {
  const folders = ["logic", ...readdirSync(new URL("../scripts/rulesets/", import.meta.url), { withFileTypes: true })
    .filter((entry) => entry.isDirectory()).map((entry) => `rulesets/${entry.name}`)];
  assert.ok(folders.includes("rulesets/sohl"), "SoHL is a ruleset folder like the others");
  for (const folder of folders) {
    for (const name of readdirSync(new URL(`../scripts/${folder}/`, import.meta.url))) {
      assert.equal(typeof globalThis.game, "undefined");
      await import(`../scripts/${folder}/${name}`);
    }
  }
});

test("scripts/foundry.js names no ruleset", () => {
  const text = readFileSync(new URL("../scripts/foundry.js", import.meta.url), "utf8");
  assert.deepEqual(text.match(/\bsohl\w*\(|\bhmtw\w*\(|\bmythic\w*\(|\bpool\w*\(/gi), null);
});
