/**
 * The `api` each ruleset's `install(api)` receives (contract in scripts/rulesets/index.js): a thin
 * layer over main.js's command registry, relay hub, bridge router and live connection. Only
 * main.js imports this file; Foundry is reached through foundry.js alone.
 */

import * as fvtt from "./foundry.js";
import { BridgeError } from "./logic/errors.js";
import { postCard } from "./logic/cards.js";
import { createCardRecords } from "./logic/receipts.js";
import { DICE_SETTINGS_SETTING, parsePhysical, physicalAllowed, withPhysicalDice } from "./logic/dice-trust.js";

/** Ruleset ids: the bridge's spelling, a lower-case word. */
const RULESET_ID = /^[a-z][a-z0-9_-]{0,63}$/;

/** BridgeError code of `api.request` on a client that is not the active GM. */
export const NOT_ACTIVE_GM = "not_active_gm";
/** BridgeError code of `api.physicalDice` when the roller closed the dialog (nothing is sent). */
export const PHYSICAL_CANCELLED = "physical_cancelled";

/**
 * @typedef {object} RulesetApi
 * @property {typeof import("./foundry.js")} fvtt the Foundry helpers: a ruleset's only Foundry access
 * @property {(name: string, handler: import("./logic/commands.js").CommandHandler) => void} registerCommand
 *   chat command `/name args...` on every client; `handler(argsText, {userId, isGM})` returns
 *   false (or a Promise) to keep the text out of chat. Throws a TypeError for a bad, Foundry-owned
 *   or taken name.
 * @property {(message: {event_id?: string, query_id?: string}) => Promise<object>} request
 *   on the active GM's client: a bridge request over the live connection (queued while the link
 *   is down), resolved with the reply, rejected with its BridgeError {code, message, field};
 *   elsewhere rejected with BridgeError `not_active_gm`, and with `bridge_down` when this client
 *   has no connection (no token set)
 * @property {(ruleset: string, action: string, data: unknown) => Promise<unknown>} relay
 *   any client: run `ruleset`'s `action` handler on the active GM's client (see
 *   logic/relay.js createRelayHub); resolves with the handler's result, rejects with a
 *   BridgeError: `no_gm`, `gm_no_answer`, `gm_unfinished`, `relay_expired`, `no_handler`,
 *   `needs_secure_context` (a sealed action, from a browser without WebCrypto), or the
 *   handler's own code (e.g. the bridge's refusal, `bridge_down`)
 * @property {(action: string, handler: import("./logic/relay.js").RelayHandler, options?: {sealed?: import("./logic/relay.js").RelaySealed}) => void} onRelay
 *   the GM-side handler of this ruleset's `action`; `sender.userId` is Foundry's sender id and
 *   `sender.isGM` comes from Foundry's users. `sealed` (for every sender, or those a function
 *   picks): its answer reaches the requester only encrypted, never in clear on the module socket
 *   (logic/relay.js "Sealed replies"). Throws a TypeError for a bad or taken action.
 * @property {(card: import("./logic/cards.js").BridgeCard, options?: {whisper?: string[], blind?: boolean,
 *   authorId?: string, flags?: object, dice?: import("./logic/dice.js").DiceGroup[], diceUserId?: string}) =>
 *   Promise<{id: string, content: string, whisper: string[], blind: boolean, flags: object}>} postCard
 *   a bridge card as a new ChatMessage; resolves with the message's plain data. Who sees it:
 *   `whisper`, `blind` and, for a self card, `authorId` (the asker, so the GM's browser that posts
 *   it does not read it), as logic/cards.js cardAudience gives them. The reply's dice
 *   ride on it as Rolls (the bridge's `rolls`; `dice`, the ruleset's view of them, only when the
 *   reply had none), so Dice So Nice throws them once, for the card's readers, in the colours of
 *   `diceUserId` (who asked) where Dice So Nice allows it (logic/cards.js cardMessageData). When
 *   the card came in a reply to `request`, the message keeps the decision's event id as
 *   `flags["fate-bridge"].decision` (a GM override names the card's decision by it) and its
 *   `receipt`, when it carried one, as `flags["fate-bridge"].receipt` (logic/receipts.js)
 * @property {(faces: number, count: number) => Promise<number[]>|null} physicalDice on the roller's
 *   client, before the request goes out: null, at once, when the world does not allow physical dice
 *   for this ruleset (the bridge rolls; the request can go out in the same turn), else a Promise of
 *   the `count` d`faces` the roller threw, asked through Foundry's dice fulfillment or a dialog
 *   (foundry.js askPhysicalDice) and checked as the bridge checks them. That Promise rejects with
 *   BridgeError `physical_cancelled` (the dialog was closed) or `bad_message` (field `physical`, a
 *   value its die cannot show): nothing is sent then
 * @property {<T>(physical: number[]|null, send: (physical: number[]|null) => Promise<T>) => Promise<T>} sendWithPhysical
 *   `send(physical)`, and when the bridge answers that the list ran out (a die the ruleset could not
 *   foresee, e.g. a pool's exploding 6) asks the roller for that die and calls `send` again with one
 *   more (logic/dice-trust.js withPhysicalDice): `send` gives each try a new event_id
 * @property {(type: string, listener: (message: object) => void) => void} onBridgeMessage
 *   unsolicited bridge frames of `type` (on the active GM's client, the only one connected)
 * @property {ReturnType<import("./logic/pending.js").createPendingActions>} pending this client's
 *   action buttons waiting for their answer (pending state across re-renders, one request at a time)
 * @property {() => boolean} linked this client holds a bridge connection (the active GM with a
 *   token set), up or not
 * @property {() => boolean} linkReady that connection is up (after `welcome`)
 * @property {() => boolean} linkStopped no connection, or one the bridge stopped for good (token
 *   refused, superseded): requests made now would never be sent (while it is merely down they wait)
 * @property {(listener: () => void) => void} onLinkUp `listener` runs after each `welcome`
 *   (e.g. to send a ruleset's settings)
 * @property {() => string} newEventId a fresh event id for a bridge request
 * @property {() => boolean} isActiveGM this client is the GM's browser that holds the bridge link
 *   (logic/link-holder.js; any GM with the bridge token may be elected): the one that
 *   talks to the bridge and runs relayed actions. The name is older than the election.
 * @property {(key: string, data?: object) => string} localize
 * @property {(level: "info"|"warn"|"error", key: string, data?: object) => void} notify
 */

/**
 * Build one ruleset's api.
 *
 * @param {string} id the ruleset's id
 * @param {object} parts main.js's shared pieces
 * @param {ReturnType<import("./logic/commands.js").createCommandRegistry>} parts.commands
 * @param {ReturnType<import("./logic/relay.js").createRelayHub>} parts.relays
 * @param {ReturnType<import("./logic/bridge-events.js").createBridgeRouter>} parts.router
 * @param {ReturnType<import("./logic/pending.js").createPendingActions>} parts.pending
 * @param {() => ({request(message: object): Promise<object>, isReady(): boolean, isStopped(): boolean} | null)} parts.bridgeLink
 *   the live connection, or null
 * @param {(listener: () => void) => void} parts.onWelcome registers a listener of each `welcome`
 * @param {() => boolean} [parts.isLinkHolder] this client holds the bridge link (main.js's
 *   election); Foundry's active GM when not given
 * @returns {RulesetApi}
 */
export function createRulesetApi(id, { commands, relays, router, pending, bridgeLink, onWelcome, isLinkHolder = fvtt.isActiveGM }) {
  // A reply's event id and receipt go on the ChatMessage posted for its card (logic/receipts.js).
  const records = createCardRecords();
  /** The roller's `count` d`faces` (see RulesetApi.physicalDice), without the "allowed" check. */
  async function throwDice(faces, count) {
    const text = await fvtt.askPhysicalDice(Array(count).fill(faces));
    if (text === null || text === undefined) throw new BridgeError(PHYSICAL_CANCELLED, "the physical dice were not entered; nothing was sent");
    try {
      return parsePhysical(text, Array(count).fill(faces));
    } catch (error) {
      throw new BridgeError("bad_message", error.message, { field: "physical" });
    }
  }
  return Object.freeze({
    fvtt,
    registerCommand: (name, handler) => commands.register(name, handler),
    request(message) {
      if (!isLinkHolder()) {
        return Promise.reject(new BridgeError(NOT_ACTIVE_GM, "only the browser that holds the bridge link talks to the bridge; use api.relay from other clients"));
      }
      const link = bridgeLink();
      if (!link) return Promise.reject(new BridgeError("bridge_down", "this browser has no bridge connection (is the bridge token set?)"));
      return link.request(message).then(records.note);
    },
    relay: (ruleset, action, data) => relays.request(ruleset, action, data),
    onRelay: (action, handler, options) => relays.on(id, action, handler, options),
    async postCard(card, options) {
      return fvtt.messageData(await postCard(fvtt, card, { ...options, flags: records.flags(card, options?.flags) }));
    },
    physicalDice: (faces, count) => (physicalAllowed(fvtt.getSetting(DICE_SETTINGS_SETTING), id) ? throwDice(faces, count) : null),
    sendWithPhysical: (physical, send) => withPhysicalDice(physical, throwDice, send),
    onBridgeMessage: (type, listener) => router.on(type, listener),
    pending,
    linked: () => bridgeLink() !== null,
    linkReady: () => Boolean(bridgeLink()?.isReady()),
    linkStopped: () => bridgeLink()?.isStopped() ?? true,
    onLinkUp: (listener) => onWelcome(listener),
    newEventId: fvtt.randomId,
    isActiveGM: () => isLinkHolder(),
    localize: fvtt.localize,
    notify: fvtt.notify,
  });
}

/**
 * Install each ruleset: check its shape, then call its `install` with its api. A ruleset whose
 * `install` throws is logged and skipped, so one broken ruleset does not take SoHL and the others
 * down (what it registered before throwing stays registered).
 *
 * @param {Array<{id: string, install: Function}>} rulesets the modules of scripts/rulesets/
 * @param {Parameters<typeof createRulesetApi>[1]} parts
 * @returns {string[]} the ids installed
 * @throws {TypeError} for a ruleset without a usable `id` or `install`, or a repeated id
 *   (programming errors: the list is static code)
 */
export function installRulesets(rulesets, parts) {
  const installed = [];
  const seen = new Set();
  for (const ruleset of rulesets) {
    if (typeof ruleset?.id !== "string" || !RULESET_ID.test(ruleset.id)) {
      throw new TypeError(`a ruleset module exports its id as a lower-case word, got ${JSON.stringify(ruleset?.id)}`);
    }
    if (typeof ruleset.install !== "function") throw new TypeError(`ruleset ${ruleset.id} does not export install(api)`);
    if (seen.has(ruleset.id)) throw new TypeError(`ruleset ${ruleset.id} is listed twice`);
    seen.add(ruleset.id);
    try {
      ruleset.install(createRulesetApi(ruleset.id, parts));
      installed.push(ruleset.id);
    } catch (error) {
      console.error(`fate-bridge | ruleset ${ruleset.id} failed to install; it is skipped`, error);
    }
  }
  return installed;
}
