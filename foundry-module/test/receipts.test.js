/**
 * Receipts in the module (issue 15): the GM's client keeps a reply's receipt on the ChatMessage it
 * posts (flags["fate-bridge"].receipt), and the GM's audit window checks every receipt of the chat
 * log with the bridge ("Check receipts"), exports them for `fate-bridge audit verify --receipts`,
 * and downloads the bridge's report. Real module code (main.js, ruleset-api.js, fate-flow.js,
 * audit-window.js) on the fake Foundry globals and a fake bridge socket.
 */
import { test, describe, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import * as fvtt from "../scripts/foundry.js";
import { install } from "../scripts/main.js";
import { createFateFlow } from "../scripts/rulesets/sohl/fate-flow.js";
import { sohlMessageBuilders } from "../scripts/rulesets/sohl/messages.js";
import {
  DECISION_FLAG, MAX_RECEIPT_BATCH, MAX_RECEIPT_PATH, MAX_RECEIPTS_PER_CHECK, RECEIPT_FLAG, collectReceipts, createReceiptsChecker, receiptOf,
  receiptsExport, withRecord,
} from "../scripts/logic/receipts.js";
import { uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { postArchery, sampleWorld, clockedWorld, restoreTimers } from "./helpers/world-setup.js";
import { until } from "./helpers/fake-socket.js";

const WORLD = "e2e-world";
const receipt = (seq, overrides = {}) => ({
  world_id: WORLD, seq, record_hash: String(seq).padStart(64, "a"), key_id: "0123456789abcdef", sig: `sig${seq}`, ...overrides,
});
/** A v2 receipt (signed with its batch, issue 17): leaf `index` of a batch of `size`. */
const batched = (seq, index = 2, size = 5) => receipt(seq, {
  batch_size: size, batch_index: index, path: ["A".repeat(43), "B".repeat(43), `${seq}`.padStart(43, "C")],
});

describe("receipts as data", () => {
  test("receiptOf keeps the five fields of a well-formed v1 receipt and nothing else", () => {
    assert.deepEqual(receiptOf({ receipt: { ...receipt(3), extra: "x" } }), receipt(3));
    assert.equal(receiptOf({}), null);
    assert.equal(receiptOf({ receipt: { ...receipt(3), seq: 0 } }), null);
    assert.equal(receiptOf({ receipt: { ...receipt(3), sig: "" } }), null);
    assert.equal(receiptOf({ receipt: { ...receipt(3), record_hash: 7 } }), null);
    assert.deepEqual(withRecord({ receipt: receipt(2) }, { a: 1 }), { a: 1, [RECEIPT_FLAG]: receipt(2) });
    assert.deepEqual(withRecord({}, { a: 1 }), { a: 1 });
    // the decision's event id, by which a GM override names the card's decision (dice-trust.js)
    assert.deepEqual(withRecord({ event_id: "ev1", receipt: receipt(2) }), { [DECISION_FLAG]: "ev1", [RECEIPT_FLAG]: receipt(2) });
    assert.deepEqual(withRecord({ event_id: "" }, { a: 1 }), { a: 1 });
  });

  test("receiptOf keeps a v2 receipt's batch fields, and refuses malformed ones", () => {
    assert.deepEqual(receiptOf({ receipt: { ...batched(3), extra: "x" } }), batched(3));
    const one = receipt(4, { batch_size: 1, batch_index: 0, path: [] }); // a batch of one: an empty path
    assert.deepEqual(receiptOf({ receipt: one }), one);
    const full = receipt(5, { batch_size: MAX_RECEIPT_BATCH, batch_index: MAX_RECEIPT_BATCH - 1, path: Array(MAX_RECEIPT_PATH).fill("D".repeat(43)) });
    assert.deepEqual(receiptOf({ receipt: full }), full);
    const copy = receiptOf({ receipt: full });
    copy.path.push("changed"); // the kept receipt is a copy: the reply's own path is left alone
    assert.equal(full.path.length, MAX_RECEIPT_PATH);
    // v1 sent with nulls for the batch fields is a v1 receipt
    assert.deepEqual(receiptOf({ receipt: { ...receipt(6), batch_size: null, batch_index: null, path: null } }), receipt(6));
    for (const bad of [
      { path: undefined }, { batch_size: undefined }, { batch_index: undefined }, // only some of the three
      { batch_size: 0 }, { batch_size: MAX_RECEIPT_BATCH + 1 }, { batch_size: "5" }, { batch_index: -1 },
      { batch_index: MAX_RECEIPT_BATCH }, { batch_index: 1.5 }, { path: "A".repeat(43) },
      { path: Array(MAX_RECEIPT_PATH + 1).fill("A".repeat(43)) }, { path: ["A".repeat(44)] }, { path: [""] }, { path: [7] },
    ]) {
      assert.equal(receiptOf({ receipt: { ...batched(3), ...bad } }), null, JSON.stringify(bad));
    }
  });

  test("collectReceipts: this world's receipts by record number, each once", () => {
    const messages = [
      { id: "m3", flags: { receipt: receipt(3) } },
      { id: "m1", flags: { receipt: receipt(1) } },
      { id: "m1copy", flags: { receipt: receipt(1) } },
      { id: "other", flags: { receipt: receipt(2, { world_id: "another-world" }) } },
      { id: "plain", flags: {} },
      { id: "junk", flags: { receipt: "not a receipt" } },
    ];
    const collected = collectReceipts(messages, WORLD);
    assert.deepEqual(collected.map((c) => [c.messageId, c.receipt.seq]), [["m1", 1], ["m3", 3]]);
    assert.deepEqual(receiptsExport(WORLD, collected), { world_id: WORLD, receipts: [receipt(1), receipt(3)] });
  });

  test("collectReceipts and the export keep v1 and v2 receipts as the bridge sent them", () => {
    const alone = receipt(3, { batch_size: 1, batch_index: 0, path: [], sig: "sig3-alone" }); // replayed in a batch of its own
    const messages = [
      { id: "m2", flags: { receipt: batched(2, 1) } },
      { id: "m1", flags: { receipt: receipt(1) } },
      { id: "m3", flags: { receipt: batched(3, 2) } },
      { id: "m3again", flags: { receipt: alone } },
      { id: "m3copy", flags: { receipt: batched(3, 2) } },
    ];
    const collected = collectReceipts(messages, WORLD);
    assert.deepEqual(collected.map((c) => c.messageId), ["m1", "m2", "m3", "m3again"]);
    assert.deepEqual(receiptsExport(WORLD, collected), {
      world_id: WORLD, receipts: [receipt(1), batched(2, 1), batched(3, 2), alone] });
  });

  test("the checker sends at most MAX_RECEIPTS_PER_CHECK per query and gathers every answer", async () => {
    const sent = [];
    const checker = createReceiptsChecker({
      isReady: () => true,
      newId: (() => { let n = 0; return () => `q${(n += 1)}`; })(),
      send: async (query) => {
        sent.push(query);
        return { type: "receipts_checked", v: 1, query_id: query.query_id,
          results: query.receipts.map((r) => ({ seq: r.seq, status: r.seq % 50 === 0 ? "missing" : "ok", record_hash: r.record_hash })) };
      },
    });
    const collected = Array.from({ length: 250 }, (_, i) => ({ messageId: `m${i + 1}`, receipt: receipt(i + 1) }));
    const state = await checker.check(collected);
    assert.deepEqual(sent.map((q) => q.receipts.length), [MAX_RECEIPTS_PER_CHECK, MAX_RECEIPTS_PER_CHECK, 50]);
    assert.deepEqual(sent[0], { type: "receipts_check", v: 1, query_id: "q1", receipts: collected.slice(0, 100).map((c) => c.receipt) });
    assert.equal(state.status, "ready");
    assert.deepEqual(state.counts, { ok: 245, missing: 5, changed: 0 });
    assert.deepEqual(state.results.filter((r) => r.status === "missing").map((r) => r.messageId), ["m50", "m100", "m150", "m200", "m250"]);
  });

  test("the checker: down without a link, error on a refusal or a reply that does not match", async () => {
    const down = createReceiptsChecker({ isReady: () => false, newId: () => "q", send: async () => assert.fail("nothing is sent") });
    assert.equal((await down.check([{ messageId: "m", receipt: receipt(1) }])).status, "down");
    const refused = createReceiptsChecker({ isReady: () => true, newId: () => "q", send: async () => { throw Object.assign(new Error("x"), { code: "not_found" }); } });
    assert.deepEqual(await refused.check([{ messageId: "m", receipt: receipt(1) }]).then((s) => [s.status, s.error]), ["error", "not_found"]);
    const short = createReceiptsChecker({ isReady: () => true, newId: () => "q", send: async () => ({ type: "receipts_checked", query_id: "q", results: [] }) });
    assert.deepEqual(await short.check([{ messageId: "m", receipt: receipt(1) }]).then((s) => [s.status, s.error]), ["error", "internal"]);
  });
});

describe("the SoHL Fate flow keeps each reply's receipt", () => {
  let env;
  beforeEach(async () => {
    env = await sampleWorld({ diceSoNice: false });
    env.messageId = await postArchery(env.world);
  });
  afterEach(() => uninstallFakeFoundry());

  const LUCKY = "mystery00000000";
  const connection = (replies) => ({ isStopped: () => false, request: async (m) => replies[m.type](m) });
  const graded = (m) => ({
    type: "test_graded", v: 1, event_id: m.event_id, message_id: m.message_id, level: 0, label: "MF", success: false, critical: false,
    fate: { eligible: true, reasons: [], fate_ml: 77, points: [LUCKY] }, mismatch: null, receipt: receipt(1),
  });
  const resolved = (m, outcome, seq) => ({
    type: "fate_resolved", v: 1, event_id: m.event_id, message_id: m.message_id, fate_roll: 34, fate_ml: 77, fate_level: 1, fate_label: "MS",
    outcome, gain: 1, level_before: 0, label_before: "MF", level_after: 1, label_after: "MS",
    point: { point_id: LUCKY, name: "Lucky Star", charges_after: 1 },
    card: { title: "Archery: Fate", ruleset: "sohl", speaker_actor_id: null, speaker_alias: "Basic Folk", html: `<div>${outcome}</div>` },
    effects: [], choice_by: [], receipt: receipt(seq),
  });

  test("the graded SoHL message and the posted Fate card each hold their reply's receipt", async () => {
    const flow = createFateFlow({
      foundry: fvtt, build: sohlMessageBuilders(fvtt.randomId), domParser: fvtt.domParser(),
      connection: connection({ test_rolled: graded, fate_spend: (m) => resolved(m, "spent", 2) }),
    });
    assert.equal(await flow.requestSpend({ messageId: env.messageId, pointId: LUCKY, userId: env.player }), true);
    assert.deepEqual(env.world.messages.get(env.messageId).flags["fate-bridge"].receipt, receipt(1));
    const card = [...env.world.messages.values()].at(-1);
    assert.notEqual(card.id, env.messageId);
    assert.deepEqual(card.flags["fate-bridge"].receipt, receipt(2));
    assert.equal(card.flags["fate-bridge"].card_for, env.messageId, "the card's own flags are kept");
  });
});

describe("a ruleset's posted card and the audit window", () => {
  const WELCOME = { type: "welcome", v: 1, world_id: WORLD, bridge_version: "x", rulesets: ["sohl", "tarot"], settings: { fate_option: "everyone" } };
  const CARD = { title: "Draw", html: '<div class="tarot">The Tower</div>', ruleset: "tarot", speaker_actor_id: null, speaker_alias: "Ann" };
  let env;
  let app = null;

  beforeEach(async () => {
    env = await clockedWorld();
    const tarot = {
      id: "tarot",
      install(api) {
        env.draw = async () => {
          const reply = await api.request({ type: "tarot_draw", v: 1, event_id: api.newEventId() });
          return api.postCard(reply.card);
        };
      },
    };
    env.handle = install({ rulesets: [tarot] });
    for (const hook of ["init", "setup", "ready"]) env.world.callHook(hook);
    env.world.deliverSocket(); // the GM's link announcements (logic/link-holder.js)
    env.socket = env.Socket.instances[0];
    env.socket.open();
    env.socket.receive(WELCOME);
  });
  afterEach(async () => {
    env.handle.dispose();
    await app?.settled();
    app = null;
    restoreTimers();
    uninstallFakeFoundry();
  });

  const windowEl = () => env.world.dom.window.document.querySelector(".fate-bridge-audit");
  const click = (selector) => windowEl().querySelector(selector).dispatchEvent(new env.world.dom.window.Event("click"));
  async function openWindow() {
    const Window = env.handle.auditWindow();
    app = new Window();
    await app.render(true);
    const page = await until(() => env.socket.sent.find((m) => m.type === "audit_query"), "the first page query");
    env.socket.receive({ type: "audit_page", v: 1, query_id: page.query_id, records: [], next_before: null });
    await app.settled();
  }

  test("api.postCard keeps the event id and receipt of the reply the card came in; a card without a receipt gets none", async () => {
    const drawing = env.draw();
    const asked = await until(() => env.socket.sent.find((m) => m.type === "tarot_draw"), "the draw");
    env.socket.receive({ type: "tarot_drawn", v: 1, event_id: asked.event_id, card: CARD, receipt: receipt(5) });
    const posted = await drawing;
    assert.deepEqual(env.world.messages.get(posted.id).flags["fate-bridge"], { [DECISION_FLAG]: asked.event_id, receipt: receipt(5) });
    const second = env.draw();
    const again = await until(() => env.socket.sent.filter((m) => m.type === "tarot_draw")[1], "the second draw");
    env.socket.receive({ type: "tarot_drawn", v: 1, event_id: again.event_id, card: { ...CARD } });
    assert.deepEqual(env.world.messages.get((await second).id).flags["fate-bridge"], { [DECISION_FLAG]: again.event_id });
  });

  test("Check receipts sends every receipt of the chat log and names each missing or changed record", async () => {
    const held = {};
    for (const seq of [1, 2, 3, 4]) held[seq] = (await env.world.createMessage({ content: `<p>${seq}</p>`, flags: { "fate-bridge": { receipt: receipt(seq) } } })).id;
    await env.world.createMessage({ content: "<p>no receipt</p>" });
    await openWindow();
    click(".fate-bridge-audit-check-receipts");
    const query = await until(() => env.socket.sent.find((m) => m.type === "receipts_check"), "the receipts check");
    assert.deepEqual(query, { type: "receipts_check", v: 1, query_id: query.query_id, receipts: [1, 2, 3, 4].map((seq) => receipt(seq)) });
    await until(() => /Checking/.test(windowEl().querySelector(".fate-bridge-audit-receipts-status")?.textContent), "the loading line");
    const posted = env.world.messages.size;
    const status = { 1: "ok", 2: "missing", 3: "changed", 4: "missing" };
    env.socket.receive({ type: "receipts_checked", v: 1, query_id: query.query_id,
      results: [1, 2, 3, 4].map((seq) => ({ seq, status: status[seq], record_hash: receipt(seq).record_hash })) });
    await app.settled();
    assert.equal(windowEl().querySelector(".fate-bridge-audit-receipts-status").textContent,
      "4 receipts in the chat log: 1 ok, 2 missing, 1 changed. The bridge's trail no longer holds what these messages were told:");
    const problems = [...windowEl().querySelectorAll(".fate-bridge-audit-receipts-problems li")];
    assert.deepEqual(problems.map((li) => [li.className, li.querySelector("span").textContent, li.querySelector("button").dataset.messageId]), [
      ["fate-bridge-audit-receipt-missing", "Record 2: missing from the bridge's trail (deleted).", held[2]],
      ["fate-bridge-audit-receipt-changed", "Record 3: changed (the trail's record was rewritten, or the receipt is not signed by this bridge's key).", held[3]],
      ["fate-bridge-audit-receipt-missing", "Record 4: missing from the bridge's trail (deleted).", held[4]],
    ]);
    assert.equal(env.world.messages.size, posted, "a check posts nothing");
  });

  test("every receipt ok reads as such", async () => {
    await env.world.createMessage({ content: "<p>1</p>", flags: { "fate-bridge": { receipt: receipt(1) } } });
    await openWindow();
    click(".fate-bridge-audit-check-receipts");
    const query = await until(() => env.socket.sent.find((m) => m.type === "receipts_check"), "the receipts check");
    env.socket.receive({ type: "receipts_checked", v: 1, query_id: query.query_id, results: [{ seq: 1, status: "ok", record_hash: receipt(1).record_hash }] });
    await app.settled();
    assert.equal(windowEl().querySelector(".fate-bridge-audit-receipts-status").textContent, "All 1 receipts in the chat log match the bridge's trail.");
    assert.equal(windowEl().querySelector(".fate-bridge-audit-receipts-problems"), null);
  });

  test("Export receipts downloads {world_id, receipts} for audit verify --receipts", async () => {
    await env.world.createMessage({ content: "<p>2</p>", flags: { "fate-bridge": { receipt: receipt(2) } } });
    await env.world.createMessage({ content: "<p>1</p>", flags: { "fate-bridge": { receipt: receipt(1) } } });
    await openWindow();
    click(".fate-bridge-audit-export-receipts");
    const [file] = env.world.downloads;
    assert.equal(file.type, "application/json");
    assert.equal(file.filename, `fate-bridge-receipts-${WORLD}.json`);
    assert.deepEqual(JSON.parse(file.data), { world_id: WORLD, receipts: [receipt(1), receipt(2)] });
    assert.equal(env.world.notices.at(-1).text,
      `2 receipts exported to fate-bridge-receipts-${WORLD}.json. Check them with: fate-bridge audit verify --receipts fate-bridge-receipts-${WORLD}.json`);
    assert.equal(env.socket.sent.some((m) => m.type === "receipts_check"), false, "exporting asks the bridge nothing");
  });

  test("Report asks the bridge for the page and downloads it; a refusal is shown", async () => {
    await openWindow();
    click(".fate-bridge-audit-report");
    const query = await until(() => env.socket.sent.find((m) => m.type === "audit_report"), "the report query");
    assert.deepEqual(query, { type: "audit_report", v: 1, query_id: query.query_id });
    await until(() => windowEl().querySelector(".fate-bridge-audit-report-status")?.textContent === "The bridge is drawing the report…", "the loading line");
    env.socket.receive({ type: "audit_report_page", v: 1, query_id: query.query_id, html: "<!doctype html><title>r</title>" });
    await app.settled();
    assert.deepEqual(env.world.downloads, [{ data: "<!doctype html><title>r</title>", type: "text/html", filename: `fate-bridge-report-${WORLD}.html` }]);
    click(".fate-bridge-audit-report");
    const second = await until(() => env.socket.sent.filter((m) => m.type === "audit_report")[1], "the second report query");
    env.socket.receive({ type: "error", v: 1, code: "not_found", message: "this bridge does not draw reports here: use `fate-bridge audit report`", ref: second.query_id, field: null });
    await app.settled();
    assert.equal(windowEl().querySelector(".fate-bridge-audit-report-status").textContent, "The bridge did not make the report (not_found).");
    assert.equal(env.world.downloads.length, 1);
  });
});
