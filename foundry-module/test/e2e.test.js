/**
 * End to end: a REAL bridge process (`python -m bridge`) and the REAL module code (main.js on the
 * fake Foundry globals, `ws` as the WebSocket). The bridge rolls its own dice in serve mode, so
 * the assertions follow from the outcome it reports.
 * Python: $FATE_BRIDGE_PYTHON, else <repo>/.venv/bin/python.
 */
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { WebSocket } from "ws";
import { realBridge, startModule, recordReplies } from "./helpers/e2e.js";
import { sampleWorld, postArchery } from "./helpers/world-setup.js";

const LUCKY = "mystery00000000";
/** lang/en.json's FATE_BRIDGE.Audit.Outcome.* for the Fate outcomes. */
const OUTCOME_TEXT = { lost: "lost (charge used)", kept: "kept", spent: "spent", choice: "choice offered" };

const real = realBridge("fate-bridge-e2e-");
/** Poll `check` until it returns a truthy value or `ms` pass (BridgeProcess.until). */
const { until } = real;

before(() => {
  assert.match(real.token, /^\S{16,}$/, "world add --token-only prints just the token");
});

test("a SoHL card graded, a player's spend relayed and applied, a second spend refused", async (t) => {
  const env = await sampleWorld({ WebSocket, settings: real.settings(), diceSoNice: true });
  const { handle, connection } = await startModule(t, real, env);
  const replies = recordReplies(connection);
  const flagsOf = (id) => env.world.messages.get(id).flags["fate-bridge"] ?? {};
  /** A player's click over the module socket: the GM acks and holds it, the player says go, the GM acts. */
  const relayClick = () => {
    env.world.asUser(env.gm);
    env.world.deliverSocket();
    env.world.asUser(env.player);
    assert.deepEqual(env.world.deliverSocket().map((e) => e.payload.type), ["ack"]);
    env.world.asUser(env.gm);
    assert.deepEqual(env.world.deliverSocket().map((e) => e.payload.type), ["go"]);
  };

  // 1. The Archery card appears: test_rolled -> test_graded -> graded flag.
  const messageId = await postArchery(env.world);
  const graded = await until(() => flagsOf(messageId).graded, "the graded flag");
  assert.deepEqual(graded, {
    level: 0, label: "MF", eligible: true, reasons: [], fate_ml: 77,
    points: [{ point_id: LUCKY, name: "Lucky Star", charges: 2 }],
  });

  // 2. The player clicks Spend Fate; the click travels on the module socket to the GM.
  env.world.asUser(env.player);
  const html = env.world.render(messageId);
  assert.equal(html.querySelector('button[data-action="fateTest"]'), null);
  html.querySelector(".fate-bridge-spend button").click();
  assert.equal(env.world.emitted.length, 1);
  const messagesBefore = env.world.messages.size;
  relayClick();
  const resolved = await until(() => replies.find((reply) => reply.type === "fate_resolved"), "fate_resolved");
  await until(() => env.world.messages.size > messagesBefore, "the Fate card");
  // The GM's client reports the click done; the player's client hears it.
  const done = await until(() => env.world.emitted.find((e) => e.payload.type === "done" && e.payload.to === env.player), "done");
  assert.equal(done.payload.ok, true);
  env.world.asUser(env.player);
  env.world.deliverSocket();
  env.world.asUser(env.gm);
  const card = [...env.world.messages.values()].at(-1);
  assert.equal(card.flags["fate-bridge"].card_for, messageId);
  assert.equal(card.content, resolved.card.html);
  // Issue 19: the bridge's own Fate die rides on the card as a real Roll (Dice So Nice rolls it once).
  assert.deepEqual(resolved.rolls, [{ faces: 100, value: resolved.fate_roll, source: "secret" }]);
  assert.deepEqual(card.rolls.map((roll) => roll.fromData.terms[0].results.map((r) => r.result)), [[resolved.fate_roll]]);
  // Issue 24: thrown once on each client (a public test), as the player who spent; no showForRoll of ours.
  assert.deepEqual(env.world.animationsPerClient(), { [env.gm]: 1, [env.player]: 1, [env.stranger]: 1 });
  assert.deepEqual(env.world.diceAnimations.map((a) => [a.messageId, a.userId]), Array(3).fill([card.id, env.player]));
  assert.deepEqual(env.world.diceShown, []);
  assert.equal(resolved.fate_ml, 77);
  assert.equal(resolved.point.point_id, LUCKY);

  t.diagnostic(`Fate Test outcome: ${resolved.outcome} (roll ${resolved.fate_roll} vs ${resolved.fate_ml})`);
  const charges = () => env.actor.items.get(LUCKY).system.charges.value;
  if (resolved.outcome === "choice") {
    // 3a. Fate Test CS: the player keeps the point (+1); the choice card is replaced.
    assert.ok(resolved.choice_by.includes(env.player));
    await until(() => flagsOf(messageId).pending_choice_card === card.id, "the pending choice");
    env.world.asUser(env.player);
    env.world.render(card.id).querySelector('[data-fate-bridge-choice="keep"]').click();
    relayClick();
    await until(() => card.content !== resolved.card.html, "the choice card replaced");
    assert.equal(card.content.includes("data-fate-bridge-choice"), false);
    assert.equal(env.world.messages.size, messagesBefore + 1);
    assert.equal(charges(), 2);
  } else {
    // 3b. CF (lost) and MS (spent) consume a charge; MF (kept) does not.
    const consumed = resolved.outcome === "lost" || resolved.outcome === "spent";
    await until(() => flagsOf(messageId).fated, "the fated flag");
    assert.equal(charges(), consumed ? 1 : 2);
    assert.equal(resolved.point.charges_after, charges());
  }
  await until(() => flagsOf(messageId).fated, "the fated flag");

  // 4. A second spend on the same result is refused with already_fated, nothing applied.
  const chargesAfter = charges();
  const size = env.world.messages.size;
  env.world.emitted.length = 0;
  env.world.asUser(env.player);
  assert.equal(env.world.render(messageId).querySelector(".fate-bridge-spend"), null, "no button on a fated result");
  // A crafted request straight on the socket, past the (absent) button: the GM still asks the bridge.
  const requestId = "again00000000001";
  env.world.emitted.push({ payload: { type: "request", request_id: requestId, ruleset: "sohl", action: "spend", data: { message_id: messageId, point_id: LUCKY } }, senderId: env.player });
  env.world.asUser(env.gm);
  assert.deepEqual(env.world.deliverSocket().map((e) => e.payload.type), ["request"]);
  assert.deepEqual(env.world.emitted.map((e) => e.payload.type), ["ack"]);
  env.world.emitted.length = 0;
  env.world.emitted.push({ payload: { type: "go", request_id: requestId }, senderId: env.player });
  env.world.deliverSocket();
  // The refusal is the answer to that one request (its request_id), carrying its code alone.
  const refusal = await until(() => env.world.emitted.find((e) => e.payload.type === "done"), "the refusal");
  assert.deepEqual(refusal.payload, {
    type: "done", to: env.player, request_id: requestId, ok: false,
    error: { code: "already_fated", message: "the GM's browser refused this Fate request: already_fated", field: null },
  });
  assert.equal(env.world.emitted.some((e) => e.payload.type === "notice"), false);
  assert.equal(charges(), chargesAfter);
  assert.equal(env.world.messages.size, size);

  // 5. The GM opens the Fate audit: the module's audit_query, the bridge's audit_page, the rows.
  env.world.asUser(env.gm);
  const AuditWindow = handle.auditWindow();
  const app = new AuditWindow();
  t.after(() => app.close());
  await app.render(true);
  await until(() => app.auditState.status === "ready", `the audit page (state ${app.auditState.status}/${app.auditState.error})`);
  await app.settled();
  const records = app.auditState.records;
  const spendRecord = records.find((r) => r.type === "fate_spend" && r.outcome === resolved.outcome);
  assert.ok(spendRecord, `no fate_spend/${resolved.outcome} among ${JSON.stringify(records.map((r) => [r.type, r.outcome]))}`);
  assert.equal(spendRecord.fate_roll, resolved.fate_roll);
  assert.equal(spendRecord.point_name, "Lucky Star");
  assert.equal(spendRecord.message_id, messageId);
  assert.equal(spendRecord.user_id, env.player);
  assert.equal(spendRecord.actor_name, "Basic Folk");
  assert.deepEqual(records.map((r) => r.seq), [...records.map((r) => r.seq)].sort((a, b) => b - a), "newest first");
  const cells = [...app.element.querySelectorAll(`tr[data-seq="${spendRecord.seq}"] td`)].map((td) => td.textContent);
  assert.deepEqual(cells.slice(1, 8), [
    "Basic Folk", spendRecord.test_name, spendRecord.label_after ? `${spendRecord.label_before} → ${spendRecord.label_after}` : spendRecord.label_before,
    String(resolved.fate_roll), "Lucky Star", OUTCOME_TEXT[resolved.outcome], "Player One",
  ]);

  // 6. The link dies right after a fate_spend goes out: after the reconnect the module sends the
  //    same event_id again, the bridge answers with its stored reply, and the spend happens once.
  const second = await postArchery(env.world);
  await until(() => flagsOf(second).graded?.eligible, "the second card graded eligible");
  const chargesBefore = charges();
  const updatesBefore = env.world.itemUpdates.length;
  const socket = connection.socket;
  const send = socket.send.bind(socket);
  let cutAfter = null;
  socket.send = (text) => {
    const message = JSON.parse(text);
    if (message.type !== "fate_spend" || cutAfter) return send(text);
    cutAfter = message;
    return send(text, () => socket.terminate()); // the frame is on the wire; the link dies before any reply
  };
  const size2 = env.world.messages.size;
  env.world.asUser(env.gm);
  env.world.render(second).querySelector(".fate-bridge-spend button").click();
  await until(() => cutAfter, "the fate_spend sent");
  assert.equal(cutAfter.user_is_gm, true, "the GM's own click, looked up from Foundry's users");
  await until(() => connection.socket && connection.socket !== socket && connection.isReady(), "the reconnect");
  const again = await until(() => replies.find((reply) => reply.event_id === cutAfter.event_id), "the reply to the re-sent fate_spend");
  await until(() => flagsOf(second).fated, "the second card fated");
  await until(() => env.world.messages.size > size2, "the second Fate card");
  // The bridge writes a decision's log line after its reply; the line reaches this process's pipe
  // when it does: wait for the replayed one, then count both.
  const decisionsOf = () => real.bridge.log.split("\n").filter((line) => line.includes("decision") && line.includes(`event_id=${cutAfter.event_id}`));
  await until(() => decisionsOf().some((line) => line.includes("replayed=True")), "the replayed decision's log line");
  const decisions = decisionsOf();
  assert.equal(decisions.filter((line) => line.includes("replayed=False")).length, 1, `one Fate Test:\n${decisions.join("\n")}`);
  assert.equal(decisions.filter((line) => line.includes("replayed=True")).length, 1, `the re-sent event_id got the stored reply:\n${decisions.join("\n")}`);
  assert.equal(flagsOf(second).fated.event_id, cutAfter.event_id);
  const consumed = again.outcome === "lost" || again.outcome === "spent";
  assert.equal(charges(), consumed ? chargesBefore - 1 : chargesBefore, `charges after ${again.outcome}`);
  assert.equal(env.world.itemUpdates.length - updatesBefore, again.effects.filter((e) => e.kind === "update_item").length);
  assert.equal(env.world.messages.size, size2 + 1, "one Fate card");
});
