/**
 * The audit report in German in a real browser (issue 37): Debian's chromium (playwright-core)
 * opens the page `fate-bridge audit report --lang de` wrote from the four example sessions, in a
 * 1280 px wide window. Every table and chart lies inside the page (nothing to scroll sideways), and
 * the charts name outcomes and rulesets in German words, never by their codes.
 *
 * Skips (with the reason) only when /usr/bin/chromium is missing. Writes
 * `<repo>/test-output/report-de-1280.png (test/report-browser.test.js has the English page)` (the whole page).
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdirSync, readFileSync } from "node:fs";
import path from "node:path";
import { BridgeProcess, PYTHON, REPO } from "./helpers/bridge-process.js";
import { CHROMIUM_SKIP, launchChromium } from "./helpers/browser.js";

const EXAMPLES = ["sohl", "hmtw", "mythic", "pool"];
/** Outcome and ruleset codes the trail holds: none may name a bar or a panel. */
const CODES = ["failure", "great_failure", "not_eligible", "forbidden", "exceptional_yes", "passed", "gm_draw", "spent", "hmtw", "mythic", "sohl"];

test("the German report fits a 1280 px page and names every outcome in German", { skip: CHROMIUM_SKIP, timeout: 120_000 }, async (t) => {
  const bridge = new BridgeProcess("fate-bridge-report-");
  // One world, every example (their event ids kept apart), as `resolve` plays them.
  const lines = EXAMPLES.map((name) => readFileSync(path.join(REPO, "examples", `${name}-session.jsonl`), "utf8").replaceAll('"ev-', `"${name}-ev-`)).join("");
  execFileSync(PYTHON, ["-m", "bridge", "resolve", "--db", bridge.db], { cwd: REPO, input: lines, encoding: "utf8", stdio: ["pipe", "ignore", "ignore"] });
  const page = path.join(bridge.dir, "report.html");
  bridge.cli("audit", "report", "--world", "offline", "--lang", "de", "--out", page);

  const context = await launchChromium(bridge.dir, { width: 1280, height: 900 });
  t.after(() => context.close());
  const tab = context.pages()[0] ?? (await context.newPage());
  await tab.goto(`file://${page}`);
  const layout = await tab.evaluate(() => {
    const main = document.querySelector("main");
    const right = main.getBoundingClientRect().right - Number.parseFloat(getComputedStyle(main).paddingRight);
    return {
      scrollWidth: document.documentElement.scrollWidth,
      right,
      parts: [...document.querySelectorAll("table, .chart svg")].map((part) => ({ what: part.tagName, right: part.getBoundingClientRect().right })),
      svgText: [...document.querySelectorAll("svg text")].map((text) => text.textContent).join(" | "),
    };
  });
  assert.ok(layout.scrollWidth <= 1280, `nothing to scroll sideways: ${layout.scrollWidth}`);
  for (const part of layout.parts) assert.ok(part.right <= layout.right + 0.5, `inside the page's column: ${JSON.stringify(part)} vs ${layout.right}`);
  for (const words of ["Fehlschlag", "nicht zulässig", "Würfelpool", "Mythic-Schicksalstabelle", "Bestanden"]) {
    assert.ok(layout.svgText.includes(words), `${words} in ${layout.svgText}`);
  }
  const found = new Set(layout.svgText.match(/[a-z_]+/g));
  assert.deepEqual(CODES.filter((code) => found.has(code)), [], layout.svgText);
  const output = path.join(REPO, "test-output");
  mkdirSync(output, { recursive: true });
  await tab.screenshot({ path: path.join(output, "report-de-1280.png"), fullPage: true });
  await bridge.stop();
});
