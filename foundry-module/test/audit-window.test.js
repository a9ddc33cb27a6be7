/**
 * The audit window through the real main.js on the fake Foundry globals (FakeApplicationV2),
 * talking to a fake bridge socket driven by the test.
 */
import { test, describe, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { install } from "../scripts/main.js";
import { uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { clockedWorld, restoreTimers } from "./helpers/world-setup.js";

const WELCOME = { type: "welcome", v: 1, world_id: "e2e-world", bridge_version: "x", rulesets: ["sohl"], settings: { fate_option: "everyone" } };
const HOSTILE = '<img src=x onerror="globalThis.pwned=1">';

let env;
let lastApp = null;

async function boot({ welcome = true } = {}) {
  lastApp = null;
  env = await clockedWorld();
  env.handle = install();
  for (const hook of ["init", "setup", "ready"]) env.world.callHook(hook);
  env.world.deliverSocket(); // the GM's link announcements (logic/link-holder.js)
  env.socket = env.Socket.instances[0];
  if (welcome) {
    env.socket.open();
    env.socket.receive(WELCOME);
  }
}
const savedTz = process.env.TZ;
afterEach(async () => {
  if (savedTz === undefined) delete process.env.TZ;
  else process.env.TZ = savedTz;
  env?.handle.dispose();
  await lastApp?.settled(); // a query cut off by dispose() settles and re-renders before the fakes go
  restoreTimers();
  uninstallFakeFoundry();
});

const queries = () => env.socket.sent.filter((m) => m.type === "audit_query");
const windowEl = () => env.world.dom.window.document.querySelector(".fate-bridge-audit");
const statusText = () => windowEl()?.querySelector(".fate-bridge-audit-status")?.textContent ?? null;
const rowsText = () => [...windowEl().querySelectorAll("tbody tr")].map((tr) => [...tr.querySelectorAll("td")].slice(0, 8).map((td) => td.textContent));

/** An AuditSummary as the bridge sends it. */
const record = (seq, overrides = {}) => ({
  seq, ts: "2024-05-01T12:34:56.789Z", type: "fate_spend", event_id: `ev${seq}`, user_id: "playerUser00001", ruleset: "sohl",
  message_id: null, actor_id: "d1cddnpaqRl0a0Q8", actor_name: "Basic Folk", test_name: "Archery", outcome: "spent",
  level_before: 0, level_after: 1, label_before: "MF", label_after: "MS", fate_roll: 34, point_name: "Lucky Star", ...overrides,
});

/** Let promise chains run (macrotask turns; no clock time passes). */
async function until(check) {
  for (let turn = 0; turn < 100; turn += 1) {
    const value = check();
    if (value) return value;
    await new Promise((resolve) => setImmediate(resolve));
  }
  throw new Error("condition never held");
}

describe("opening", () => {
  beforeEach(() => boot());

  test("a GM-only settings menu opens the window class; /fateaudit opens it too and posts nothing", async () => {
    const menu = env.world.menus.get("fate-bridge.audit");
    assert.equal(menu.restricted, true);
    assert.equal(menu.type, env.handle.auditWindow());
    assert.equal(env.world.callHook("chatMessage", {}, "<p>/fateaudit</p>", {}), false, "the command is not posted");
    const query = await until(() => queries()[0]);
    env.socket.receive({ type: "audit_page", v: 1, query_id: query.query_id, records: [], next_before: null });
    await until(() => statusText() === "No records match these filters.");
    assert.equal(queries().length, 1);
    assert.equal(env.world.callHook("chatMessage", {}, "hello table", {}), true, "other chat is left alone");
  });

  test("a non-GM can never open it: not by command, not by constructing the class", async () => {
    env.world.asUser(env.player);
    env.world.notices.length = 0;
    assert.equal(env.world.callHook("chatMessage", {}, "/fateaudit", {}), false);
    const Window = env.handle.auditWindow();
    const app = new Window();
    await app.render(true);
    assert.equal(app.rendered, false);
    assert.equal(windowEl(), null);
    assert.deepEqual(env.world.notices.map((n) => n.text), ["Only a GM can open the Fate audit.", "Only a GM can open the Fate audit."]);
    assert.equal(queries().length, 0);
  });
});

describe("listing", () => {
  beforeEach(async () => {
    await boot();
    const Window = env.handle.auditWindow();
    lastApp = new Window();
    await lastApp.render(true);
  });

  test("the first query asks for the newest 50 records; rows show labels, names, user names", async () => {
    const [query] = queries();
    assert.deepEqual(query, { type: "audit_query", v: 1, query_id: query.query_id, limit: 50 });
    assert.equal(statusText(), "Asking the bridge…");
    env.socket.receive({ type: "audit_page", v: 1, query_id: query.query_id, records: [record(2), record(1, { outcome: "already_fated", user_id: "gmUser000000001", fate_roll: null, point_name: null, label_after: null, level_after: null })], next_before: null });
    await lastApp.settled();
    const rows = rowsText();
    assert.equal(rows.length, 2);
    assert.deepEqual(rows[0].slice(1), ["Basic Folk", "Archery", "MF → MS", "34", "Lucky Star", "spent", "Player One"]);
    assert.deepEqual(rows[1].slice(1), ["Basic Folk", "Archery", "MF", "—", "—", "refused: already fated", "Gamemaster"]);
    assert.equal(statusText(), null);
    assert.equal(windowEl().querySelector(".fate-bridge-audit-older"), null, "no next_before: no Load older");
  });

  test("hostile actor, test, point and user names stay text", async () => {
    env.world.users.get(env.player).name = HOSTILE;
    const [query] = queries();
    env.socket.receive({ type: "audit_page", v: 1, query_id: query.query_id, records: [record(1, { actor_name: HOSTILE, test_name: HOSTILE, point_name: HOSTILE })], next_before: null });
    await lastApp.settled();
    assert.equal(windowEl().querySelector("img"), null);
    const [row] = rowsText();
    assert.deepEqual([row[1], row[2], row[5], row[7]], [HOSTILE, HOSTILE, HOSTILE, HOSTILE]);
    assert.equal(globalThis.pwned, undefined);
  });

  test("Load older sends before_seq = next_before with the same filters and appends the rows", async () => {
    const [first] = queries();
    env.socket.receive({ type: "audit_page", v: 1, query_id: first.query_id, records: [record(60), record(59)], next_before: 59 });
    await lastApp.settled();
    windowEl().querySelector(".fate-bridge-audit-older").click();
    const older = await until(() => queries()[1]);
    assert.deepEqual(older, { type: "audit_query", v: 1, query_id: older.query_id, before_seq: 59, limit: 50 });
    env.socket.receive({ type: "audit_page", v: 1, query_id: older.query_id, records: [record(12)], next_before: null });
    await lastApp.settled();
    assert.deepEqual([...windowEl().querySelectorAll("tbody tr")].map((tr) => tr.dataset.seq), ["60", "59", "12"]);
    assert.equal(windowEl().querySelector(".fate-bridge-audit-older"), null);
  });

  test("the filter form builds the query: actor from the world's actors, outcome, dates", async () => {
    process.env.TZ = "UTC";
    const form = windowEl().querySelector("form");
    const actorOptions = [...form.querySelectorAll('select[name="actorId"] option')].map((o) => [o.value, o.textContent]);
    assert.deepEqual(actorOptions, [["", "All actors"], ["d1cddnpaqRl0a0Q8", "Basic Folk"]]);
    form.querySelector('select[name="actorId"]').value = "d1cddnpaqRl0a0Q8";
    form.querySelector('select[name="outcome"]').value = "lost";
    form.querySelector('input[name="since"]').value = "2024-05-01";
    form.querySelector('input[name="until"]').value = "2024-05-02";
    form.querySelector("button[type=submit]").click();
    const query = await until(() => queries()[1]);
    assert.deepEqual(query, {
      type: "audit_query", v: 1, query_id: query.query_id, actor_id: "d1cddnpaqRl0a0Q8", outcome: "lost",
      since: "2024-05-01T00:00:00.000Z", until: "2024-05-03T00:00:00.000Z", limit: 50,
    });
    assert.equal(windowEl().querySelector('select[name="outcome"]').value, "lost", "the form keeps its values across renders");
  });

  test("a record's message link scrolls to the message and highlights it; a deleted one says so", async () => {
    const doc = env.world.dom.window.document;
    const message = await env.world.createMessage({ content: "<p>test card</p>" });
    // v13+ puts a copy of a recent message in the notification pane, before the sidebar's log.
    const pane = doc.createElement("div");
    pane.id = "chat-notifications";
    pane.innerHTML = `<ol class="chat-log"><li class="chat-message" data-message-id="${message.id}"></li></ol>`;
    doc.body.append(pane);
    const log = doc.createElement("ol");
    log.className = "chat-log";
    const li = doc.createElement("li");
    li.className = "chat-message message";
    li.dataset.messageId = message.id;
    log.append(li);
    doc.body.append(log);
    const [query] = queries();
    env.socket.receive({ type: "audit_page", v: 1, query_id: query.query_id, records: [record(2, { message_id: message.id }), record(1, { message_id: "deletedMsg00001" })], next_before: null });
    await lastApp.settled();
    const links = windowEl().querySelectorAll(".fate-bridge-audit-show");
    assert.equal(links.length, 2);
    links[0].click();
    assert.equal(li.classList.contains("fate-bridge-highlight"), true);
    assert.equal(pane.querySelector(".fate-bridge-highlight"), null, "the notification pane's copy is left alone");
    env.clock.advance(3_000);
    assert.equal(li.classList.contains("fate-bridge-highlight"), false);
    links[1].click();
    assert.equal(env.world.notices.at(-1).text, "That chat message no longer exists.");
  });

  test("a query the bridge never answers ends in a clear error after the request timeout", async () => {
    env.clock.advance(15_000);
    await lastApp.settled();
    assert.equal(statusText(), "The bridge did not return the audit page (timeout). Try again.");
  });
});

test("bridge down: the window says so and sends nothing", async () => {
  await boot({ welcome: false });
  const Window = env.handle.auditWindow();
  lastApp = new Window();
  await lastApp.render(true);
  await lastApp.settled();
  assert.match(statusText(), /^The Fate bridge is not connected from this browser/);
  assert.equal(env.socket.sent.length, 0);
  assert.equal(windowEl().querySelector("table"), null);
});
