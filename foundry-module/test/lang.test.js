/**
 * The module's languages: every `lang/*.json` registered in module.json, German (`de`) with
 * exactly English's keys and placeholders, and the language sent to the bridge in `hello`
 * (`client.language`, Foundry's `game.i18n.lang`) and in the overlay URL (`lang`).
 *
 * Keys added to en.json later fail the key test until de.json has them too (the lead translates
 * them at merge time).
 */
import { test, describe, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, readdirSync } from "node:fs";
import * as fvtt from "../scripts/foundry.js";
import { overlayUrl } from "../scripts/logic/overlay.js";
import { installFakeFoundry, uninstallFakeFoundry } from "./helpers/fake-foundry.js";

const read = (path) => JSON.parse(readFileSync(new URL(`../${path}`, import.meta.url), "utf8"));
const EN = read("lang/en.json");
const DE = read("lang/de.json");
const MANIFEST = read("module.json");
const placeholders = (text) => [...text.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();

test("de.json has exactly en.json's keys", () => {
  const missing = Object.keys(EN).filter((key) => !(key in DE));
  const extra = Object.keys(DE).filter((key) => !(key in EN));
  assert.deepEqual({ missing, extra }, { missing: [], extra: [] });
});

test("every German text is written and keeps its English placeholders", () => {
  for (const [key, english] of Object.entries(EN)) {
    if (!(key in DE)) continue; // reported by the key test
    assert.ok(typeof DE[key] === "string" && DE[key].trim(), `${key} is empty in de.json`);
    assert.deepEqual(placeholders(DE[key]), placeholders(english), `${key}: placeholders differ`);
  }
});

test("German is not English copied: only a text without words stays as it is", () => {
  const same = Object.keys(EN).filter((key) => key in DE && DE[key] === EN[key]);
  assert.deepEqual(same, ["FATE_BRIDGE.Audit.LevelChange"]); // "{before} → {after}"
});

test("module.json registers every lang/*.json, English and German among them", () => {
  const files = readdirSync(new URL("../lang/", import.meta.url)).filter((name) => name.endsWith(".json")).map((name) => `lang/${name}`);
  assert.deepEqual(MANIFEST.languages.map((l) => l.path).sort(), files.sort());
  assert.deepEqual(MANIFEST.languages.map((l) => l.lang).sort(), ["de", "en"]);
  assert.equal(MANIFEST.languages.find((l) => l.lang === "de").name, "Deutsch");
});

describe("hello", () => {
  beforeEach(() => {
    const world = installFakeFoundry();
    world.addUser({ id: "gmUser000000001", name: "Gamemaster", isGM: true });
    world.asUser("gmUser000000001");
  });
  afterEach(() => uninstallFakeFoundry());

  test("client.language is Foundry's game.i18n.lang", () => {
    assert.equal(fvtt.clientInfo().language, "en");
    globalThis.game.i18n.lang = "de";
    assert.equal(fvtt.clientInfo().language, "de");
    assert.equal(fvtt.language(), "de");
  });
});

test("the overlay URL carries the language when given", () => {
  const info = { world_id: "w", viewer_key: "k", path: "overlay" };
  assert.equal(overlayUrl("ws://127.0.0.1:8765", info, "de"), "http://127.0.0.1:8765/overlay?world=w&key=k&lang=de");
  assert.equal(overlayUrl("ws://127.0.0.1:8765", info), "http://127.0.0.1:8765/overlay?world=w&key=k");
});
