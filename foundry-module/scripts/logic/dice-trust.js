/**
 * Dice everyone can trust, the module's half: no Foundry globals (scripts/foundry.js is
 * injected).
 *
 * - The asking player's browser adds a random `client_seed` (crypto.getRandomValues) to each
 *   request: relayed requests carry it to the GM's browser (`seedRelayRequest` on the sender,
 *   `rememberRelaySeed` on the GM), and the GM's link stamps it on the bridge request made for
 *   that player (`stampRequest`: the player's own value, else one of this browser's).
 * - The dice the bridge rolled come back as `reply.rolls`; `rememberRolls` keeps them with the
 *   reply's card, and `rollsForCard` turns them into serialized Foundry Rolls for the ChatMessage
 *   (`message.rolls`), so every client, and Dice So Nice, shows the bridge's own values, once,
 *   never re-rolled in a browser.
 * - Dice sessions: `createDiceSessions` starts and ends one, posts the commitment, then the reveal,
 *   and marks the session's commitment card "verified" when the revealed seed hashes to the
 *   commitment posted before the rolls.
 * - Physical dice: `parsePhysical` checks what the roller typed, as the bridge will;
 *   `physicalAllowed` reads the world's dice settings (kept by the active GM's browser in the
 *   world setting DICE_SETTINGS_SETTING, from `dice_status` after each `welcome` and from each
 *   `dice_settings_saved`), and `withPhysicalDice` asks for one more die and sends again, under a
 *   new event_id, when the bridge says the list ran out (`nextPhysicalDie`).
 * - The reveal schedule (`/dicesession start MINUTES`): its planned end is kept in the world setting
 *   DICE_SCHEDULE_SETTING, so the active GM's browser arms the timer again after a reload.
 * - GM overrides: `overrideRequest` builds the GM-only `gm_override`, naming the decision a chat
 *   card shows (its DECISION_FLAG) or the chat message itself.
 */

import { BridgeError } from "./errors.js";
import { DECISION_FLAG } from "./receipts.js";

/** This module's flag on a dice session's commitment card: {session_id, commitment, verified}. */
export const DICE_SESSION_FLAG = "diceSession";
/** Bytes of a client seed (128 bits, as 32 hex digits). */
export const CLIENT_SEED_BYTES = 16;

/**
 * @param {(bytes: Uint8Array) => Uint8Array} getRandomValues crypto.getRandomValues
 * @returns {string} a fresh client seed, hex
 */
export function newClientSeed(getRandomValues) {
  const bytes = getRandomValues(new Uint8Array(CLIENT_SEED_BYTES));
  return Array.from(bytes, (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * Remembers the client seeds relayed by players, until the GM's link sends the request made
 * for them.
 *
 * @param {() => string} freshSeed a seed of this browser (for the GM's own requests)
 */
export function createClientSeeds(freshSeed) {
  /** @type {Map<string, string[]>} user id -> seeds in arrival order */
  const waiting = new Map();
  return {
    /** A relay `request` payload on its way out: with this browser's seed. */
    seedRelayRequest(payload) {
      return payload?.type === "request" ? { ...payload, client_seed: freshSeed() } : payload;
    },
    /** A relay payload received (GM side): keep a `request`'s seed for its sender. */
    rememberRelaySeed(payload, senderId) {
      if (payload?.type !== "request" || typeof payload.client_seed !== "string" || !/^[0-9a-f]{1,128}$/.test(payload.client_seed)) return;
      const seeds = waiting.get(senderId) ?? [];
      seeds.push(payload.client_seed);
      waiting.set(senderId, seeds.slice(-16));
    },
    /**
     * A bridge request with its `client_seed`: the asking player's (by `user_id`), else this
     * browser's; queries (`query_id`) and messages with a seed already are left as they are.
     */
    stampRequest(message) {
      if (!message || typeof message.event_id !== "string" || typeof message.client_seed === "string") return message;
      const seeds = waiting.get(message.user_id);
      const seed = seeds?.shift() ?? freshSeed();
      if (seeds && !seeds.length) waiting.delete(message.user_id);
      return { ...message, client_seed: seed };
    },
  };
}

/**
 * The bridge's dice as serialized Foundry Rolls (`Roll.fromData`), one Roll per run of dice with the
 * same faces: the same shape as logic/dice.js rollData (Foundry v13 Roll#toJSON: class, formula,
 * terms of class Die with `results: [{result, active}]`, evaluated).
 *
 * @param {Array<{faces: number, value: number, source: string}>} rolls a reply's `rolls`
 * @returns {object[]}
 */
export function rollDataOf(rolls) {
  const groups = [];
  for (const die of rolls) {
    const last = groups.at(-1);
    if (last && last.faces === die.faces) last.values.push(die.value);
    else groups.push({ faces: die.faces, values: [die.value] });
  }
  return groups.map(({ faces, values }) => ({
    class: "Roll",
    options: {},
    dice: [],
    formula: `${values.length}d${faces}`,
    terms: [{
      class: "Die",
      options: {},
      evaluated: true,
      number: values.length,
      faces,
      modifiers: [],
      results: values.map((result) => ({ result, active: true })),
    }],
    total: values.reduce((a, b) => a + b, 0),
    evaluated: true,
  }));
}

const cardRolls = new WeakMap();

/** Keep a reply's `rolls` with its `card` (the object the ruleset then posts). */
export function rememberRolls(reply) {
  if (reply?.card && typeof reply.card === "object" && Array.isArray(reply.rolls) && reply.rolls.length) {
    cardRolls.set(reply.card, rollDataOf(reply.rolls));
  }
  return reply;
}

/**
 * @param {object} card a bridge card
 * @returns {object[]} the serialized Rolls of the dice its reply rolled ([] for none)
 */
export function rollsForCard(card) {
  return (card && typeof card === "object" && cardRolls.get(card)) || [];
}

/**
 * The values a roller typed for physical dice, checked as the bridge checks them.
 *
 * @param {string} text numbers separated by spaces or commas
 * @param {number[]} faces the dice asked for, in order
 * @returns {number[]}
 * @throws {RangeError} naming the die and its allowed range
 */
export function parsePhysical(text, faces) {
  const values = String(text).split(/[\s,]+/).filter(Boolean).map(Number);
  if (values.length !== faces.length) throw new RangeError(`enter ${faces.length} dice (${faces.map((f) => `d${f}`).join(", ")}), got ${values.length}`);
  values.forEach((value, i) => {
    if (!Number.isInteger(value) || value < 1 || value > faces[i]) {
      throw new RangeError(`physical[${i}]: ${text.split(/[\s,]+/).filter(Boolean)[i]} is not a possible d${faces[i]} roll (allowed 1..${faces[i]})`);
    }
  });
  return values;
}

/** World setting (hidden): the world's dice settings as the bridge last said, for every client. */
export const DICE_SETTINGS_SETTING = "diceSettings";
/** World setting (hidden): the planned end of the open dice session, {session_id, ends_at (ms epoch), user_id} or null. */
export const DICE_SCHEDULE_SETTING = "diceSchedule";
/** The bridge's dice settings before it said otherwise (bridge/fairness/wire.py DiceSettings defaults). */
export const DEFAULT_DICE_SETTINGS = Object.freeze({ provable: false, physical_rulesets: [], override_mark: "everyone" });

/**
 * @param {unknown} settings the world setting DICE_SETTINGS_SETTING
 * @param {string} ruleset a ruleset id
 * @returns {boolean} the world allows physical dice for `ruleset`
 */
export function physicalAllowed(settings, ruleset) {
  return Array.isArray(settings?.physical_rulesets) && settings.physical_rulesets.includes(ruleset);
}

/**
 * The die the bridge asks for next when a request's `physical` list ran out (bridge/fairness/dice.py
 * TableDice.roll: `bad_message`, field `physical`, "... this roll needs more: die N is a dF (1..F)"):
 * read from the range that ends the text, which a translated sentence keeps (pinned by
 * tests/test_physical_runs_out.py). A value its die cannot show names `physical[i]`, and too many
 * dice end without a range: neither is read as a die to ask for.
 *
 * @param {unknown} error a BridgeError (from the link, or carried back by the relay)
 * @returns {number|null} the faces of the next die, or null for any other error
 */
export function nextPhysicalDie(error) {
  if (error?.code !== "bad_message" || error.field !== "physical") return null;
  const match = /\(1\.\.(\d+)\)$/.exec(String(error.message ?? "").trim());
  return match ? Number(match[1]) : null;
}

/** The most physical dice one request carries (bridge/wire/base.py: `physical` max_length 64). */
export const MOST_PHYSICAL = 64;

/**
 * The `physical` of a relayed request's data, checked on the GM's browser (the bridge checks each
 * value against its die).
 *
 * @param {unknown} value
 * @returns {number[]|null} null when absent
 * @throws {BridgeError} `bad_message` (field `physical`) for anything but a list of at most 64 whole numbers
 */
export function relayedPhysical(value) {
  if (value === undefined || value === null) return null;
  if (!Array.isArray(value) || value.length > MOST_PHYSICAL || !value.every(Number.isInteger)) {
    throw new BridgeError("bad_message", `physical: a list of at most ${MOST_PHYSICAL} whole numbers`, { field: "physical" });
  }
  return [...value];
}

/**
 * @param {object} message a bridge request
 * @param {number[]|null} physical
 * @returns {object} the request with `physical` when there are physical dice
 */
export function withPhysical(message, physical) {
  return physical ? { ...message, physical } : message;
}

/**
 * Send a request with the physical dice thrown so far; when the bridge answers that the list ran
 * out (a pool's exploding 6, a die the module could not foresee), ask for that die and send again.
 * Each send is a new request: `send` must give it a new event_id (a refused event_id is answered
 * from the stored refusal, docs/protocol.md), so the refusals stay on the record and the accepted
 * request is the one with every die.
 *
 * @template T
 * @param {number[]|null} physical the dice thrown before the first send (null: bridge dice, sent once)
 * @param {(faces: number, count: number) => Promise<number[]>} ask the roller's next dice
 * @param {(physical: number[]|null) => Promise<T>} send
 * @param {number} [most] at most this many dice in all (the bridge takes 64)
 * @returns {Promise<T>} the accepted reply; rejects with the last refusal when it is not a "runs out"
 */
export async function withPhysicalDice(physical, ask, send, most = MOST_PHYSICAL) {
  let thrown = physical;
  for (;;) {
    try {
      return await send(thrown);
    } catch (error) {
      const faces = thrown ? nextPhysicalDie(error) : null;
      if (faces === null || thrown.length >= most) throw error;
      thrown = [...thrown, ...await ask(faces, 1)];
    }
  }
}

/**
 * @param {string} seedHex the revealed seed
 * @param {string} commitment the commitment posted before the rolls
 * @param {(bytes: Uint8Array) => Promise<ArrayBuffer>} sha256 crypto.subtle.digest("SHA-256", ...)
 * @returns {Promise<boolean>} the seed hashes to the commitment
 */
export async function commitmentMatches(seedHex, commitment, sha256) {
  if (typeof seedHex !== "string" || !/^([0-9a-f]{2}){32}$/.test(seedHex)) return false;
  const bytes = Uint8Array.from(seedHex.match(/../g), (pair) => parseInt(pair, 16));
  const hash = Array.from(new Uint8Array(await sha256(bytes)), (b) => b.toString(16).padStart(2, "0")).join("");
  return hash === commitment;
}

/** The mark appended to a verified commitment card. */
export const VERIFIED_MARK = '<p class="fate-bridge dice-verified">✔ verified: the revealed seed matches this commitment</p>';

/**
 * Start and end dice sessions from the GM's browser; the cards go to chat (and, from the bridge,
 * to the overlay).
 *
 * @param {object} deps
 * @param {() => ({request(message: object): Promise<object>}|null)} deps.link the live connection
 * @param {{createChatMessage(data: object): Promise<string>, updateChatMessage(id: string, data: object): Promise<void>,
 *   messagesWithFlag(key: string): Array<{id: string, content: string, flag: any}>, sha256(bytes: Uint8Array): Promise<ArrayBuffer>,
 *   gmUserIds(): string[]}} deps.foundry scripts/foundry.js
 * @param {() => string} deps.newEventId
 */
export function createDiceSessions({ link, foundry, newEventId }) {
  function request(type, userId) {
    const connection = link();
    if (!connection) return Promise.reject(new Error("this browser has no bridge connection"));
    return connection.request({ type, v: 1, event_id: newEventId(), user_id: userId, user_is_gm: true });
  }
  const post = (card, flags = {}) => foundry.createChatMessage({
    content: card.html, speaker: { actor: null, alias: "fate-bridge" }, whisper: [], blind: false, flags,
  });
  return {
    /**
     * Commit: post the commitment card (flagged with the session).
     * @returns {Promise<{messageId: string, sessionId: string}>} the card's message id and the session's id
     */
    async start(userId) {
      const reply = await request("dice_session_start", userId);
      const messageId = await post(reply.card, { [DICE_SESSION_FLAG]: { session_id: reply.session_id, commitment: reply.commitment, verified: false } });
      return { messageId, sessionId: reply.session_id };
    },
    /**
     * Reveal: post the reveal card; mark the session's commitment card verified when the seed
     * hashes to the commitment it showed. @returns {Promise<boolean>} verified
     */
    async end(userId) {
      const reply = await request("dice_session_end", userId);
      await post(reply.card);
      const posted = foundry.messagesWithFlag(DICE_SESSION_FLAG).find((m) => m.flag?.session_id === reply.session_id);
      const verified = Boolean(posted) && posted.flag.commitment === reply.commitment
        && await commitmentMatches(reply.seed, posted.flag.commitment, foundry.sha256);
      if (verified) {
        await foundry.updateChatMessage(posted.id, {
          content: posted.content + VERIFIED_MARK,
          flags: { [DICE_SESSION_FLAG]: { ...posted.flag, verified: true } },
        });
      }
      return verified;
    },
  };
}

/**
 * The GM-only `gm_override` (a hand-set result, its reason required).
 *
 * @returns {object}
 * @throws {RangeError} without a result or a reason
 */
export function overrideRequest({ eventId, targetEventId, messageId = null, result, values = [], reason, userId, isGM }) {
  if (!String(result ?? "").trim()) throw new RangeError("an override needs the result to set");
  if (!String(reason ?? "").trim()) throw new RangeError("an override needs a reason (it is on the record)");
  return {
    type: "gm_override", v: 1, event_id: eventId, target_event_id: targetEventId, message_id: messageId,
    result: String(result).trim(), values, reason: String(reason).trim(), user_id: userId, user_is_gm: Boolean(isGM),
  };
}

/** The relay's id and actions of dice commands (the GM's browser talks to the bridge). */
const DICE_RELAY = "dice";

/**
 * `/diceoverride TARGET RESULT | REASON` -> its parts.
 *
 * @param {string} args
 * @returns {{target: string, result: string, reason: string}}
 * @throws {RangeError} when a part is missing
 */
export function parseOverride(args) {
  const match = /^(\S+)\s+([^|]+)\|([\s\S]+)$/.exec(String(args ?? "").trim());
  if (!match) throw new RangeError("write /diceoverride TARGET RESULT | REASON (TARGET: the decision's event id or chat message id)");
  return { target: match[1], result: match[2].trim(), reason: match[3].trim() };
}

/**
 * `/dicesettings provable=on physical=mythic,pool mark=gm` -> the world's new dice settings.
 *
 * @param {string} args `key=value` words: `provable` (on|off), `physical` (ruleset ids, comma
 *   separated, or `none`), `mark` (everyone|gm: who sees an override's mark)
 * @param {{provable: boolean, physical_rulesets: string[], override_mark: string}} current
 * @returns {{provable: boolean, physical_rulesets: string[], override_mark: string}}
 * @throws {RangeError} naming the word it cannot read
 */
export function parseDiceSettings(args, current) {
  const next = { ...current, physical_rulesets: [...current.physical_rulesets] };
  for (const word of String(args ?? "").trim().split(/\s+/).filter(Boolean)) {
    const [key, value = ""] = word.split("=", 2);
    if (key === "provable" && (value === "on" || value === "off")) next.provable = value === "on";
    else if (key === "physical") next.physical_rulesets = value === "none" ? [] : value.split(",").filter(Boolean);
    else if (key === "mark" && (value === "everyone" || value === "gm")) next.override_mark = value;
    else throw new RangeError(`${word}: write provable=on|off, physical=RULESET,... or none, mark=everyone|gm`);
  }
  return next;
}

/**
 * Register `/dicesession start [MINUTES]|end`, `/dicesettings` and `/diceoverride` (GMs; run on the
 * active GM's browser through the relay). `start MINUTES` ends the session by itself after that many
 * minutes (1..1440): the planned end goes to the world setting DICE_SCHEDULE_SETTING, and after each
 * `welcome` the active GM's browser asks `dice_status`, keeps the world's dice settings in
 * DICE_SETTINGS_SETTING (every client reads them there: `physicalAllowed`) and arms the timer again
 * for a planned end of the session still open (at once when that time has passed while no GM's
 * browser was open). The clock is the browser's: the bridge has none (bridge/fairness).
 *
 * @param {object} deps
 * @param {{register(name: string, handler: Function): void}} deps.commands logic/commands.js
 * @param {{on(ruleset: string, action: string, handler: Function): void, request(ruleset: string, action: string, data: unknown): Promise<unknown>}} deps.relays logic/relay.js
 * @param {() => ({request(message: object): Promise<object>}|null)} deps.link the live connection
 * @param {object} deps.foundry scripts/foundry.js (createChatMessage, updateChatMessage, messagesWithFlag, sha256, gmUserIds,
 *   messageData, notify, getSetting, setSetting, isActiveGM)
 * @param {() => string} deps.newEventId
 * @param {{setTimeout: Function, clearTimeout: Function, now: () => number}} deps.timers
 * @param {(listener: () => void) => void} deps.onWelcome registers a listener of each `welcome`
 */
export function installDiceCommands({ commands, relays, link, foundry, newEventId, timers, onWelcome }) {
  const sessions = createDiceSessions({ link, foundry, newEventId });
  const refuse = (error) => foundry.notify("error", "FATE_BRIDGE.Dice.Refused", { message: error?.message ?? String(error) });
  let scheduled = null; // this browser's timer for the world's planned end (DICE_SCHEDULE_SETTING)
  function disarm() {
    if (scheduled !== null) timers.clearTimeout(scheduled);
    scheduled = null;
  }
  /** Arm the timer for `plan` ({ends_at, user_id}): the session ends as the GM who planned it. */
  function arm(plan) {
    disarm();
    scheduled = timers.setTimeout(() => {
      scheduled = null;
      end(plan.user_id).catch(refuse);
    }, Math.max(0, plan.ends_at - timers.now()));
  }
  async function end(userId) {
    disarm();
    let verified;
    try {
      verified = await sessions.end(userId);
    } catch (error) {
      // No session open (ended elsewhere): its plan is void too.
      if (error?.code === "not_found") await foundry.setSetting(DICE_SCHEDULE_SETTING, null);
      throw error;
    }
    await foundry.setSetting(DICE_SCHEDULE_SETTING, null);
    foundry.notify(verified ? "info" : "error", verified ? "FATE_BRIDGE.Dice.Verified" : "FATE_BRIDGE.Dice.NotVerified", { session: "" });
    return { verified };
  }
  /** The bridge's dice settings, for every client (written only when they changed). */
  async function keepSettings(settings) {
    if (settings && JSON.stringify(settings) !== JSON.stringify(foundry.getSetting(DICE_SETTINGS_SETTING))) {
      await foundry.setSetting(DICE_SETTINGS_SETTING, settings);
    }
  }
  /** After a `welcome`: the world's dice settings and the open session's planned end, from the bridge's status. */
  async function reconcile() {
    const connection = link();
    if (!connection || !foundry.isActiveGM()) return;
    const status = await connection.request({ type: "dice_status", v: 1, query_id: newEventId() });
    await keepSettings(status.settings);
    const plan = foundry.getSetting(DICE_SCHEDULE_SETTING);
    if (plan && status.session_id !== null && plan.session_id === status.session_id) arm(plan);
    else {
      disarm();
      if (plan) await foundry.setSetting(DICE_SCHEDULE_SETTING, null);
    }
  }
  onWelcome(() => {
    reconcile().catch((error) => console.warn("fate-bridge | the dice status could not be read", error));
  });
  relays.on(DICE_RELAY, "session", async (data, sender) => {
    if (!sender.isGM) throw new RangeError("only a GM may start or end a dice session");
    if (data?.action !== "start") return end(sender.userId);
    const { messageId, sessionId } = await sessions.start(sender.userId);
    if (data.minutes) {
      const plan = { session_id: sessionId, ends_at: timers.now() + data.minutes * 60_000, user_id: sender.userId };
      await foundry.setSetting(DICE_SCHEDULE_SETTING, plan);
      arm(plan);
    }
    return { started: messageId };
  });
  relays.on(DICE_RELAY, "override", async (data, sender) => {
    const connection = link();
    if (!connection) throw new Error("this browser has no bridge connection");
    const shown = foundry.messageData(data.target);
    const messageId = shown ? data.target : null;
    // A card this module posted for a decision names it (DECISION_FLAG); any other chat message
    // (SoHL's own roll) is one the bridge knows by its id. A target the world does not hold is
    // refused (`not_found`): the refusal is shown and no card is posted or changed.
    const reply = await connection.request(overrideRequest({
      eventId: newEventId(), targetEventId: shown?.flags?.[DECISION_FLAG] ?? data.target, messageId,
      result: data.result, reason: data.reason, userId: sender.userId, isGM: sender.isGM,
    }));
    const speaker = { actor: null, alias: "fate-bridge" };
    // The overridden card shows the hand-set result (marked or not, as the world says); without a
    // chat message to replace, the result is posted as a card of its own.
    if (messageId) await foundry.updateChatMessage(messageId, { content: reply.card.html, flags: { override: reply.event_id } });
    else await foundry.createChatMessage({ content: reply.card.html, speaker, whisper: [], blind: false, flags: { override: reply.target_event_id } });
    if (!reply.marked) {
      await foundry.createChatMessage({ content: reply.gm_card.html, speaker, whisper: foundry.gmUserIds(), blind: false, flags: { override: reply.target_event_id } });
    }
    return { applied: true };
  });
  relays.on(DICE_RELAY, "settings", async (data, sender) => {
    const connection = link();
    if (!connection) throw new Error("this browser has no bridge connection");
    const status = await connection.request({ type: "dice_status", v: 1, query_id: newEventId() });
    const settings = parseDiceSettings(data.args, status.settings);
    const saved = await connection.request({ type: "dice_settings", v: 1, event_id: newEventId(), user_id: sender.userId, user_is_gm: sender.isGM, settings });
    await keepSettings(saved.settings);
    foundry.notify("info", "FATE_BRIDGE.Dice.Settings", {
      provable: saved.settings.provable ? "on" : "off", physical: saved.settings.physical_rulesets.join(", ") || "none", mark: saved.settings.override_mark,
    });
    return saved.settings;
  });
  commands.register("dicesettings", (args, { isGM }) => {
    if (!isGM) foundry.notify("warn", "FATE_BRIDGE.Dice.GmOnly");
    else relays.request(DICE_RELAY, "settings", { args }).catch(refuse);
    return false;
  });
  commands.register("dicesession", (args, { isGM }) => {
    const [action = "", minutesText] = String(args ?? "").trim().toLowerCase().split(/\s+/);
    const minutes = minutesText === undefined ? null : Number(minutesText);
    const valid = (action === "start" && (minutes === null || (Number.isInteger(minutes) && minutes >= 1 && minutes <= 1440)))
      || (action === "end" && minutes === null);
    if (!isGM) foundry.notify("warn", "FATE_BRIDGE.Dice.GmOnly");
    else if (!valid) foundry.notify("info", "FATE_BRIDGE.Dice.Usage");
    else relays.request(DICE_RELAY, "session", { action, minutes }).catch(refuse);
    return false;
  });
  commands.register("diceoverride", (args, { isGM }) => {
    if (!isGM) {
      foundry.notify("warn", "FATE_BRIDGE.Dice.GmOnly");
      return false;
    }
    let parts;
    try {
      parts = parseOverride(args);
    } catch (error) {
      refuse(error);
      return false;
    }
    relays.request(DICE_RELAY, "override", parts).catch(refuse);
    return false;
  });
}
