/**
 * The /verify page in a real browser (issue 25): a REAL bridge process records the SoHL and Mythic
 * example sessions sent over the wire by a forwarder (no dice session), stops cleanly (a signed
 * head) and exports the trail in each of `audit export`'s formats. Debian's chromium (playwright-core)
 * opens the landing page, follows its link to /verify, and loads each file: the whole-trail
 * `.trail.json` and the `--format jsonl` lines pass, saying what was checked (the hash chain of N
 * records, M signed heads, no dice session); the CSV summary is refused saying why and what to
 * export instead; a changed record fails. The page is styled (not the browser's default Times).
 * Writes `<repo>/test-output/verify.png`.
 *
 * Skips (with the reason) only when /usr/bin/chromium is missing: `.ci/run` installs it.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import path from "node:path";
import { BridgeProcess, REPO, STEP_MS } from "./helpers/bridge-process.js";
import { CHROMIUM_SKIP, forwarder, launchChromium } from "./helpers/browser.js";

const WORLD = "verify-world";
const SKIP = CHROMIUM_SKIP;

let bridge;
let token;

before(async () => {
  if (SKIP) return;
  bridge = new BridgeProcess("fate-bridge-verify-");
  token = bridge.addWorld(WORLD);
  await bridge.serve("--rate-limit", "0");
});

after(() => bridge?.stop());

test("the /verify page: linked from the landing page, styled, takes every checkable export and says what it checked", { skip: SKIP, timeout: 180_000 }, async (t) => {
  const link = await forwarder(bridge, { worldId: WORLD, token });
  for (const example of ["sohl", "mythic"]) {
    const text = readFileSync(path.join(REPO, "examples", `${example}-session.jsonl`), "utf8").replaceAll('"ev-', `"${example}-ev-`);
    for (const line of text.split("\n").filter(Boolean)) {
      const { dice, ...message } = JSON.parse(line); // the bridge rolls its own dice here
      await link.ask(message);
    }
  }
  link.close();
  await bridge.pause(); // a clean stop signs the chain's head
  const files = {
    trail: path.join(bridge.dir, `${WORLD}.trail.json`),
    jsonl: path.join(bridge.dir, "trail.jsonl"),
    csv: path.join(bridge.dir, "summary.csv"),
  };
  bridge.cli("audit", "export", "--world", WORLD, "--out", files.trail);
  bridge.cli("audit", "export", "--world", WORLD, "--format", "jsonl", "--out", files.jsonl);
  bridge.cli("audit", "export", "--world", WORLD, "--format", "csv", "--out", files.csv);
  const trail = JSON.parse(readFileSync(files.trail, "utf8"));
  const records = trail.records.length;
  assert.ok(records >= 10 && trail.heads.length >= 1, `a trail with records and heads: ${records}, ${trail.heads.length}`);
  const port = await bridge.resume();

  const context = await launchChromium(bridge.dir, { width: 1100, height: 900 });
  t.after(() => context.close());
  const page = context.pages()[0] ?? (await context.newPage());
  const pageErrors = [];
  page.on("pageerror", (error) => pageErrors.push(String(error)));
  await page.goto(`http://127.0.0.1:${port}/`);
  await page.locator('a[href="/verify"]').click();
  await page.waitForURL(`http://127.0.0.1:${port}/verify`);
  assert.equal(await page.locator("h1").textContent(), "Check a fate-bridge trail");
  const font = await page.evaluate(() => getComputedStyle(document.body).fontFamily);
  assert.match(font, /system-ui/, "the page's own style, not the browser default");
  assert.equal(await page.evaluate(() => getComputedStyle(document.body).backgroundColor), "rgb(250, 248, 244)");

  const verdictOf = async (file) => {
    await page.locator("#trail").setInputFiles(file);
    const last = page.locator("#result p").last();
    await last.waitFor({ timeout: STEP_MS });
    return last;
  };
  let verdict = await verdictOf(files.trail);
  assert.equal(await verdict.getAttribute("class"), "verdict pass");
  const trailText = await verdict.textContent();
  assert.match(trailText, new RegExp(`^PASS: the hash chain of world ${WORLD}: ${records} records recomputed and linked; `
    + `${trail.heads.length} signed heads? of ${trail.heads.length} checked against the chain \\(signed by key [0-9a-f]{16}`));
  assert.match(trailText, /no dice session in this trail: dice are recomputed only for rolls made inside a \/dicesession\.$/);
  assert.doesNotMatch(trailText, /PASS: 0 dice/);
  const output = path.join(REPO, "test-output");
  mkdirSync(output, { recursive: true });
  await page.screenshot({ path: path.join(output, "verify.png"), fullPage: true });

  verdict = await verdictOf(files.jsonl);
  assert.match(await verdict.textContent(), new RegExp(`^PASS: the hash chain of world ${WORLD}: ${records} records recomputed and linked; no signed heads: a --format jsonl export carries none`));

  verdict = await verdictOf(files.csv);
  assert.equal(await verdict.getAttribute("class"), "fail");
  assert.match(await verdict.textContent(), /^this is the CSV summary export \(--format csv\): it has no records or hashes to check; export a trail with `fate-bridge audit export --world WORLD --out WORLD\.trail\.json`/);

  const changed = JSON.parse(readFileSync(files.trail, "utf8"));
  changed.records[3].record.note = "added after the fact"; // any change to a record's bytes
  writeFileSync(path.join(bridge.dir, "changed.trail.json"), JSON.stringify(changed));
  verdict = await verdictOf(path.join(bridge.dir, "changed.trail.json"));
  assert.equal(await verdict.textContent(), "FAIL: 1 problem (listed above)");
  assert.match(await page.locator("#result").textContent(), new RegExp(`record ${changed.records[3].seq} was changed after it was written`));
  assert.deepEqual(pageErrors, []);
});
