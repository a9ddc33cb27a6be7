/**
 * From a Spend Fate click to the Fate card on every screen (issue 37), in real Chromium pages:
 * the module side of `python -m bench --click` (bench/click.py at the repository's root runs it,
 * then prints the figures).
 *
 * Starts a REAL bridge process (test/helpers/bridge-process.js, rate limit off), a fake Foundry
 * server (test/helpers/foundry-server.js: the module socket and chat messages relayed between the
 * pages as Foundry's server relays them) and Debian's chromium (playwright-core) with three pages,
 * each a browser context of its own running the module's real scripts on the fake Foundry client
 * (test/helpers/foundry-page.js): the GM's (it holds the bridge link), the player's (owner of the
 * Basic Folk actor, an unlimited Lucky Star) and another player's (a viewer). Then, `--warmup`
 * times unmeasured and `--clicks` times measured, one after the other:
 * 1. the player posts a SoHL Archery test card (a public MF, Fate eligible); the GM's browser grades
 *    it through the bridge and the player's page shows Spend Fate;
 * 2. the player clicks Spend Fate (playwright's mouse click); the bench waits until every page
 *    shows the Fate card and the player's page has the GM's `done`;
 * 3. the reference: the player posts a plain chat message; the bench waits until every page shows it.
 *
 * Each page records its own events (foundry-page.js `window.bench`); each page's clock is put on
 * the fake server's by the sync with the shortest round trip (measured before and after the run).
 * Per click, in ms, the hops add up to the total:
 * - `relay`: the click -> the GM's browser sends its first bridge request for that test (the request
 *   over the module socket, the GM's ack, the player's go, the GM reading the card);
 * - `bridge`: the bridge's request -> reply times of that click, summed (the test graded again,
 *   then `fate_spend` -> `fate_resolved`);
 * - `gm`: the rest of the time between the GM's first request and `fate_resolved` (between the two
 *   requests the GM's browser writes the new grading, and the receipt, on the test card: each a server round trip);
 * - `apply`: `fate_resolved` -> the GM's browser asks for the card's ChatMessage (the `fated` flag
 *   written first; a point with charges would have its item updated too, the unlimited Lucky Star not);
 * - `card`: that request -> the card in the chat log of every page (the last of the three);
 * - `total`: the click -> the card in every page.
 * And per plain chat message, `chat`: the player's request -> the message in every page.
 *
 * Usage: node bench/click.js --clicks 200 --warmup 5 --out click.json
 * Writes JSON {clicks: [{relay_ms, bridge_ms, gm_ms, apply_ms, card_ms, total_ms, bridge_requests,
 * cards}], chats: [{chat_ms}], bridge_process: {decisions, mean_ms}, warmup, pages, chromium, clock,
 * errors, notices}; `cards`: page -> Fate cards of that test in its log; `bridge_process`: the
 * bridge's own time per decision over the measured clicks (its `/metrics`), three decisions a
 * click (the first grading, the grading again, the spend). Python: $FATE_BRIDGE_PYTHON, else <repo>/.venv/bin/python. Exit 1 on a failure.
 */
import { writeFileSync } from "node:fs";
import path from "node:path";
import { parseArgs } from "node:util";
import { chromium } from "playwright-core";
import { BridgeProcess, STEP_MS } from "../test/helpers/bridge-process.js";
import { CHROMIUM, CHROMIUM_FLAGS } from "../test/helpers/browser.js";
import { startFoundryServer } from "../test/helpers/foundry-server.js";
import { archeryCard, basicFolk, basicFolkItems } from "../test/helpers/sohl-fixtures.js";
import { LINK } from "../scripts/logic/link-status.js";

const WORLD = "click-world";
/** The pages (the GM holds the bridge link: the only GM, with the token). */
const USERS = Object.freeze({ gm: "benchGamemaster1", player: "benchPlayerOne01", viewer: "benchViewerTwo01" });
const NAMES = Object.freeze({ gm: "Gamemaster", player: "Player One", viewer: "Player Two" });
const MODULE_ID = "fate-bridge";

/**
 * The world of the bench: the three users, the Basic Folk actor (its Lucky Star unlimited, so 200
 * spends never run out). The bridge's address and the GM's token come once the bridge is up.
 */
function benchWorld() {
  const actor = basicFolk();
  const items = basicFolkItems({ auraEml: 55 }).map((item) => (item.name === "Lucky Star" ? { ...item, system: { ...item.system, charges: { value: null, max: null } } } : item));
  return {
    worldId: WORLD,
    users: Object.entries(USERS).map(([role, id]) => ({ id, name: NAMES[role], isGM: role === "gm" })),
    actors: [{ id: actor._id, name: actor.name, type: actor.type, hasPlayerOwner: true, ownership: { [USERS.player]: 3 }, items }],
    settings: { [`${MODULE_ID}.fateOption`]: "everyone" },
    userSettings: { [USERS.gm]: {} },
  };
}

/** The Archery test card as the player's browser posts it (sample 07, message 1). */
function testCard() {
  const { content, speaker, whisper, blind, flags, rolls } = archeryCard().message;
  return { content, speaker, whisper, blind, flags, rolls };
}

/**
 * Open `role`'s page and wait for the module to be loaded. `stored`: what the page's
 * localStorage holds before it loads (Foundry's `client`-scope settings, as JSON text: the GM's
 * bridge token lives there).
 */
async function openPage(browser, foundry, role, errors, stored = {}) {
  const context = await browser.newContext();
  await context.addInitScript((entries) => {
    for (const [key, value] of Object.entries(entries)) localStorage.setItem(key, value);
  }, stored);
  const page = await context.newPage();
  errors[role] = [];
  page.on("pageerror", (error) => errors[role].push(String(error)));
  await page.goto(foundry.pageUrl(USERS[role]));
  await page.waitForFunction(() => window.bench?.ready, null, { timeout: STEP_MS });
  return page;
}

/** Each page's clock against the server's (foundry-page.js bench.sync). */
async function syncClocks(pages) {
  return Object.fromEntries(await Promise.all(Object.entries(pages).map(async ([role, page]) => [role, await page.evaluate(() => window.bench.sync())])));
}

/**
 * One click and one plain chat message, in turn; resolves with the test card's id and the chat's tag.
 */
async function clickAndChat(pages, round) {
  const { player } = pages;
  const testId = await player.evaluate((data) => window.bench.post(data), testCard());
  await player.locator(`li[data-message-id="${testId}"] .fate-bridge-spend button`).click({ timeout: STEP_MS });
  const seen = ([key, least]) => window.bench.count(key) >= least;
  const everywhere = (key) => Promise.all(Object.values(pages).map((page) => page.waitForFunction(seen, [key, 1], { timeout: STEP_MS })));
  await everywhere(`shown:card:${testId}`);
  await player.waitForFunction(seen, ["module-in:done", round + 1], { timeout: STEP_MS });
  await player.evaluate((ping) => window.bench.post({ content: `<p>ping ${ping}</p>`, flags: { bench: { ping } } }), round);
  await everywhere(`shown:ping:${round}`);
  return testId;
}

/**
 * The bridge process's own decision time so far, from its `/metrics` (histogram
 * `fate_bridge_decision_seconds`: a decision's frame handed to the session -> its reply ready):
 * `{count, seconds}`.
 */
async function bridgeDecisions(port) {
  const text = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
  const total = (name) => text.split("\n").filter((line) => line.startsWith(`${name} `) || line.startsWith(`${name}{`))
    .reduce((sum, line) => sum + Number(line.split(" ").at(-1)), 0);
  return { count: total("fate_bridge_decision_seconds_count"), seconds: total("fate_bridge_decision_seconds_sum") };
}

/** The one event of `kind` in `events` that `match` picks, or throws naming what is missing. */
function only(events, kind, match, what) {
  const found = events.filter((event) => event.kind === kind && match(event));
  if (found.length !== 1) throw new Error(`expected one ${what}, found ${found.length}`);
  return found[0];
}

/**
 * The first event of `kind` in `events` that `match` picks, or throws naming what is missing. A
 * second one (a card posted twice) is left to the card counts, which the report checks.
 */
function first(events, kind, match, what) {
  const found = events.find((event) => event.kind === kind && match(event));
  if (!found) throw new Error(`no ${what}`);
  return found;
}

/**
 * The hops of one click (see the file's comment), ms; page times put on the server's clock.
 *
 * @param {Record<string, object[]>} events each page's events, times on the server's clock
 * @param {string} testId the test card clicked
 */
function clickHops(events, testId) {
  const click = only(events.player, "click", (event) => event.id === testId, `click on ${testId}`).t;
  const sent = events.gm.filter((event) => event.kind === "bridge-out" && event.messageId === testId && event.t > click);
  if (!sent.some((frame) => frame.type === "fate_spend")) throw new Error(`no fate_spend for ${testId}`);
  const replyTo = (frame) => only(events.gm, "bridge-in", (event) => event.eventId === frame.eventId, `the bridge's reply to ${frame.type} ${frame.eventId}`);
  const bridge = sent.reduce((sum, frame) => sum + replyTo(frame).t - frame.t, 0);
  const resolved = replyTo(sent.find((frame) => frame.type === "fate_spend")).t;
  const create = first(events.gm, "create", (event) => event.cardFor === testId, `creation of the card of ${testId}`).t;
  const shown = Object.values(events).map((list) => first(list, "shown", (event) => event.cardFor === testId, `card of ${testId} shown`).t);
  const last = Math.max(...shown);
  return {
    relay_ms: sent[0].t - click,
    bridge_ms: bridge,
    gm_ms: resolved - sent[0].t - bridge,
    apply_ms: create - resolved,
    card_ms: last - create,
    total_ms: last - click,
    bridge_requests: sent.map((frame) => frame.type),
  };
}

/** The plain chat message `ping`: the player's request -> shown in every page, ms. */
function chatTrip(events, ping) {
  const create = first(events.player, "create", (event) => event.ping === ping, `creation of chat ${ping}`).t;
  const shown = Object.values(events).map((list) => first(list, "shown", (event) => event.ping === ping, `chat ${ping} shown`).t);
  return { chat_ms: Math.max(...shown) - create };
}

async function main() {
  const { values } = parseArgs({ options: { clicks: { type: "string", default: "200" }, warmup: { type: "string", default: "5" }, out: { type: "string" } } });
  const clicks = Number(values.clicks);
  const warmup = Number(values.warmup);
  if (!Number.isInteger(clicks) || clicks < 1 || !Number.isInteger(warmup) || warmup < 0 || !values.out) {
    throw new Error("usage: node bench/click.js --clicks N (>= 1) --warmup N (>= 0) --out FILE");
  }
  const bridge = new BridgeProcess("fate-bridge-click-");
  // The bridge's default key files go in its temporary folder, not the user's configuration.
  process.env.XDG_CONFIG_HOME = path.join(bridge.dir, "config");
  process.env.XDG_DATA_HOME = path.join(bridge.dir, "data");
  let foundry;
  // Chromium starts while the bridge does.
  const launching = chromium.launch({ executablePath: CHROMIUM, headless: true, args: CHROMIUM_FLAGS });
  try {
    const world = benchWorld();
    foundry = await startFoundryServer(world);
    const errors = {};
    // The players' pages load while the bridge starts; the GM's once it is up, with its address and token.
    const bridgeUp = bridge.addWorldAsync(WORLD).then(async (token) => ({ token, port: await bridge.serve("--rate-limit", "0") }));
    const players = ["player", "viewer"];
    const playerPages = launching.then((browser) => Promise.all(players.map((role) => openPage(browser, foundry, role, errors))));
    const [{ token, port }, opened] = await Promise.all([bridgeUp, playerPages]);
    foundry.setWorldSetting(`${MODULE_ID}.bridgeUrl`, `ws://127.0.0.1:${port}`);
    const browser = await launching;
    const gmStored = { [`${MODULE_ID}.token`]: JSON.stringify(token) };
    const pages = { gm: await openPage(browser, foundry, "gm", errors, gmStored), ...Object.fromEntries(players.map((role, index) => [role, opened[index]])) };
    await pages.gm.locator(`#fate-bridge-link[data-state="${LINK.CONNECTED}"]`).waitFor({ state: "attached", timeout: STEP_MS });
    const tests = [];
    for (let round = 0; round < warmup; round += 1) tests.push(await clickAndChat(pages, round));
    const before = await syncClocks(pages);
    const decisionsBefore = await bridgeDecisions(port);
    for (let round = warmup; round < warmup + clicks; round += 1) tests.push(await clickAndChat(pages, round));
    const decisionsAfter = await bridgeDecisions(port);
    const after = await syncClocks(pages);
    const events = {};
    const cards = {};
    const notices = {};
    for (const [role, page] of Object.entries(pages)) {
      const found = await page.evaluate((ids) => ({ events: window.bench.events, cards: ids.map((id) => window.bench.cardsFor(id)), errors: window.bench.errors, notices: window.bench.notices }), tests);
      // Page time + offset = server time; the offsets before and after the run, averaged.
      const offset = (before[role].offset + after[role].offset) / 2;
      events[role] = found.events.map((event) => ({ ...event, t: event.t + offset }));
      cards[role] = found.cards;
      errors[role].push(...found.errors);
      notices[role] = found.notices;
    }
    const measured = tests.map((testId, round) => ({ round, testId })).slice(warmup);
    const report = {
      clicks: measured.map(({ round, testId }) => ({ ...clickHops(events, testId), cards: Object.fromEntries(Object.keys(pages).map((role) => [role, cards[role][round]])) })),
      chats: measured.map(({ round }) => chatTrip(events, round)),
      bridge_process: {
        decisions: decisionsAfter.count - decisionsBefore.count,
        mean_ms: ((decisionsAfter.seconds - decisionsBefore.seconds) * 1000) / Math.max(1, decisionsAfter.count - decisionsBefore.count),
      },
      warmup,
      pages: Object.keys(pages),
      chromium: browser.version(),
      clock: { before, after },
      errors,
      notices,
    };
    writeFileSync(values.out, `${JSON.stringify(report, null, 2)}\n`);
  } catch (error) {
    throw new Error(`${error?.stack ?? error}\n--- bridge log (end) ---\n${bridge.log.slice(-3000)}`, { cause: error });
  } finally {
    await launching.then((browser) => browser.close(), () => {});
    await foundry?.close();
    bridge.stop();
  }
}

main().catch((error) => {
  console.error(error?.stack ?? error);
  process.exit(1);
});
