/**
 * Issue 19 end to end: a REAL bridge process and the REAL module (main.js on the fake Foundry). The GM
 * starts a dice session (the commitment card), a player spends Fate (the Fate die is derived from the
 * seed and the player's own client_seed, and rides on the card as a real Roll), the GM ends the session
 * (the reveal; the commitment card is marked verified), the trail is exported and the /verify page's
 * code recomputes the die. The seed never reaches the bridge's log. Then physical dice: a player's
 * real d100 grades a Fate Test, marked physical on the card and in the trail.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { writeFileSync } from "node:fs";
import path from "node:path";
import { WebSocket } from "ws";
import { DICE_SESSION_FLAG, DICE_SETTINGS_SETTING, VERIFIED_MARK } from "../scripts/logic/dice-trust.js";
import { checkTrail } from "../../bridge/fairness/page/verify.js";
import { STEP_MS } from "./helpers/bridge-process.js";
import { CHROMIUM_SKIP, launchChromium } from "./helpers/browser.js";
import { deliverRelay, realBridge, startModule, recordReplies } from "./helpers/e2e.js";
import { sampleWorld, postArchery } from "./helpers/world-setup.js";

/** The trail the first test exported (the page test loads it). */
let exported = "";
const real = realBridge("fate-bridge-dice-e2e-");
const { until } = real;

test("a dice session: committed, a player's Fate die derived and shown as a Roll, revealed, verified", async (t) => {
  const env = await sampleWorld({ WebSocket, settings: real.settings(), diceSoNice: true });
  /** Dice So Nice's animations per client (gm, player, stranger). */
  const thrown = (id) => Object.values(env.world.animationsPerClient(id));
  const { connection } = await startModule(t, real, env);
  const replies = recordReplies(connection);
  const flagged = () => [...env.world.messages.values()].find((m) => m.flags["fate-bridge"]?.[DICE_SESSION_FLAG]);

  // 0. The GM requires provable dice and keeps override marks to the GMs.
  env.world.asUser(env.gm);
  env.world.callHook("chatMessage", {}, "/dicesettings provable=on mark=gm", {});
  const saved = await until(() => replies.find((r) => r.type === "dice_settings_saved"), "dice_settings_saved");
  assert.deepEqual(saved.settings, { provable: true, physical_rulesets: [], override_mark: "gm" });

  // 1. The GM commits: the commitment card is posted with its fingerprint.
  assert.equal(env.world.callHook("chatMessage", {}, "/dicesession start", {}), false);
  const commitmentCard = await until(flagged, "the commitment card");
  const started = replies.find((r) => r.type === "dice_session_started");
  assert.ok(commitmentCard.content.includes(started.fingerprint));
  assert.deepEqual(thrown(), [0, 0, 0], "a commitment rolls no die");

  // 2. A player spends Fate: relayed with the player's own client_seed; the Fate die is fair.
  const messageId = await postArchery(env.world);
  await until(() => env.world.messages.get(messageId).flags["fate-bridge"]?.graded, "the graded flag");
  env.world.asUser(env.player);
  env.world.render(messageId).querySelector(".fate-bridge-spend button").click();
  const playerSeed = env.world.emitted.find((e) => e.payload.type === "request").payload.client_seed;
  assert.match(playerSeed, /^[0-9a-f]{32}$/);
  deliverRelay(env);
  const resolved = await until(() => replies.find((r) => r.type === "fate_resolved"), "fate_resolved");
  assert.deepEqual(resolved.rolls, [{ faces: 100, value: resolved.fate_roll, source: "fair" }]);
  const fateCard = await until(() => [...env.world.messages.values()].find((m) => m.content === resolved.card.html), "the Fate card");
  assert.deepEqual(fateCard.rolls.map((r) => r.fromData.terms[0].results[0].result), [resolved.fate_roll]);
  // The session's die, thrown once on each client (a public test), as the player, by Dice So Nice itself.
  assert.deepEqual(thrown(fateCard.id), [1, 1, 1]);
  assert.deepEqual(thrown(), [1, 1, 1]);
  assert.deepEqual(env.world.diceAnimations.map((a) => [a.userId, a.dice]), Array(3).fill([env.player, [{ faces: 100, results: [resolved.fate_roll] }]]));
  assert.deepEqual(env.world.diceShown, []);

  // 3. The GM reveals: the reveal card, and the commitment card marked verified.
  env.world.asUser(env.gm);
  env.world.callHook("chatMessage", {}, "/dicesession end", {});
  await until(() => commitmentCard.flags["fate-bridge"][DICE_SESSION_FLAG].verified, "the verified mark");
  assert.ok(commitmentCard.content.endsWith(VERIFIED_MARK));
  const revealed = replies.find((r) => r.type === "dice_session_revealed");
  assert.equal(revealed.commitment, started.commitment);

  // 3b. A GM override on the Fate card: the card shows the result without a mark (mark=gm); the GMs get it marked.
  const before = env.world.messages.size;
  env.world.callHook("chatMessage", {}, `/diceoverride ${fateCard.id} Critical Success | the dragon must fall`, {});
  const applied = await until(() => replies.find((r) => r.type === "override_applied"), "override_applied");
  assert.equal(applied.marked, false);
  await until(() => env.world.messages.size === before + 1, "the GMs' override card");
  const gmOnly = [...env.world.messages.values()].at(-1);
  assert.ok(fateCard.content.includes("Critical Success"), "the overridden card shows the hand-set result");
  assert.equal(fateCard.content.includes("GM override"), false, "players see no mark (mark=gm)");
  assert.ok(gmOnly.content.includes("GM override by gmUser000000001: the dragon must fall"));
  assert.deepEqual(gmOnly.whisper, [env.gm]);
  // The reveal and the override throw nothing: the Fate die stays thrown once per client.
  assert.deepEqual(thrown(), [1, 1, 1]);
  // 3c. An override of a decision the world does not hold: refused, the GM sees why, no card changes.
  const posts = env.world.messages.size;
  const fateContent = fateCard.content;
  env.world.callHook("chatMessage", {}, "/diceoverride ev-never-decided Critical Failure | a typo", {});
  const notice = await until(() => env.world.notices.find((n) => n.level === "error" && n.text.includes("'ev-never-decided'")), "the refusal shown");
  assert.match(notice.text, /this world holds no decision 'ev-never-decided' to override/);
  assert.equal(env.world.messages.size, posts, "no card posted");
  assert.equal(fateCard.content, fateContent, "no card changed");

  // 4. The exported trail alone recomputes the die (the page's code), with the player's value in it.
  exported = real.bridge.cli("audit", "export", "--world", "e2e-world", "--format", "jsonl");
  const checked = await checkTrail(exported);
  assert.deepEqual(checked.problems, []);
  assert.equal(checked.verified, 1);
  const spend = exported.split("\n").map((line) => JSON.parse(line).record).find((r) => r.type === "fate_spend");
  assert.equal(spend.message.client_seed, playerSeed);
  const override = exported.split("\n").map((line) => JSON.parse(line).record).find((r) => r.type === "gm_override");
  assert.deepEqual([override.user_id, override.message.reason, override.message.message_id, override.summary.outcome],
    [env.gm, "the dragon must fall", fateCard.id, "override"]);
  // the card named its decision (the Fate spend): the override's target is that decision's event id
  assert.equal(override.message.target_event_id, spend.event_id);
  assert.equal(exported.split("\n").filter((line) => line.includes('"gm_override"')).length, 1, "the refused override left no record");

  // 5. The seed never reached the bridge's log (serve's stdout and stderr, every decision logged).
  await until(() => real.bridge.log.includes("dice_session_end"), "the bridge's log line of the reveal decision");
  assert.equal(real.bridge.log.includes(revealed.seed), false);
});

test("the bridge's /verify page, in a real browser, recomputes the exported trail and names a changed die", { skip: CHROMIUM_SKIP }, async (t) => {
  assert.ok(exported, "the session test exported a trail");
  const context = await launchChromium(real.bridge.dir);
  t.after(() => context.close());
  const page = context.pages()[0] ?? (await context.newPage());
  const pageErrors = [];
  page.on("pageerror", (error) => pageErrors.push(String(error)));
  await page.goto(`http://127.0.0.1:${real.port}/verify`);
  const load = async (name, text) => {
    const file = path.join(real.bridge.dir, name);
    writeFileSync(file, text);
    await page.locator("#trail").setInputFiles(file);
    return page.locator("#result p").last().textContent({ timeout: STEP_MS });
  };
  await load("trail.jsonl", exported);
  await page.locator("#result p.pass", { hasText: "1 dice session: 1 die recomputed from the revealed seeds" }).waitFor({ timeout: STEP_MS });
  assert.match(await page.locator("#result p").first().textContent(), /dice session .+ 1 fair dice: verified/);

  const lines = exported.split("\n").map((line) => JSON.parse(line));
  const spend = lines.find((line) => line.record.type === "fate_spend");
  spend.record.dice[0] = (spend.record.dice[0] % 100) + 1;
  await load("changed.jsonl", lines.map((line) => JSON.stringify(line)).join("\n"));
  await page.locator("#result p.fail", { hasText: "FAIL: 2 problems" }).waitFor({ timeout: STEP_MS });
  const shown = await page.locator("#result").textContent();
  assert.ok(shown.includes(`record ${spend.seq} was changed after it was written (hash mismatch)`));
  assert.ok(shown.includes(`record ${spend.seq}: die 1 (d100) recorded ${spend.record.dice[0]}`));
  assert.deepEqual(pageErrors, []);
});

test("a physical d100: the GM allows physical dice for SoHL, the player throws 57, the Fate Test is graded with it, the card and the trail mark it physical", async (t) => {
  const env = await sampleWorld({ WebSocket, settings: real.settings(), diceSoNice: true });
  const { connection } = await startModule(t, real, env);
  const replies = recordReplies(connection);

  // The GM allows physical dice for SoHL; every client reads the bridge's answer from the world setting.
  env.world.asUser(env.gm);
  env.world.callHook("chatMessage", {}, "/dicesettings physical=sohl", {});
  const saved = await until(() => replies.find((r) => r.type === "dice_settings_saved"), "dice_settings_saved");
  assert.deepEqual(saved.settings.physical_rulesets, ["sohl"]);
  await until(() => globalThis.game.settings.get("fate-bridge", DICE_SETTINGS_SETTING).physical_rulesets.includes("sohl"), "the world setting");

  // The player spends Fate: asked for the d100 on their own client, then relayed with it.
  const messageId = await postArchery(env.world);
  await until(() => env.world.messages.get(messageId).flags["fate-bridge"]?.graded, "the graded flag");
  env.world.physicalAnswers.push("57");
  env.world.asUser(env.player);
  env.world.render(messageId).querySelector(".fate-bridge-spend button").click();
  const relayed = await until(() => env.world.emitted.find((e) => e.payload.type === "request"), "the relayed click");
  assert.deepEqual(relayed.payload.data.physical, [57]);
  assert.equal(env.world.prompts.at(-1).user, env.player);
  deliverRelay(env);
  const resolved = await until(() => replies.find((r) => r.type === "fate_resolved"), "fate_resolved");
  assert.equal(resolved.fate_roll, 57, "graded with the physical die");
  assert.deepEqual(resolved.rolls, [{ faces: 100, value: 57, source: "physical" }]);
  const fateCard = await until(() => [...env.world.messages.values()].find((m) => m.content === resolved.card.html), "the Fate card");
  assert.ok(fateCard.content.includes('class="fate-bridge dice-physical"'), "the card marks the physical die");
  assert.match(fateCard.content, /d100 57/);
  assert.deepEqual(fateCard.rolls.map((r) => r.fromData.terms[0].results[0].result), [57]);
  // The thrown die shown once on each client, as the player: Dice So Nice, from the card's Roll.
  assert.deepEqual(Object.values(env.world.animationsPerClient(fateCard.id)), [1, 1, 1]);
  assert.deepEqual(Object.values(env.world.animationsPerClient()), [1, 1, 1]);
  assert.deepEqual(env.world.diceAnimations.map((a) => a.userId), [env.player, env.player, env.player]);

  // On the record: the spend's die is physical.
  const records = real.bridge.cli("audit", "export", "--world", "e2e-world", "--format", "jsonl").split("\n").filter(Boolean).map((line) => JSON.parse(line).record);
  const spend = records.filter((r) => r.type === "fate_spend").at(-1);
  assert.deepEqual([spend.dice, spend.draws.map((d) => d.source), spend.message.physical], [[57], ["physical"], [57]]);
});
