/**
 * fate-bridge wiring: Foundry hooks (through scripts/foundry.js) to the pure logic, for SoHL and
 * every ruleset of scripts/rulesets/. Foundry loads scripts/module.js, which calls `install()`.
 *
 * Roles: every client decorates rendered cards, runs chat commands and relays its users' requests;
 * only the active GM (`game.users.activeGM`) holds the bridge connection, forwards SoHL cards, and
 * runs relayed requests (SoHL's spend and choice, rulesets' actions). A request arriving over the
 * module socket is attributed to Foundry's sender id, never to a user id inside the payload.
 */

import * as fvtt from "./foundry.js";
import { messageBuilders, resolveFateOption } from "./logic/messages.js";
import { BridgeConnection, BridgeError, STATE, DOWN_REASONS, isInsecureRemote } from "./logic/connection.js";
import { createFateFlow, noticeKey, noticeLevel } from "./logic/fate-flow.js";
import { decorateCard } from "./logic/card-ui.js";
import { readSohlCard } from "./logic/sohl-card.js";
import { createRelayHub, RELAY_LIMITS } from "./logic/relay.js";
import { createCommandRegistry } from "./logic/commands.js";
import { createOverlayControls, overlayAction } from "./logic/overlay.js";
import { createBridgeRouter } from "./logic/bridge-events.js";
import { installRulesets } from "./ruleset-api.js";
import { RULESETS } from "./rulesets/index.js";
import { defineAuditWindow } from "./audit-window.js";
import { createClientSeeds, installDiceCommands, newClientSeed, rememberRolls } from "./logic/dice-trust.js";

/** Default bridge address: the bridge on the GM's own machine. */
export const DEFAULT_URL = "ws://127.0.0.1:8765";

/** `fateOption` setting values -> their labels. */
const FATE_OPTION_CHOICES = {
  system: "FATE_BRIDGE.Settings.FateOption.System",
  everyone: "FATE_BRIDGE.Settings.FateOption.Everyone",
  pc_only: "FATE_BRIDGE.Settings.FateOption.PcOnly",
  off: "FATE_BRIDGE.Settings.FateOption.Off",
};

/** SoHL's ruleset id and its relayed actions (run by the active GM's Fate flow). */
const SOHL = "sohl";
const SOHL_ACTIONS = Object.freeze({ SPEND: "spend", CHOICE: "choice" });

/** Socket payload type of a refusal notice from the GM's Fate flow to a user (fate-flow.js `tell`). */
const NOTICE = "notice";

/**
 * Register every hook and install the rulesets. Foundry runs it once (scripts/module.js); tests
 * run it once per fake world.
 *
 * @param {{rulesets?: Array<{id: string, install: Function}>}} [options] the ruleset modules to
 *   install (scripts/rulesets/index.js by default; tests pass their own)
 * @returns {{connection: () => BridgeConnection|null, auditWindow: () => Function|null,
 *   openAudit: () => void, rulesets: () => string[], dispose: () => void}} a view on the live
 *   module (tests, macros): the bridge connection, the audit window class (after `init`), a way to
 *   open the audit window (GMs only), the ids of the rulesets installed, and `dispose` to stop the
 *   connection and drop pending relay deadlines
 * @throws {TypeError} when a ruleset module breaks the contract (see ruleset-api.js installRulesets)
 */
export function install({ rulesets = RULESETS } = {}) {
  const build = messageBuilders(fvtt.randomId);
  const onBridgeChange = () => {
    stopConnection();
    evaluateRole();
  };
  const onFateOptionChange = () => sendSettings();
  let connection = null;
  let flow = null;
  let AuditWindow = null;
  let openWindow = null;
  // Issue 19: every request carries the asking player's own random value (client_seed).
  const seeds = createClientSeeds(() => newClientSeed(fvtt.randomValues));
  const relays = createRelayHub({
    timers: fvtt.timers(),
    newId: fvtt.randomId,
    port: {
      send: (payload) => fvtt.emitSocket(seeds.seedRelayRequest(payload)),
      isActiveGM: fvtt.isActiveGM,
      activeGMOnline: fvtt.activeGMOnline,
      currentUser: () => ({ id: fvtt.currentUserId(), isGM: fvtt.currentUserIsGM() }),
      isGMUser: fvtt.isGMUser,
    },
    onHandlerBug: (error) => console.error("fate-bridge | a relayed request failed", error),
  });
  const commands = createCommandRegistry({
    domParser: fvtt.domParser(),
    onError: (error, name) => {
      console.error(`fate-bridge | /${name} failed`, error);
      fvtt.notify("error", "FATE_BRIDGE.Command.Failed", { command: `/${name}` });
    },
  });
  const router = createBridgeRouter({ onError: (error, type) => console.error(`fate-bridge | a listener for ${type} failed`, error) });

  function sendSettings() {
    if (!connection?.isReady()) return;
    const fateOption = resolveFateOption(fvtt.getSetting("fateOption"), fvtt.sohlFateOption());
    connection.request(build.settings({ fateOption })).catch((error) => console.warn("fate-bridge | settings refused", error));
  }

  function onStatus(status) {
    if (status.state === STATE.CONNECTED) fvtt.notify("info", "FATE_BRIDGE.Status.Connected");
    else if (status.reason === DOWN_REASONS.UNAUTHORIZED) fvtt.notify("error", "FATE_BRIDGE.Status.Unauthorized");
    else if (status.reason === DOWN_REASONS.SUPERSEDED) {
      if (status.holder) fvtt.notify("warn", "FATE_BRIDGE.Status.Superseded", { holder: status.holder });
      else fvtt.notify("warn", "FATE_BRIDGE.Status.SupersededUnknown");
    } else if (status.state === STATE.DOWN && status.retryInMs !== null) {
      console.warn(`fate-bridge | bridge ${status.reason}; retrying in ${status.retryInMs} ms`);
    }
  }

  function startConnection() {
    const url = fvtt.getSetting("bridgeUrl");
    const token = fvtt.getSetting("token");
    if (!token) {
      fvtt.notify("warn", "FATE_BRIDGE.Status.NoToken");
      return;
    }
    if (isInsecureRemote(url)) fvtt.notify("warn", "FATE_BRIDGE.Status.InsecureUrl");
    connection = new BridgeConnection({
      url,
      hello: () => build.hello({ worldId: fvtt.worldId(), token, client: fvtt.clientInfo() }),
      ping: build.ping,
      WebSocket: fvtt.webSocketClass(),
      timers: fvtt.timers(),
      onStatus,
      onWelcome: sendSettings,
      onUnsolicited: router.dispatch,
    });
    // Issue 19: each request gets its player's client_seed; each reply's dice stay with its card
    // (logic/dice-trust.js), so the card's ChatMessage carries them as real Rolls.
    const send = connection.request.bind(connection);
    connection.request = (message) => send(seeds.stampRequest(message)).then(rememberRolls);
    flow = createFateFlow({ foundry: fvtt, connection, build, domParser: fvtt.domParser() });
    connection.start();
  }

  function stopConnection() {
    connection?.stop();
    connection = null;
    flow = null;
  }

  /**
   * Connect when this client becomes the active GM, let go when it no longer is. A connection
   * stopped by the bridge (bad token, superseded) is kept, stopped, until the role or the
   * settings change: reconnecting on its own would fight the browser that took over.
   */
  function evaluateRole() {
    if (fvtt.isActiveGM()) {
      if (!connection) startConnection();
    } else if (connection) {
      stopConnection();
    }
  }

  /** The active GM's Fate flow, for SoHL's relayed actions. */
  function sohlFlow() {
    if (!flow) throw new BridgeError("bridge_down", "this browser has no bridge connection");
    return flow;
  }

  /** A relayed SoHL action's `data` must carry these fields as strings. */
  function sohlData(data, fields) {
    if (!data || typeof data !== "object" || fields.some((field) => typeof data[field] !== "string")) {
      throw new BridgeError("bad_message", `a SoHL request needs ${fields.join(" and ")} as strings`);
    }
    return data;
  }

  // SoHL's clicks share the relay with every ruleset; the flow tells the user about refusals and
  // resolves false then, so the handler's result says whether anything was applied.
  relays.on(SOHL, SOHL_ACTIONS.SPEND, (data, sender) => {
    const { message_id: messageId, point_id: pointId } = sohlData(data, ["message_id", "point_id"]);
    return sohlFlow().requestSpend({ messageId, pointId, userId: sender.userId });
  });
  relays.on(SOHL, SOHL_ACTIONS.CHOICE, (data, sender) => {
    const { message_id: messageId, choice } = sohlData(data, ["message_id", "choice"]);
    return sohlFlow().requestChoice({ messageId, choice, userId: sender.userId });
  });

  /**
   * A SoHL click on this client, run by the active GM (this client or over the socket).
   * `release` re-enables the clicked button(s) whenever nothing was spent.
   */
  function sohlClick(action, data, release) {
    relays.request(SOHL, action, data).then(
      (applied) => {
        if (applied !== true) release();
      },
      (error) => {
        const code = error?.code ?? "internal";
        fvtt.notify(noticeLevel(code), noticeKey(code), { seconds: String(RELAY_LIMITS.ACK_TIMEOUT_MS / 1000) });
        release();
      },
    );
  }

  /** A refusal notice from the GM's Fate flow, addressed to this client. */
  function onNotice(payload, senderId) {
    if (payload.to !== fvtt.currentUserId() || !fvtt.isGMUser(senderId)) return;
    if (typeof payload.key === "string" && payload.key.startsWith("FATE_BRIDGE.")) {
      fvtt.notify(["info", "warn", "error"].includes(payload.level) ? payload.level : "warn", payload.key);
    }
  }

  function onSocketMessage(payload, senderId) {
    if (payload?.type === NOTICE) onNotice(payload, senderId);
    else {
      seeds.rememberRelaySeed(payload, senderId);
      relays.receive(payload, senderId);
    }
  }

  /** Open the audit window (GMs only; reuses an open one). */
  function openAudit() {
    if (!fvtt.currentUserIsGM()) {
      fvtt.notify("warn", "FATE_BRIDGE.Audit.GmOnly");
      return;
    }
    if (!openWindow?.rendered) openWindow = new AuditWindow();
    openWindow.render({ force: true });
  }

  // `/fateaudit` opens the audit window; returning false keeps the text out of the log.
  commands.register("fateaudit", () => {
    openAudit();
    return false;
  });
  // `/fateoverlay [url|clear|replay]`: the GM's stream overlay controls (logic/overlay.js).
  const overlay = createOverlayControls({
    link: () => connection,
    newId: fvtt.randomId,
    bridgeUrl: () => fvtt.getSetting("bridgeUrl"),
    copyText: fvtt.copyText,
    notify: fvtt.notify,
  });
  commands.register("fateoverlay", (args, { isGM }) => {
    if (isGM) return overlay.run(overlayAction(args));
    fvtt.notify("warn", "FATE_BRIDGE.Overlay.GmOnly");
    return false;
  });
  // `/dicesession start [MINUTES]|end`, `/dicesettings`, `/diceoverride`: provable dice and GM overrides (issue 19).
  installDiceCommands({ commands, relays, link: () => connection, foundry: fvtt, newEventId: fvtt.randomId, timers: fvtt.timers() });
  const installed = installRulesets(rulesets, { commands, relays, router, bridgeLink: () => connection });

  fvtt.onceHook("init", () => {
    fvtt.registerWorldSettings({ onBridgeChange, onFateOptionChange }, { fateOptions: FATE_OPTION_CHOICES, defaultUrl: DEFAULT_URL });
    AuditWindow = defineAuditWindow(() => connection);
    fvtt.registerAuditMenu(AuditWindow);
  });
  fvtt.onceHook("setup", () => fvtt.registerTokenSetting({ onBridgeChange }));
  fvtt.onceHook("ready", () => {
    fvtt.onSocket(onSocketMessage);
    evaluateRole();
  });
  fvtt.onHook("userConnected", () => evaluateRole());
  fvtt.onHook("chatMessage", (_chatLog, text) => commands.handle(text, { userId: fvtt.currentUserId(), isGM: fvtt.currentUserIsGM() }));
  fvtt.onHook("createChatMessage", (message) => {
    if (flow && fvtt.isActiveGM()) {
      flow.gradeMessage(message.id).then((result) => {
        if (!result.ok && result.code !== "not_sohl") console.warn(`fate-bridge | message ${message.id} not graded: ${result.code}`);
      });
    }
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
      t: fvtt.localize,
      onSpend: (messageId, pointId, release) => sohlClick(SOHL_ACTIONS.SPEND, { message_id: messageId, point_id: pointId }, release),
      onChoice: (messageId, choice, release) => sohlClick(SOHL_ACTIONS.CHOICE, { message_id: messageId, choice }, release),
    });
  });
  return {
    connection: () => connection,
    auditWindow: () => AuditWindow,
    openAudit,
    rulesets: () => [...installed],
    dispose: () => {
      stopConnection();
      relays.clear();
    },
  };
}
