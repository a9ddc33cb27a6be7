/**
 * The audit report in a real browser: a REAL bridge process records the four example sessions
 * and 150 SoHL Fate Tests (its own dice) sent over the wire by a forwarder, answers the audit
 * window's `audit_report` with the page, and Debian's chromium (driven by playwright-core) opens
 * the saved file as a GM would. Checks that every section shows, the charts are drawn, the
 * page runs nothing and a hostile actor name stays text; writes `<repo>/test-output/report.png`.
 *
 * Skips (with the reason) only when /usr/bin/chromium is missing: `.ci/run` installs it.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { pathToFileURL } from "node:url";
import { BridgeProcess, REPO } from "./helpers/bridge-process.js";
import { CHROMIUM_SKIP, archery, forwarder, launchChromium } from "./helpers/browser.js";

const WORLD = "report-world";
const HOSTILE = '<img src=x onerror="window.__pwned = true">Wyrda';
const FATE_TESTS = 150;
const SKIP = CHROMIUM_SKIP;

let bridge;
let token;

before(async () => {
  if (SKIP) return;
  bridge = new BridgeProcess("fate-bridge-report-");
  token = bridge.addWorld(WORLD);
  await bridge.serve("--rate-limit", "0");
});

after(() => bridge?.stop());

test("the report page reads well in a real browser: every section, drawn charts, no script, names as text", { skip: SKIP, timeout: 180_000 }, async (t) => {
  const link = await forwarder(bridge, { worldId: WORLD, token });
  t.after(() => link.close());
  for (const example of ["sohl", "hmtw", "mythic", "pool"]) {
    const text = readFileSync(path.join(REPO, "examples", `${example}-session.jsonl`), "utf8").replaceAll('"ev-', `"${example}-ev-`);
    for (const line of text.split("\n").filter(Boolean)) {
      const { dice, ...message } = JSON.parse(line); // the bridge rolls its own dice here
      await link.ask(message);
    }
  }
  for (let n = 0; n < FATE_TESTS; n += 1) {
    const messageId = `msgFate${String(n).padStart(7, "0")}`;
    assert.equal((await link.ask(archery(messageId, n % 3 === 0 ? { actorName: HOSTILE, actorId: "wyrdaActor000001" } : {}))).type, "test_graded");
    const resolved = await link.ask({ type: "fate_spend", event_id: `spend-${messageId}`, message_id: messageId,
      point_id: "luckystar1item0", user_id: "player0000000001", user_name: "Player One" });
    assert.equal(resolved.type, "fate_resolved", JSON.stringify(resolved));
  }
  const page = await link.ask({ type: "audit_report", query_id: "report-1" });
  assert.equal(page.type, "audit_report_page", JSON.stringify(page).slice(0, 300));
  const output = path.join(REPO, "test-output");
  mkdirSync(output, { recursive: true });
  const file = path.join(output, "report.html");
  writeFileSync(file, page.html);

  const context = await launchChromium(bridge.dir, { width: 1100, height: 900 });
  t.after(() => context.close());
  const tab = context.pages()[0] ?? (await context.newPage());
  const pageErrors = [];
  tab.on("pageerror", (error) => pageErrors.push(String(error)));
  await tab.goto(pathToFileURL(file).href);
  assert.equal(await tab.title(), `Fate audit report: ${WORLD}`);
  const headings = await tab.locator("h2").allTextContents();
  assert.deepEqual(headings, ["Fate Test rolls against a fair d100", "Fate spent and kept", "Outcomes per ruleset",
    "Tarot cards drawn (His Majesty the Worm)", "Pool ledger over time"]);
  const charts = await tab.locator(".chart svg").evaluateAll((svgs) => svgs.map((svg) => {
    const box = svg.getBoundingClientRect();
    return { width: Math.round(box.width), height: Math.round(box.height), marks: svg.querySelectorAll("path, rect, use").length };
  }));
  assert.equal(charts.length, 5);
  for (const chart of charts) {
    assert.ok(chart.width >= 400 && chart.height >= 100, `a chart is drawn at a readable size: ${JSON.stringify(chart)}`);
    assert.ok(chart.marks >= 10, `a chart has marks: ${JSON.stringify(chart)}`);
  }
  const verdict = await tab.locator("#d100 .verdict").textContent();
  assert.match(verdict, /Chi-square goodness of fit: χ² = \d+\.\d\d with 9 degrees of freedom, p = \d\.\d{3}\./);
  assert.match(await tab.locator("#d100 p").first().textContent(), new RegExp(`${FATE_TESTS + 2} SoHL Fate Tests`));
  const actors = await tab.locator("#fate table").first().locator("td:first-child").allTextContents();
  assert.ok(actors.includes(HOSTILE), `the hostile name is shown as text: ${JSON.stringify(actors)}`);
  assert.equal(await tab.locator("img").count(), 0);
  assert.equal(await tab.evaluate(() => window.__pwned), undefined);
  assert.match(await tab.locator("#fate").textContent(), /no gap longer than 4 hours/);
  assert.deepEqual(pageErrors, []);
  await tab.screenshot({ path: path.join(output, "report.png"), fullPage: true });
});
