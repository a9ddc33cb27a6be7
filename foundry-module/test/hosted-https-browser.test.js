/**
 * Issue 34, in a real browser: Foundry served over https from elsewhere (The Forge, a rented
 * server), the bridge on the GM's own computer at `ws://127.0.0.1:PORT`. Debian's chromium (driven
 * by playwright-core) loads a page standing in for the Foundry page over https, with a certificate
 * made for this run, from an origin chromium takes as public (`--ip-address-space-overrides`, the
 * flag Chrome's Local Network Access guide gives for testing: developer.chrome.com/docs/
 * modern-web-guidance/guides/security/local-network-access). The page runs the module's own
 * scripts (scripts/foundry.js, logic/connection.js, logic/link-status.js, logic/messages.js) and
 * connects to a REAL bridge process.
 *
 * Without the permission chromium blocks the link (Local Network Access, for WebSockets since
 * Chrome 147) and the GM's notice names the browser's permission as read from
 * `navigator.permissions`; with it granted (playwright's "local-network-access", which grants
 * Chromium's local-network and loopback-network) the link connects and a Spend Fate round-trips.
 * Not mixed content in either case: loopback is potentially trustworthy.
 *
 * Skips (with the reason) only when /usr/bin/chromium is missing: `.ci/run` installs it.
 */
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { createHash, createPublicKey } from "node:crypto";
import { readFileSync } from "node:fs";
import { createServer } from "node:https";
import path from "node:path";
import { BridgeProcess, REPO, STEP_MS } from "./helpers/bridge-process.js";
import { CHROMIUM_SKIP, archery, launchChromium } from "./helpers/browser.js";
import { CAUSE, DEVICE_PERMISSIONS, LINK, PERMISSION } from "../scripts/logic/link-status.js";

const WORLD = "hosted-world";
/** The stand-in page's host name: not this computer's (a page on localhost is never asked), mapped to 127.0.0.1 in chromium. */
const PAGE_HOST = "foundry.test";
const SKIP = CHROMIUM_SKIP;
const MODULE = path.join(REPO, "foundry-module");
/** What a file name ends with -> its content type (a module script must be served as JavaScript). */
const TYPES = { ".js": "text/javascript", ".json": "application/json", ".html": "text/html" };

/**
 * The stand-in for the Foundry page: the GM's link as main.js wires it (startConnection), with
 * Foundry's notifications and localization replaced by a list and lang/en.json. `window.gm` holds
 * the connection, the notices and what the module read of the permission.
 */
const PAGE_SCRIPT = `
import * as fvtt from "/scripts/foundry.js";
import { BridgeConnection } from "/scripts/logic/connection.js";
import { createLinkStatus, linkBadge } from "/scripts/logic/link-status.js";
import { messageBuilders, PROTOCOL_VERSION } from "/scripts/logic/messages.js";

const query = new URLSearchParams(location.search);
const url = query.get("bridge");
const en = await (await fetch("/lang/en.json")).json();
// Foundry's Localization#format: {name} takes data[name]
const localize = (key, data) => (data ? en[key].replace(/{(\\w+)}/g, (_, name) => data[name]) : en[key]);
const notices = [];
const permissionReads = [];
const link = createLinkStatus({
  url, pageProtocol: fvtt.pageProtocol(), pageHost: fvtt.pageHost(), moduleVersion: "0.1.0", protocolVersion: PROTOCOL_VERSION,
  notify: (level, key, data) => notices.push({ level, key, data, text: localize(key, data) }),
  localize,
  show: (view) => fvtt.showLinkBadge(linkBadge(view, localize)),
  permissionState: async (names) => {
    const state = await fvtt.permissionState(names);
    permissionReads.push({ names: [...names], state });
    return state;
  },
});
const build = messageBuilders(() => crypto.randomUUID());
const client = { module_version: "0.1.0", foundry_version: "13.345", system_id: "sohl", system_version: "0.9.0" };
const connection = new BridgeConnection({
  url,
  hello: () => build.hello({ worldId: query.get("world"), token: query.get("token"), client }),
  ping: build.ping,
  WebSocket: fvtt.webSocketClass(),
  timers: fvtt.timers(),
  onStatus: link.status,
  onWelcome: link.welcome,
  onRefused: link.refused,
});
window.gm = { connection, notices, permissionReads, ask: (message) => connection.request({ v: PROTOCOL_VERSION, ...message }) };
connection.start();
`;

let bridge;
let token;
let pages;
let pageOrigin;
/** chromium flags: PAGE_HOST is 127.0.0.1, the page's address is public, and this run's certificate is trusted. */
let flags;

/** A self-signed certificate for PAGE_HOST, made for this run; its key and the SPKI hash chromium trusts. */
function makeCertificate(dir) {
  const key = path.join(dir, "page-key.pem");
  const cert = path.join(dir, "page-cert.pem");
  execFileSync("openssl", ["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "1",
    "-subj", `/CN=${PAGE_HOST}`, "-addext", `subjectAltName=DNS:${PAGE_HOST}`, "-keyout", key, "-out", cert], { stdio: "ignore" });
  const pem = readFileSync(cert);
  const spki = createPublicKey(pem).export({ type: "spki", format: "der" });
  return { key: readFileSync(key), cert: pem, spki: createHash("sha256").update(spki).digest("base64") };
}

/** The https server of the stand-in page: `/` the page, `/gm.js` its script, `/scripts/...` and `/lang/...` the module's files. */
function servePage({ key, cert }) {
  const server = createServer({ key, cert }, (request, response) => {
    const { pathname } = new URL(request.url, "https://page");
    let body = null;
    let type = TYPES[".html"];
    if (pathname === "/") body = '<!doctype html><html lang="en"><title>Foundry (stand-in)</title><body><script type="module" src="/gm.js"></script></body></html>';
    else if (pathname === "/gm.js") [body, type] = [PAGE_SCRIPT, TYPES[".js"]];
    else if (pathname.startsWith("/scripts/") || pathname.startsWith("/lang/")) {
      const file = path.join(MODULE, path.normalize(pathname));
      if (file.startsWith(`${MODULE}${path.sep}`) && TYPES[path.extname(file)]) {
        try {
          [body, type] = [readFileSync(file), TYPES[path.extname(file)]];
        } catch {
          body = null;
        }
      }
    }
    response.writeHead(body === null ? 404 : 200, { "content-type": type });
    response.end(body ?? "not found");
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}

before(async () => {
  if (SKIP) return;
  bridge = new BridgeProcess("fate-bridge-hosted-");
  token = bridge.addWorld(WORLD);
  const certificate = makeCertificate(bridge.dir);
  pages = await servePage(certificate);
  pageOrigin = `https://${PAGE_HOST}:${pages.address().port}`;
  flags = [`--host-resolver-rules=MAP ${PAGE_HOST} 127.0.0.1`, `--ip-address-space-overrides=127.0.0.1:${pages.address().port}=public`,
    `--ignore-certificate-errors-spki-list=${certificate.spki}`];
  await bridge.serve("--origins", pageOrigin);
});

after(() => {
  pages?.close();
  bridge?.stop();
});

/** Chromium (closed after `t`) on the stand-in page, linked to this file's bridge; its page errors collected. */
async function openPage(t, profile, { grant = false } = {}) {
  const context = await launchChromium(bridge.dir, undefined, profile, flags);
  t.after(() => context.close());
  if (grant) await context.grantPermissions(["local-network-access"], { origin: pageOrigin });
  const page = context.pages()[0] ?? (await context.newPage());
  const pageErrors = [];
  page.on("pageerror", (error) => pageErrors.push(String(error)));
  const query = new URLSearchParams({ bridge: `ws://127.0.0.1:${bridge.port}`, world: WORLD, token });
  await page.goto(`${pageOrigin}/?${query}`);
  await page.waitForFunction(() => window.gm, null, { timeout: STEP_MS });
  assert.equal(await page.evaluate(() => window.isSecureContext), true, "the stand-in page is https:// and trusted");
  return { page, pageErrors };
}

test("without the local-network permission, the GM is told it is the browser's permission, not mixed content", { skip: SKIP }, async (t) => {
  const { page, pageErrors } = await openPage(t, "chromium-profile-asked");
  await page.waitForFunction(() => window.gm.notices.length > 0, null, { timeout: STEP_MS });
  const { notices, permissionReads } = await page.evaluate(() => ({ notices: window.gm.notices, permissionReads: window.gm.permissionReads }));
  // Headless chromium answers its own question ("denied"); a GM's browser shows it (then "prompt" until answered).
  const [read] = permissionReads;
  assert.deepEqual(read.names, DEVICE_PERMISSIONS);
  assert.ok([PERMISSION.DENIED, PERMISSION.PROMPT].includes(read.state), `the browser's answer: ${read.state}`);
  const cause = read.state === PERMISSION.DENIED ? CAUSE.DEVICE_BLOCKED : CAUSE.DEVICE_ASK;
  const en = JSON.parse(readFileSync(path.join(MODULE, "lang/en.json"), "utf8"));
  const url = `ws://127.0.0.1:${bridge.port}`;
  assert.deepEqual(notices, [{
    level: "error", key: "FATE_BRIDGE.Link.Notice.Unreachable", data: { url, cause: en[`FATE_BRIDGE.Link.Cause.${cause}`] },
    text: en["FATE_BRIDGE.Link.Notice.Unreachable"].replace("{url}", url).replace("{cause}", en[`FATE_BRIDGE.Link.Cause.${cause}`]),
  }]);
  t.diagnostic(`${read.state}: ${notices[0].text}`);
  assert.ok(!notices[0].text.includes("wss://"), "not sent to set up TLS");
  // The badge says so too.
  const badge = page.locator("#fate-bridge-link");
  assert.equal(await badge.getAttribute("data-state"), LINK.CONNECTING);
  assert.ok((await badge.getAttribute("title")).includes(en[`FATE_BRIDGE.Link.Cause.${cause}`]));
  assert.deepEqual(pageErrors, []);
});

test("with the permission granted, the link connects and a Spend Fate round-trips", { skip: SKIP }, async (t) => {
  const { page, pageErrors } = await openPage(t, "chromium-profile-granted", { grant: true });
  await page.locator(`#fate-bridge-link[data-state="${LINK.CONNECTED}"]`).waitFor({ state: "attached", timeout: STEP_MS });
  // Nothing failed, so the module asked nothing; the browser holds the grant under Chromium's name.
  assert.deepEqual(await page.evaluate(async (names) => ({ reads: window.gm.permissionReads, state: (await navigator.permissions.query({ name: names[0] })).state }), DEVICE_PERMISSIONS),
    { reads: [], state: PERMISSION.GRANTED });
  assert.deepEqual(await page.evaluate(() => window.gm.notices.map((n) => n.key)), ["FATE_BRIDGE.Status.Connected"]);

  const graded = await page.evaluate((message) => window.gm.ask(message), archery("msgHosted0001"));
  assert.equal(graded.type, "test_graded", JSON.stringify(graded));
  const resolved = await page.evaluate((message) => window.gm.ask(message), {
    type: "fate_spend", event_id: "spend-msgHosted0001", message_id: "msgHosted0001",
    point_id: "luckystar1item0", user_id: "player0000000001", user_name: "Player One",
  });
  assert.equal(resolved.type, "fate_resolved", JSON.stringify(resolved));
  assert.equal(resolved.fate_ml, 77);
  assert.ok(Number.isInteger(resolved.fate_roll) && resolved.fate_roll >= 1 && resolved.fate_roll <= 100, JSON.stringify(resolved));
  t.diagnostic(`Fate Test ${resolved.fate_roll} vs ${resolved.fate_ml}: ${resolved.outcome}`);
  // The bridge took the GM's page origin (serve --origins) and recorded the decision.
  const spends = bridge.cli("audit", "export", "--world", WORLD, "--format", "jsonl").split("\n").filter(Boolean)
    .map((line) => JSON.parse(line).record).filter((record) => record.type === "fate_spend");
  assert.equal(spends.length, 1);
  assert.deepEqual(pageErrors, []);
});
