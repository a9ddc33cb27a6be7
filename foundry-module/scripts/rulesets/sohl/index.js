/**
 * Song of Heroic Lands in Foundry (rules S1-S12, DECISIONS.md; wire in docs/protocol.md "sohl"),
 * installed through the ruleset api like every other ruleset:
 * - the browser that holds the bridge link grades each SoHL test card through the bridge
 *   (`test_rolled`) as it is posted, catches up on the recent ones rolled while no browser held
 *   the link (CATCH_UP), and runs the relayed Spend Fate and Critical Success choice (fate-flow.js);
 * - every client decorates SoHL cards as they render: our Spend Fate in place of SoHL's own,
 *   the choice buttons for those who may answer (card-ui.js);
 * - the world option "Fate" (S12: follow SoHL's `sohl.optionFate`, or everyone / PCs only / off),
 *   sent to the bridge in `settings` after each `welcome` and on change;
 * - in a SoHL world, SoHL's own Fate routes (sheet, card, macro) are closed with a notice saying
 *   where Fate is spent now (routes.js).
 * Foundry is reached through `api.fvtt` only.
 */

import { BridgeError } from "../../logic/errors.js";
import { messageBuilders } from "../../logic/messages.js";
import { RELAY_LIMITS } from "../../logic/relay.js";
import { relayedPhysical } from "../../logic/dice-trust.js";
import { createFateFlow, FLAGS, NOT_ANSWERED, noticeKey, noticeLevel } from "./fate-flow.js";
import { decorateCard } from "./card-ui.js";
import { readSohlCard } from "./card.js";
import { resolveFateOption, sohlMessageBuilders } from "./messages.js";
import { closeSohlFateRoutes, ROUTE_OPEN_KEY } from "./routes.js";

/** The game system whose Fate routes this ruleset closes. */
const SOHL_SYSTEM_ID = "sohl";

export const id = "sohl";

/** Relayed actions, run by the active GM's Fate flow. */
export const ACTIONS = Object.freeze({ SPEND: "spend", CHOICE: "choice" });

/** This module's world setting holding the S12 option, and its values -> labels. */
export const FATE_OPTION_SETTING = "fateOption";
const FATE_OPTION_CHOICES = Object.freeze({
  system: "FATE_BRIDGE.Settings.FateOption.System",
  everyone: "FATE_BRIDGE.Settings.FateOption.Everyone",
  pc_only: "FATE_BRIDGE.Settings.FateOption.PcOnly",
  off: "FATE_BRIDGE.Settings.FateOption.Off",
});

/**
 * Catch-up grading: when the link comes up, the browser holding it grades the tests
 * rolled while no GM's browser held a link (nobody graded them then). It looks at the world's last
 * `limit` chat messages, none older than `maxAgeMs` (a test of an earlier session, days ago, stays
 * ungraded: its moment has passed), by Foundry's server's time of creation and the GM's clock,
 * never a player's (foundry.js recentMessageIds), and sends each SoHL test among them without a `graded` flag
 * once, as its first grading (messages.js firstGradingEventId): if another browser had sent it
 * before leaving, the bridge answers with its stored reply.
 */
export const CATCH_UP = Object.freeze({
  /** A busy session posts a few hundred messages; tests rolled while the GMs were away are the last few dozen. */
  limit: 50,
  /** One session: a test rolled more than 3 hours ago is not caught up. */
  maxAgeMs: 3 * 60 * 60 * 1000,
});

/** A relayed action's `data` must carry these fields as strings. */
function fieldsOf(data, fields) {
  if (!data || typeof data !== "object" || fields.some((field) => typeof data[field] !== "string")) {
    throw new BridgeError("bad_message", `a SoHL request needs ${fields.join(" and ")} as strings`);
  }
  return data;
}

/**
 * @param {import("../../ruleset-api.js").RulesetApi} api
 */
export function install(api) {
  const { fvtt } = api;
  const link = messageBuilders(api.newEventId);
  const flow = createFateFlow({
    foundry: fvtt,
    connection: { isStopped: api.linkStopped, request: api.request },
    build: sohlMessageBuilders(api.newEventId),
    domParser: fvtt.domParser(),
  });

  /** The S12 option to the bridge (active GM, link up). */
  function sendSettings() {
    if (!api.isActiveGM() || !api.linkReady()) return;
    const fateOption = resolveFateOption(fvtt.getSetting(FATE_OPTION_SETTING), fvtt.otherSetting("sohl", "optionFate"));
    api.request(link.settings({ fateOption })).catch((error) => console.warn("fate-bridge | settings refused", error));
  }
  api.onLinkUp(sendSettings);
  fvtt.onceHook("init", () => {
    fvtt.registerChoiceSetting(FATE_OPTION_SETTING, {
      name: "FATE_BRIDGE.Settings.FateOption.Name",
      hint: "FATE_BRIDGE.Settings.FateOption.Hint",
      choices: FATE_OPTION_CHOICES,
      default: "system",
      onChange: sendSettings,
    });
  });

  // No Fate around the bridge: SoHL's own routes end in `fateTest`, replaced before
  // the world's Documents (and SoHL's item logic) are built; a GM is told when one stays open.
  fvtt.onceHook("i18nInit", () => {
    if (fvtt.clientInfo().system_id !== SOHL_SYSTEM_ID) return;
    const { open } = closeSohlFateRoutes({ wrapClassMethod: fvtt.wrapClassMethod, notify: api.notify });
    if (open.length === 0) return;
    console.warn(`fate-bridge | SoHL's Fate stays open on ${open.join(", ")}: no such class or method in this SoHL version`);
    fvtt.onceHook("ready", () => {
      if (fvtt.currentUserIsGM()) api.notify("warn", ROUTE_OPEN_KEY);
    });
  });

  /** The relayed actions run where the bridge link is; a GM browser without one refuses. */
  function linkedFlow() {
    if (!api.linked()) throw new BridgeError("bridge_down", "this browser has no bridge connection");
    return flow;
  }
  // The flow resolves true once the decision is applied and rejects with the refusal's code
  // otherwise: the relay's `done` takes it back to the asking window alone (fate-flow.js).
  api.onRelay(ACTIONS.SPEND, (data, sender) => {
    const { message_id: messageId, point_id: pointId } = fieldsOf(data, ["message_id", "point_id"]);
    return linkedFlow().requestSpend({ messageId, pointId, userId: sender.userId, physical: relayedPhysical(data.physical) });
  });
  api.onRelay(ACTIONS.CHOICE, (data, sender) => {
    const { message_id: messageId, choice } = fieldsOf(data, ["message_id", "choice"]);
    return linkedFlow().requestChoice({ messageId, choice, userId: sender.userId });
  });

  /**
   * A click on this client, run by the active GM (this client or over the socket). `settle` ends
   * the button's pending state (logic/pending.js): done when applied, enabled again otherwise.
   */
  function click(action, data, settle) {
    api.relay(id, action, data).then(
      (applied) => settle(applied === true),
      (error) => {
        const code = error?.code ?? "internal";
        api.notify(noticeLevel(code), noticeKey(code), { seconds: String(RELAY_LIMITS.ACK_TIMEOUT_MS / 1000) });
        settle(false);
      },
    );
  }

  /**
   * Spend Fate: where the world allows physical dice for SoHL, the roller throws the Fate Test's
   * d100 first (on this client, before the click goes out); the bridge grades the Fate Test with it.
   */
  function spend(messageId, pointId, settle) {
    const data = { message_id: messageId, point_id: pointId };
    const thrown = api.physicalDice(100, 1);
    if (thrown === null) {
      click(ACTIONS.SPEND, data, settle);
      return;
    }
    thrown.then((physical) => click(ACTIONS.SPEND, { ...data, physical }, settle), (error) => {
      api.notify("warn", "FATE_BRIDGE.Dice.PhysicalNotSent", { message: String(error?.message ?? error) });
      settle(false);
    });
  }

  /** Message ids this browser sent (or is sending) for their first grading. */
  const gradingSent = new Set();
  /**
   * Grade a message once: not when it carries `graded` already, nor twice from this browser.
   * Resolves when this grading is over (at once when there is nothing to send).
   */
  function gradeOnce(messageId) {
    if (gradingSent.has(messageId) || fvtt.messageData(messageId)?.flags[FLAGS.GRADED] !== undefined) return Promise.resolve();
    gradingSent.add(messageId);
    return flow.gradeMessage(messageId, { first: true }).then((result) => {
      if (result.outsideRefused) console.warn(`fate-bridge | SoHL's own Fate on message ${messageId} not recorded: ${result.outsideRefused}`);
      if (result.ok || result.code === "not_sohl") return;
      // A grading that never got the bridge's answer is tried again at the next link-up; any other
      // outcome (graded, refused by the bridge, not a SoHL test) is final for this browser.
      if (NOT_ANSWERED.includes(result.code)) gradingSent.delete(messageId);
      console.warn(`fate-bridge | message ${messageId} not graded: ${result.code}`);
    });
  }
  fvtt.onHook("createChatMessage", (message) => {
    if (!api.isActiveGM() || !api.linked()) return;
    gradeOnce(message.id);
  });
  // At each link-up, first the reports of SoHL's own Fate that the link lost (a test shows no Spend
  // Fate while its report waits: fate-flow.js), then the tests rolled while no browser held the
  // link, graded once the link is up (CATCH_UP), one after the other in the order they were
  // posted: a repost joins its test by the flags its test's first message gets when graded, and
  // SoHL's own Fate card counts against the test card flagged as offering SoHL's Fate
  // (fate-flow.js), so neither may be graded before the test it follows.
  api.onLinkUp(() => {
    if (!api.isActiveGM()) return;
    (async () => {
      for (const outcome of await flow.resendOutside()) {
        if (!outcome.ok) console.warn(`fate-bridge | SoHL's own Fate on message ${outcome.messageId} not recorded yet: ${outcome.code}`);
      }
      for (const messageId of fvtt.recentMessageIds(CATCH_UP)) await gradeOnce(messageId);
    })();
  });
  fvtt.onHook("renderChatMessageHTML", (message, html) => {
    const data = fvtt.messageData(message.id);
    if (!data) return;
    const read = readSohlCard(data.content, fvtt.domParser());
    const actorUuid = read?.ok ? read.card.actorUuid : null;
    decorateCard({
      root: html,
      message: data,
      viewer: { id: fvtt.currentUserId(), isGM: fvtt.currentUserIsGM(), ownsActor: actorUuid ? fvtt.userOwnsActor(actorUuid) : false },
      t: api.localize,
      onSpend: (messageId, pointId, settle) => spend(messageId, pointId, settle),
      onChoice: (messageId, choice, settle) => click(ACTIONS.CHOICE, { message_id: messageId, choice }, settle),
      pending: api.pending,
    });
  });
}
