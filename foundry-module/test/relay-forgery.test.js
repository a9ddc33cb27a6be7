/**
 * "A relay no player can forge" (issue 13): the real module (main.js on the fake Foundry, whose
 * socket delivers the emitted arguments and then the sender's id, as Foundry's server does) with a
 * probe ruleset whose GM-side handler records who it acted for. Every forgery a player can make
 * on the module socket is refused: extra socket arguments, a user id in the data, a player posing
 * as a GM towards another player, a go for someone else's request, a malformed delivery.
 */
import { test, beforeEach, afterEach } from "node:test";
import assert from "node:assert/strict";
import { install } from "../scripts/main.js";
import { socketDelivery } from "../scripts/logic/relay.js";
import { uninstallFakeFoundry } from "./helpers/fake-foundry.js";
import { sampleWorld } from "./helpers/world-setup.js";
import { fakeWebSocketClass, flush } from "./helpers/fake-socket.js";

const SOCKET = "module.fate-bridge";
let env, calls, probeApi;

beforeEach(async () => {
  env = await sampleWorld({ WebSocket: fakeWebSocketClass(), settings: { "fate-bridge.token": "secret" } });
  calls = [];
  const probe = {
    id: "probe",
    install(api) {
      probeApi = api;
      api.onRelay("act", (data, sender) => {
        calls.push({ data, sender });
        return "acted";
      });
    },
  };
  env.handle = install({ rulesets: [probe] });
  for (const hook of ["init", "setup", "ready"]) env.world.callHook(hook);
  env.world.deliverSocket(); // the GM's link announcements (logic/link-holder.js)
});

afterEach(() => {
  env.handle.dispose();
  uninstallFakeFoundry();
});

/** Emit on the module socket as `userId`, with any arguments, as a hand-written client could. */
function emitAs(userId, ...args) {
  env.world.asUser(userId);
  globalThis.game.socket.emit(SOCKET, ...args);
}
const typesEmitted = () => env.world.emitted.map((e) => e.payload.type);

test("the honest path: a player's request runs on the GM as that player", async () => {
  env.world.asUser(env.player);
  const settled = probeApi.relay("probe", "act", { n: 1 });
  assert.deepEqual(env.world.deliverAs(env.gm).map((p) => p.type), ["request"]);
  assert.deepEqual(env.world.deliverAs(env.player).map((p) => p.type), ["ack"]);
  assert.deepEqual(env.world.deliverAs(env.gm).map((p) => p.type), ["go"]);
  await flush();
  assert.deepEqual(calls, [{ data: { n: 1 }, sender: { userId: env.player, isGM: false } }]);
  env.world.deliverAs(env.player);
  assert.equal(await settled, "acted");
});

test("extra socket arguments: a player emitting (payload, gmId) to pose as the GM is refused whole", async () => {
  emitAs(env.player, { type: "request", request_id: "forged0000000001", ruleset: "probe", action: "act", data: {} }, env.gm);
  env.world.deliverAs(env.gm);
  assert.deepEqual(typesEmitted(), [], "no ack: the GM's browser did not take it");
  emitAs(env.player, { type: "go", request_id: "forged0000000001" }, env.gm);
  env.world.deliverAs(env.gm);
  await flush();
  assert.deepEqual(calls, []);
  assert.deepEqual(typesEmitted(), []);
});

test("a forged user id in the data: the GM still acts as the real sender, not as the id claimed", async () => {
  const claims = { userId: env.gm, user_id: env.gm, sender: { userId: env.gm, isGM: true }, senderId: env.gm };
  emitAs(env.player, { type: "request", request_id: "claims0000000001", ruleset: "probe", action: "act", data: claims, userId: env.gm });
  env.world.deliverAs(env.gm);
  env.world.emitted.length = 0;
  emitAs(env.player, { type: "go", request_id: "claims0000000001", userId: env.gm });
  env.world.deliverAs(env.gm);
  await flush();
  assert.equal(calls.length, 1);
  assert.deepEqual(calls[0].sender, { userId: env.player, isGM: false });
});

test("a player posing as the GM towards another player: forged acks, answers and refusals are ignored", async () => {
  // The victim has a request of its own waiting for the GM's ack.
  env.world.asUser(env.stranger);
  const settled = probeApi.relay("probe", "act", {});
  const requestId = env.world.emitted.splice(0)[0].payload.request_id;
  const outcome = [];
  settled.then((result) => outcome.push(result), (error) => outcome.push(error.code));
  const forged = [
    [{ type: "done", to: env.stranger, request_id: requestId, ok: true, result: "forged" }],
    [{ type: "done", to: env.stranger, request_id: requestId, ok: true, result: "forged" }, env.gm],
    [{ type: "ack", to: env.stranger, request_id: requestId }],
    [{ type: "ack", to: env.stranger, request_id: requestId }, env.gm],
    [{ type: "done", to: env.stranger, request_id: requestId, ok: false, error: { code: "already_fated", message: "forged", field: null } }],
    [{ type: "done", to: env.stranger, request_id: requestId, ok: false, error: { code: "already_fated", message: "forged", field: null } }, env.gm],
    [{ type: "notice", to: env.stranger, level: "error", key: "FATE_BRIDGE.Error.already_fated" }],
  ];
  for (const args of forged) emitAs(env.player, ...args);
  const noticesBefore = env.world.notices.length;
  env.world.deliverAs(env.stranger);
  await flush();
  assert.deepEqual(typesEmitted(), [], "no go sent on a forged ack");
  assert.equal(env.world.notices.length, noticesBefore, "no forged refusal shown");
  assert.deepEqual(outcome, [], "no forged done settles the request");
  // The real GM's ack is heard: the refusals above were about the sender, nothing else.
  emitAs(env.gm, { type: "ack", to: env.stranger, request_id: requestId });
  env.world.deliverAs(env.stranger);
  assert.deepEqual(typesEmitted(), ["go"]);
});

test("a go for another player's held request never runs it; the forger is told relay_expired", async () => {
  emitAs(env.stranger, { type: "request", request_id: "theirs0000000001", ruleset: "probe", action: "act", data: {} });
  env.world.deliverAs(env.gm);
  env.world.emitted.length = 0;
  emitAs(env.player, { type: "go", request_id: "theirs0000000001" });
  env.world.deliverAs(env.gm);
  await flush();
  assert.deepEqual(calls, []);
  const done = env.world.emitted.find((e) => e.payload.type === "done");
  assert.equal(done.payload.to, env.player);
  assert.equal(done.payload.error.code, "relay_expired");
});

test("only a delivery shaped (payload object, sender id) is accepted", () => {
  const payload = { type: "go", request_id: "x" };
  assert.deepEqual(socketDelivery([payload, "playerUser00001"]), { payload, senderId: "playerUser00001" });
  assert.equal(socketDelivery([payload, "gmUser000000001", "playerUser00001"]), null, "extra argument before Foundry's");
  assert.equal(socketDelivery([payload]), null, "no sender id");
  assert.equal(socketDelivery([[payload], "playerUser00001"]), null, "an array payload");
  assert.equal(socketDelivery(["go", "playerUser00001"]), null, "a string payload");
  assert.equal(socketDelivery([payload, { id: "gmUser000000001" }]), null, "a sender that is not an id");
  assert.equal(socketDelivery([payload, "../../etc"]), null);
  assert.equal(socketDelivery([payload, ""]), null);
});
