// The module manifest: what Foundry reads before any script runs.
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const manifest = JSON.parse(readFileSync(join(root, "module.json"), "utf8"));

test("module.json names the module, Foundry 13-14 and the socket", () => {
  assert.equal(manifest.id, "fate-bridge");
  assert.deepEqual(manifest.compatibility, { minimum: "13", verified: "14" });
  assert.equal(manifest.socket, true);
});

test("every file the manifest loads exists", () => {
  const files = [...manifest.esmodules, ...manifest.styles, ...manifest.languages.map((l) => l.path)];
  assert.ok(files.length >= 3);
  for (const file of files) assert.ok(existsSync(join(root, file)), `${file} is missing`);
});

test("no system restriction: the Fate Chart and dice-pool Fate work in any system; SoHL is recommended", () => {
  assert.equal(manifest.relationships.systems, undefined);
  assert.deepEqual(manifest.relationships.recommends.map((r) => [r.id, r.type]), [["sohl", "system"]]);
});
