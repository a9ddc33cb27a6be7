/**
 * logic/token-pairing.js on its own (issue 36): two GM browsers and a player's on a plain array
 * socket that, like Foundry's server, hands every payload to every other browser with the
 * sender's id. The holder gives the token to a GM only, sealed to the asker's key, once its link is
 * welcomed; the asker takes it only from the GM it asked, for its own request.
 */
import { test, describe } from "node:test";
import assert from "node:assert/strict";
import { PAIRING_TYPES, TOKEN_SEAL_INFO, createTokenPairing } from "../scripts/logic/token-pairing.js";
import { SEAL_INFO, createReplyKey, sealReply } from "../scripts/logic/sealed-reply.js";

const HOLDER = "gmHolder00000001";
const ASKER = "gmAsker000000002";
const PLAYER = "player0000000003";
const GMS = new Set([HOLDER, ASKER]);
const TOKEN = "the-world-token_0123456789abcdefghijklmnopq";
const crypto = { subtle: globalThis.crypto.subtle, randomValues: (bytes) => globalThis.crypto.getRandomValues(bytes) };

/** The three browsers and the socket between them. */
function table({ welcomed = true, subtle = crypto.subtle } = {}) {
  const sent = [];
  /** Every payload delivered, in order. */
  const log = [];
  const got = [];
  const errors = [];
  let ids = 0;
  const link = { welcomed };
  const browsers = Object.fromEntries([HOLDER, ASKER, PLAYER].map((id) => [id, createTokenPairing({
    selfId: () => id,
    isGMUser: (userId) => GMS.has(userId),
    tokenToGive: () => (id === HOLDER && link.welcomed ? TOKEN : null),
    send: (payload) => sent.push({ payload: structuredClone(payload), senderId: id }),
    crypto: { ...crypto, subtle },
    newId: () => `${id.slice(0, 6)}req${String((ids += 1)).padStart(7, "0")}`,
    onToken: (token, fromId) => got.push({ to: id, token, fromId }),
    onError: (error) => errors.push(error),
  })]));
  /** Deliver what was sent to every other browser, letting WebCrypto settle, until quiet. */
  async function run() {
    for (let round = 0; round < 6; round += 1) {
      await Promise.all(Object.values(browsers).map((browser) => browser.idle()));
      for (const { payload, senderId } of sent.splice(0)) {
        for (const [id, browser] of Object.entries(browsers)) if (id !== senderId) browser.receive(payload, senderId);
        log.push({ payload, senderId });
      }
    }
  }
  return { browsers, log, got, errors, link, run, emit: (payload, senderId) => sent.push({ payload, senderId }) };
}

describe("logic/token-pairing.js", () => {
  test("the holder seals the token to the GM who asked; only that GM's browser takes it", async () => {
    const t = table();
    assert.equal(t.browsers[ASKER].ask(HOLDER), true);
    await t.run();
    assert.deepEqual(t.got, [{ to: ASKER, token: TOKEN, fromId: HOLDER }]);
    const give = t.log.find((entry) => entry.payload.type === PAIRING_TYPES.GIVE);
    assert.equal(give.senderId, HOLDER);
    assert.deepEqual(Object.keys(give.payload).sort(), ["request_id", "sealed", "to", "type"]);
    assert.equal(JSON.stringify(t.log).includes(TOKEN), false, "nothing on the socket holds the token in clear");
    assert.deepEqual(t.errors, []);
  });

  test("a seal of the token opens with the asker's key for that user and request only, and never as a relay reply", async () => {
    const key = await createReplyKey(crypto.subtle, TOKEN_SEAL_INFO);
    const context = { to: ASKER, requestId: "request000000001" };
    const sealed = await sealReply(crypto.subtle, key.replyKey, { token: TOKEN }, context, crypto.randomValues, TOKEN_SEAL_INFO);
    assert.deepEqual(await key.open(sealed, context), { token: TOKEN });
    await assert.rejects(key.open(sealed, { ...context, to: PLAYER }));
    const relayKey = await createReplyKey(crypto.subtle, SEAL_INFO);
    const asRelay = await sealReply(crypto.subtle, relayKey.replyKey, { token: TOKEN }, context, crypto.randomValues, TOKEN_SEAL_INFO);
    await assert.rejects(relayKey.open(asRelay, context), "a relay reply key does not open a token seal");
  });

  test("an ask from a player, or addressed to another browser, gets nothing", async () => {
    const t = table();
    const key = await createReplyKey(crypto.subtle, TOKEN_SEAL_INFO);
    t.emit({ type: PAIRING_TYPES.ASK, to: HOLDER, request_id: "playerAsk0000001", reply_key: key.replyKey }, PLAYER);
    t.emit({ type: PAIRING_TYPES.ASK, to: PLAYER, request_id: "gmAsk00000000001", reply_key: key.replyKey }, ASKER);
    await t.run();
    assert.deepEqual(t.log.filter((entry) => entry.payload.type === PAIRING_TYPES.GIVE), []);
  });

  test("an ask before the holder's link is welcomed waits for answer(); a malformed ask is dropped", async () => {
    const t = table({ welcomed: false });
    t.emit({ type: PAIRING_TYPES.ASK, to: HOLDER, request_id: "gmAsk00000000001", reply_key: "not-a-key" }, ASKER);
    t.browsers[ASKER].ask(HOLDER);
    await t.run();
    assert.deepEqual(t.got, []);
    t.link.welcomed = true;
    t.browsers[HOLDER].answer();
    await t.run();
    assert.deepEqual(t.got, [{ to: ASKER, token: TOKEN, fromId: HOLDER }]);
    assert.equal(t.log.filter((entry) => entry.payload.type === PAIRING_TYPES.GIVE).length, 1, "one answer, to the well-formed ask");
  });

  test("an answer from a player, from another GM than the one asked, or for another request is not taken", async () => {
    const t = table({ welcomed: false });
    t.browsers[ASKER].ask(HOLDER);
    await t.run();
    const ask = t.log.find((entry) => entry.payload.type === PAIRING_TYPES.ASK).payload;
    const forge = (context) => sealReply(crypto.subtle, ask.reply_key, { token: "forged" }, context, crypto.randomValues, TOKEN_SEAL_INFO);
    const mine = { to: ASKER, requestId: ask.request_id };
    t.emit({ type: PAIRING_TYPES.GIVE, to: ASKER, request_id: ask.request_id, sealed: await forge(mine) }, PLAYER);
    t.emit({ type: PAIRING_TYPES.GIVE, to: ASKER, request_id: ask.request_id, sealed: await forge(mine) }, "gmOther000000004");
    GMS.add("gmOther000000004");
    try {
      t.emit({ type: PAIRING_TYPES.GIVE, to: ASKER, request_id: ask.request_id, sealed: await forge(mine) }, "gmOther000000004");
      t.emit({ type: PAIRING_TYPES.GIVE, to: ASKER, request_id: "otherRequest0001", sealed: await forge({ to: ASKER, requestId: "otherRequest0001" }) }, HOLDER);
      await t.run();
    } finally {
      GMS.delete("gmOther000000004");
    }
    assert.deepEqual(t.got, [], "none of them");
    t.emit({ type: PAIRING_TYPES.GIVE, to: ASKER, request_id: ask.request_id, sealed: { key: "x", iv: "y", data: "z" } }, HOLDER);
    await t.run();
    assert.deepEqual(t.got, []);
    assert.equal(t.errors.length, 1, "a seal from the holder that does not open is reported");
  });

  test("without WebCrypto a browser cannot ask; after dispose nothing more is sent", async () => {
    const t = table({ subtle: null });
    assert.equal(t.browsers[ASKER].ask(HOLDER), false);
    await t.run();
    assert.deepEqual(t.log, []);

    const u = table({ welcomed: false });
    u.browsers[ASKER].ask(HOLDER);
    await u.run();
    u.link.welcomed = true;
    u.browsers[HOLDER].dispose();
    u.browsers[HOLDER].answer();
    await u.run();
    assert.deepEqual(u.got, []);
    assert.deepEqual(u.log.map((entry) => entry.payload.type), [PAIRING_TYPES.ASK]);
  });
});
