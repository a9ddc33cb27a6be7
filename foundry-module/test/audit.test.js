import { test, describe, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { JSDOM } from "jsdom";
import {
  AUDIT_STATUS,
  auditRows,
  buildAuditQuery,
  createAuditPager,
  formatTime,
  localDayStartIso,
  parseFilters,
} from "../scripts/logic/audit.js";
import { renderAudit } from "../scripts/logic/audit-view.js";
import { BridgeError } from "../scripts/logic/errors.js";

const EN = JSON.parse(readFileSync(new URL("../lang/en.json", import.meta.url), "utf8"));
const t = (key, data = {}) => (EN[key] ?? key).replace(/\{(\w+)\}/g, (_, name) => String(data[name]));

/** Tests set process.env.TZ (Node re-reads it when it changes); each test gets the old one back. */
let savedTz;
beforeEach(() => {
  savedTz = process.env.TZ;
});
afterEach(() => {
  if (savedTz === undefined) delete process.env.TZ;
  else process.env.TZ = savedTz;
});

/** An AuditSummary as bridge/store/audit_rows.py audit_page sends it. */
const record = (seq, overrides = {}) => ({
  seq, ts: "2024-05-01T12:34:56.789Z", type: "fate_spend", event_id: `ev${seq}`, user_id: "playerUser00001", ruleset: "sohl",
  message_id: "msg0000000000001", actor_id: "d1cddnpaqRl0a0Q8", actor_name: "Basic Folk", test_name: "Archery", outcome: "spent",
  level_before: 0, level_after: 1, label_before: "MF", label_after: "MS", fate_roll: 34, point_name: "Lucky Star", ...overrides,
});

describe("filters -> audit_query", () => {
  test("dates are local days: since = that day's start, until = the next day's start (exclusive)", () => {
    process.env.TZ = "America/New_York";
    const parsed = parseFilters({ actorId: "d1cddnpaqRl0a0Q8", outcome: "spent", since: "2024-05-01", until: "2024-05-03" });
    assert.deepEqual(parsed, {
      ok: true,
      filters: { actor_id: "d1cddnpaqRl0a0Q8", outcome: "spent", since: "2024-05-01T04:00:00.000Z", until: "2024-05-04T04:00:00.000Z" },
    });
    assert.deepEqual(buildAuditQuery({ queryId: "q1", filters: parsed.filters, limit: 50 }), {
      type: "audit_query", v: 1, query_id: "q1", actor_id: "d1cddnpaqRl0a0Q8", outcome: "spent",
      since: "2024-05-01T04:00:00.000Z", until: "2024-05-04T04:00:00.000Z", limit: 50,
    });
    process.env.TZ = "Asia/Tokyo";
    assert.equal(localDayStartIso("2024-05-01"), "2024-04-30T15:00:00.000Z");
  });

  test("empty inputs send no filter at all; before_seq only when paging", () => {
    assert.deepEqual(parseFilters({ actorId: "", outcome: "", since: "", until: "" }), { ok: true, filters: {} });
    assert.deepEqual(buildAuditQuery({ queryId: "q2", filters: {}, beforeSeq: 51 }), { type: "audit_query", v: 1, query_id: "q2", before_seq: 51, limit: 50 });
  });

  test("bad inputs are refused with the field to fix, before anything is sent", () => {
    assert.deepEqual(parseFilters({ since: "2024-02-30" }), { ok: false, field: "since" });
    assert.deepEqual(parseFilters({ until: "yesterday" }), { ok: false, field: "until" });
    assert.deepEqual(parseFilters({ since: "2024-05-03", until: "2024-05-01" }), { ok: false, field: "until" });
    assert.deepEqual(parseFilters({ outcome: "lost'); DROP TABLE audit;--" }), { ok: false, field: "outcome" });
    assert.deepEqual(parseFilters({ actorId: "x".repeat(129) }), { ok: false, field: "actorId" });
    assert.equal(parseFilters({ since: "2024-05-01", until: "2024-05-01" }).ok, true, "one whole day");
  });

  test("limits the bridge would refuse are refused here", () => {
    assert.throws(() => buildAuditQuery({ queryId: "q", limit: 201 }), RangeError);
    assert.throws(() => buildAuditQuery({ queryId: "q", limit: 0 }), RangeError);
    assert.throws(() => buildAuditQuery({ queryId: "q", beforeSeq: 0 }), RangeError);
  });
});

describe("audit_page -> rows", () => {
  test("labels, names and placeholders; user ids resolved to names when known", () => {
    process.env.TZ = "UTC";
    const rows = auditRows(
      [
        record(3),
        record(2, { type: "test_rolled", outcome: "graded", level_after: null, label_after: null, fate_roll: null, point_name: null, user_id: null }),
        record(1, { outcome: "already_fated", user_id: "goneUser0000001", level_before: null, label_before: null, level_after: null, label_after: null, fate_roll: null, point_name: null, message_id: null }),
        record(0, { outcome: "mystery_code", label_before: null, level_before: 2, label_after: null, level_after: 3 }),
      ],
      { userName: (id) => ({ playerUser00001: "Player One" })[id] ?? null, t },
    );
    assert.deepEqual(rows[0], {
      seq: 3, time: "2024-05-01 12:34:56", ts: "2024-05-01T12:34:56.789Z", actor: "Basic Folk", test: "Archery", levels: "MF → MS",
      fateRoll: "34", point: "Lucky Star", outcome: "spent", outcomeCode: "spent", user: "Player One", messageId: "msg0000000000001",
    });
    assert.deepEqual([rows[1].levels, rows[1].fateRoll, rows[1].point, rows[1].outcome, rows[1].user], ["MF", "—", "—", "graded", "—"]);
    assert.deepEqual([rows[2].levels, rows[2].outcome, rows[2].user, rows[2].messageId], ["—", "refused: already fated", "goneUser0000001", null]);
    assert.deepEqual([rows[3].levels, rows[3].outcome], ["2 → 3", "mystery_code"]);
  });

  test("times show in the browser's zone; an unreadable ts is shown as is", () => {
    process.env.TZ = "America/New_York";
    assert.equal(formatTime("2024-05-01T02:00:00.000Z"), "2024-04-30 22:00:00");
    assert.equal(formatTime("not a time"), "not a time");
  });

  test("hostile names render as text, never as HTML", () => {
    const dom = new JSDOM("<!doctype html><body></body>");
    const hostile = '<img src=x onerror="globalThis.pwned=1">';
    const rows = auditRows([record(1, { actor_name: hostile, test_name: hostile, point_name: hostile })], { userName: () => hostile, t });
    const root = renderAudit(
      dom.window.document,
      { state: { status: AUDIT_STATUS.READY, records: [], nextBefore: null }, rows, form: { actorId: "", outcome: "", since: "", until: "" }, actors: [{ id: "a1", name: hostile }] },
      t,
      { onSearch() {}, onOlder() {}, onShowMessage() {} },
    );
    assert.equal(root.querySelector("img"), null);
    const cells = [...root.querySelectorAll("tbody td")].map((td) => td.textContent);
    assert.equal(cells.filter((text) => text === hostile).length, 4, "actor, test, point, user");
    assert.equal(root.querySelector('select[name="actorId"] option[value="a1"]').textContent, hostile);
  });
});

describe("the pager", () => {
  function pager({ ready = true } = {}) {
    const sent = [];
    const answers = [];
    let n = 0;
    const p = createAuditPager({
      send: (query) => {
        sent.push(query);
        return new Promise((resolve, reject) => answers.push({ query, resolve, reject }));
      },
      isReady: () => ready,
      newId: () => `q${++n}`,
      limit: 2,
    });
    const page = (answer, records, nextBefore) => answer.resolve({ type: "audit_page", v: 1, query_id: answer.query.query_id, records, next_before: nextBefore });
    return { p, sent, answers, page };
  }

  test("first page, then Load older with before_seq = next_before, appended; stops at the end", async () => {
    const { p, sent, answers, page } = pager();
    const first = p.search({ outcome: "spent" });
    assert.equal(p.state.status, AUDIT_STATUS.LOADING);
    page(answers[0], [record(9), record(8)], 8);
    await first;
    assert.deepEqual(sent[0], { type: "audit_query", v: 1, query_id: "q1", outcome: "spent", limit: 2 });
    assert.deepEqual([p.state.status, p.state.nextBefore, p.state.records.map((r) => r.seq)], [AUDIT_STATUS.READY, 8, [9, 8]]);
    const older = p.loadOlder();
    page(answers[1], [record(5)], null);
    await older;
    assert.deepEqual(sent[1], { type: "audit_query", v: 1, query_id: "q2", outcome: "spent", before_seq: 8, limit: 2 });
    assert.deepEqual(p.state.records.map((r) => r.seq), [9, 8, 5]);
    await p.loadOlder();
    assert.equal(sent.length, 2, "no next_before: nothing more to ask");
  });

  test("an answer to a superseded search is dropped", async () => {
    const { p, answers, page } = pager();
    const stale = p.search({});
    const fresh = p.search({ outcome: "lost" });
    page(answers[1], [record(4, { outcome: "lost" })], null);
    await fresh;
    page(answers[0], [record(9)], 8);
    await stale;
    assert.deepEqual(p.state.records.map((r) => r.seq), [4]);
    assert.equal(p.state.nextBefore, null);
  });

  test("bridge down: nothing is sent and the state says so; a lost link mid-query too", async () => {
    const down = pager({ ready: false });
    await down.p.search({});
    assert.deepEqual([down.p.state.status, down.sent.length], [AUDIT_STATUS.DOWN, 0]);
    const { p, answers } = pager();
    const query = p.search({});
    answers[0].reject(new BridgeError("closed", "the bridge connection was stopped"));
    await query;
    assert.equal(p.state.status, AUDIT_STATUS.DOWN);
  });

  test("a timeout or a foreign page is an error, with its code", async () => {
    const { p, answers } = pager();
    const first = p.search({});
    answers[0].reject(new BridgeError("timeout", "no answer"));
    await first;
    assert.deepEqual([p.state.status, p.state.error], [AUDIT_STATUS.ERROR, "timeout"]);
    const second = p.search({});
    answers[1].resolve({ type: "audit_page", v: 1, query_id: "someone-else", records: [record(1)], next_before: null });
    await second;
    assert.deepEqual([p.state.status, p.state.error, p.state.records.length], [AUDIT_STATUS.ERROR, "internal", 0]);
  });

  test("invalid filters: nothing sent, the field named", async () => {
    const { p, sent } = pager();
    await p.search({ since: "2024-05-09", until: "2024-05-01" });
    assert.deepEqual([p.state.status, p.state.field, sent.length], [AUDIT_STATUS.INVALID, "until", 0]);
  });
});
