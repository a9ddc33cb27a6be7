/**
 * The pool ruleset in Foundry (seed 004, docs/rules.md P1-P16; wire in docs/protocol.md "pool"):
 * the `/pool` chat command (checks, saves, a player's own Fate, the GM's ledger panel), a
 * "Reroll with Fate" button on chat messages carrying a player character's d20 roll and on the
 * bridge's save/reroll cards, and the GM's ledger panel. The game has no Foundry system: the
 * bridge keeps the ledger; this file only asks and posts the cards.
 *
 * Every request runs on the active GM's client through `api.relay`, attributed to Foundry's
 * sender id; the GM side re-parses the typed text itself, so a client cannot slip other fields in.
 * A check's, save's or reroll's card is seen per the roll mode typed, else the asker's own
 * (logic/cards.js cardAudience); the request carries that visibility, so the bridge sends a public
 * result to the stream overlay. A reroll's is the rolled message's (visibilityOfMessage).
 * Foundry is reached through `api.fvtt` only; the hook's ChatMessage is read by `fvtt.messageRolls`.
 * Physical dice (where the world allows them for `pool`): the roller throws the dice
 * rolls.js foreseenDice names before the request goes out, then each further die the bridge asks for.
 */

import { BridgeError } from "../../logic/errors.js";
import { cardAudience, checkedVisibility, visibilityOfMessage } from "../../logic/cards.js";
import { RELAY_LIMITS } from "../../logic/relay.js";
import { fateSummary, parsePoolCommand, pickCharacter, rollMessage } from "./command.js";
import { d20Snapshot, foreseenDice, poolDice, rerollMessage } from "./rolls.js";
import { relayedPhysical, withPhysical } from "../../logic/dice-trust.js";
import { decoratePoolMessage, PANEL_CLASS, renderLedgerPanel } from "./ui.js";

export const id = "pool";

/** Relayed actions, run on the active GM's client. */
export const ACTIONS = Object.freeze({ ROLL: "roll", LEDGER: "ledger", REROLL: "reroll", GM: "gm" });
/** Flag on a bridge save or reroll card: its `roll_id`, so a reroll of it reaches the same readers. */
const ROLL_FLAG = "pool_roll_id";
/** Why a command found no character (lang `FATE_BRIDGE.Pool.Pick.<code>`). */
const PICK_ERRORS = Object.freeze(["no_character", "several_characters", "unknown_character", "tier_mismatch"]);
/** Relay and link failures with a notice of their own (lang `FATE_BRIDGE.Error.<code>`). */
const LINK_ERRORS = Object.freeze(["no_gm", "gm_no_answer", "gm_unfinished", "relay_expired", "no_handler", "needs_secure_context", "bridge_down", "timeout"]);
/** The panel's GM actions -> the bridge message type and the fields each takes from the panel. */
const GM_MESSAGES = Object.freeze({
  session_start: { type: "pool_session_start", fields: [] },
  session_end: { type: "pool_session_end", fields: [] },
  rest: { type: "pool_rest", fields: [] },
  award: { type: "pool_award", fields: ["character_ids"] },
  level_gained: { type: "pool_level_gained", fields: ["character_id"] },
  stamina: { type: "pool_set_stamina", fields: ["character_id", "stamina"] },
  character: { type: "pool_character", fields: ["character_id", "name", "kind", "level", "stamina"] },
});

/**
 * @param {import("../../ruleset-api.js").RulesetApi} api
 */
export function install(api) {
  const { fvtt } = api;
  const sender = (who) => ({ userId: who.userId, isGM: who.isGM, userName: fvtt.userName(who.userId) });
  /** Who sees a card of `visibility` asked by `who` (Foundry's roll modes, every GM). */
  const audience = (visibility, who) => cardAudience({ visibility, askerId: who.userId, gmIds: fvtt.gmUserIds() });

  /** The reply's card (flagged with its roll id), its dice on it (Dice So Nice throws them once, as `who`, for its readers). */
  async function postWithDice(reply, seen, who) {
    const flags = typeof reply.roll_id === "string" ? { [ROLL_FLAG]: reply.roll_id } : {};
    await api.postCard(reply.card, { ...seen, flags, dice: poolDice(reply), diceUserId: who.userId });
  }

  /**
   * The message showing the roll `rollId` names: the chat message of a d20 roll (its id is the
   * roll id), or the card of a bridge save or reroll (flag ROLL_FLAG); null when neither is in
   * the chat log.
   */
  function rolledMessage(rollId) {
    const messageId = fvtt.messageData(rollId) ? rollId : fvtt.messageIdsWithFlag(ROLL_FLAG, rollId).at(-1);
    return messageId ? fvtt.messageData(messageId) : null;
  }

  /** GM side: the ledger entries `who` may see, and whether a session is open. */
  async function ledgerFor(who) {
    const reply = await api.request({ type: "pool_ledger_query", v: 1, event_id: api.newEventId(), user_id: who.userId, user_is_gm: who.isGM });
    return { session_open: reply.session_open, characters: reply.characters };
  }

  api.onRelay(ACTIONS.ROLL, async (data, who) => {
    // The asker's roll mode comes with the text; a mode typed in the text wins.
    const command = parsePoolCommand(typeof data?.args === "string" ? data.args : "", { visibility: checkedVisibility(data?.visibility) });
    if (!command.ok || (command.command !== "check" && command.command !== "save")) {
      throw new BridgeError("bad_message", "not a /pool check or save");
    }
    const picked = pickCharacter((await ledgerFor(who)).characters, command);
    // The relay carries code and message only: the message is the detail the notice shows.
    if (!picked.ok) throw new BridgeError(picked.error, picked.error === "tier_mismatch" ? `${picked.name}, Tier ${picked.tier}` : picked.name ?? "");
    const physical = relayedPhysical(data.physical);
    const reply = await api.request(withPhysical(rollMessage(command, picked.entry, sender(who), api.newEventId()), physical));
    await postWithDice(reply, audience(command.visibility, who), who);
    return true;
  });
  // A GM's ledger holds every character (GM-only entries): sealed to the asker. A
  // player's holds only their own characters, so a browser that cannot take a sealed answer
  // (no WebCrypto: Foundry not on HTTPS or localhost) still gets its own Fate in clear.
  api.onRelay(ACTIONS.LEDGER, (_data, who) => ledgerFor(who), { sealed: (who) => who.isGM });
  api.onRelay(ACTIONS.REROLL, async (data, who) => {
    if (typeof data?.roll_id !== "string") throw new BridgeError("bad_message", "a reroll needs roll_id");
    const physical = relayedPhysical(data.physical);
    // A reroll is seen by whoever saw the roll (the message's whisper/blind); the
    // clicker's roll mode only when that message is gone. The bridge is told the same.
    const rolled = rolledMessage(data.roll_id);
    const visibility = rolled ? visibilityOfMessage(rolled) : checkedVisibility(data.visibility);
    const request = rerollMessage({ rollId: data.roll_id, roll: data.roll ?? null, visibility }, sender(who), api.newEventId());
    const reply = await api.request(withPhysical(request, physical));
    await postWithDice(reply, rolled ? cardAudience({ sameAs: rolled }) : audience(visibility, who), who);
    return true;
  });
  api.onRelay(ACTIONS.GM, async (data, who) => {
    const spec = GM_MESSAGES[data?.action];
    if (!spec) throw new BridgeError("bad_message", "unknown ledger action");
    if (!who.isGM) throw new BridgeError("forbidden", "only a GM may change the Fate ledger");
    const fields = Object.fromEntries(spec.fields.map((field) => [field, data[field]]));
    if (spec.type === "pool_character") {
      fields.owner_user_ids = fvtt.actorSnapshot(`Actor.${data.character_id}`)?.ownerUserIds ?? [];
    }
    const reply = await api.request({ ...fields, type: spec.type, v: 1, event_id: api.newEventId(), user_id: who.userId, user_is_gm: who.isGM });
    if (reply.card) await api.postCard(reply.card);
    return true;
  });

  /** A refusal or failure, told to this client's user. */
  function tell(error) {
    const code = error?.code ?? "internal";
    if (PICK_ERRORS.includes(code)) api.notify("warn", `FATE_BRIDGE.Pool.Pick.${code}`, { detail: String(error.message ?? "") });
    else if (LINK_ERRORS.includes(code)) api.notify("warn", `FATE_BRIDGE.Error.${code}`, { seconds: String(RELAY_LIMITS.ACK_TIMEOUT_MS / 1000) });
    else api.notify("warn", "FATE_BRIDGE.Pool.Refused", { message: String(error?.message ?? code) });
  }

  /**
   * Relay a roll (`action` with `data`) with the roller's physical dice where the world allows them:
   * the dice foreseen first, then each die the bridge names (every try a new request, with a new
   * event_id on the GM's browser).
   */
  function relayRoll(action, data, foreseen) {
    const send = (thrown) => api.relay(id, action, thrown ? { ...data, physical: thrown } : data);
    const thrown = api.physicalDice(foreseen.faces, foreseen.count);
    return thrown === null ? send(null) : thrown.then((physical) => api.sendWithPhysical(physical, send));
  }

  let panel = null;
  api.registerCommand("pool", (args, who) => {
    const visibility = fvtt.rollMode();
    const command = parsePoolCommand(args, { visibility });
    if (!command.ok) {
      api.notify("warn", `FATE_BRIDGE.Pool.Parse.${command.error}`, { token: command.token });
      return false;
    }
    switch (command.command) {
      case "help":
        api.notify("info", "FATE_BRIDGE.Pool.Usage");
        return false;
      case "ledger":
        if (!who.isGM) api.notify("warn", "FATE_BRIDGE.Pool.GmOnly");
        else (panel ??= createPanel(api, tell)).open();
        return false;
      case "fate":
        return api.relay(id, ACTIONS.LEDGER, {}).then(({ characters }) => api.notify("info", "FATE_BRIDGE.Pool.YourFate", { lines: fateSummary(characters, api.localize) }), tell);
      default:
        return relayRoll(ACTIONS.ROLL, { args, visibility }, foreseenDice(command)).catch(tell);
    }
  });

  fvtt.onHook("renderChatMessageHTML", (message, html) => {
    const plain = fvtt.messageRolls(message);
    // Foundry's stub of a private roll gets no reroll button: its reader does not see the d20.
    if (!plain || !plain.contentVisible) return;
    const snapshot = d20Snapshot(plain);
    const hasBridgeButton = Boolean(html.querySelector?.("[data-fate-bridge-pool-reroll]"));
    if (!snapshot && !hasBridgeButton) return;
    const actorUuid = plain.speakerActorId ? `Actor.${plain.speakerActorId}` : null;
    decoratePoolMessage({
      root: html,
      message: { id: plain.id, snapshot },
      viewer: {
        isGM: fvtt.currentUserIsGM(),
        ownsActor: actorUuid ? fvtt.userOwnsActor(actorUuid) : false,
        actorHasPlayerOwner: Boolean(actorUuid && fvtt.actorSnapshot(actorUuid)?.hasPlayerOwner),
      },
      t: api.localize,
      onReroll: (rollId, roll, settle) => {
        relayRoll(ACTIONS.REROLL, { roll_id: rollId, roll, visibility: fvtt.rollMode() }, foreseenDice({ command: "reroll", roll })).then(
          (done) => settle(done === true),
          (error) => { tell(error); settle(); },
        );
      },
      pending: api.pending,
    });
  });
}

/**
 * The GM's ledger panel: an ApplicationV2 around ui.js renderLedgerPanel. Each action
 * is relayed to the active GM's client, then the panel reads the ledger again.
 *
 * @returns {{open(): Promise<void>}} `open` reads the ledger and shows the panel
 */
function createPanel(api, tell) {
  const { fvtt } = api;
  const state = { entries: [], sessionOpen: false, error: null };
  const Base = fvtt.applicationV2Base();

  class PoolLedgerPanel extends Base {
    static DEFAULT_OPTIONS = {
      id: "fate-bridge-pool-ledger",
      classes: [PANEL_CLASS],
      window: { title: "FATE_BRIDGE.Pool.Panel.Title", icon: "fa-solid fa-book", resizable: true },
      position: { width: 640, height: "auto" },
    };

    async _renderHTML() {
      return renderLedgerPanel(fvtt.htmlDocument(), { ...state, actors: fvtt.worldActors() }, api.localize, (action, data) => {
        run(action === "refresh" ? null : { ...data, action });
      });
    }

    _replaceHTML(result, content) {
      content.replaceChildren(result);
    }
  }

  const panelWindow = new PoolLedgerPanel();
  async function refresh() {
    try {
      const ledger = await api.relay(id, ACTIONS.LEDGER, {});
      Object.assign(state, { entries: ledger.characters, sessionOpen: ledger.session_open, error: null });
    } catch (error) {
      state.error = String(error?.message ?? error?.code);
    }
    await panelWindow.render({ force: true });
  }
  async function run(request) {
    if (request) {
      try {
        await api.relay(id, ACTIONS.GM, request);
      } catch (error) {
        tell(error);
      }
    }
    await refresh();
  }
  return { open: refresh };
}
