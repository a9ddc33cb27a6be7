/**
 * fate-bridge entry point: wires Foundry hooks (through scripts/foundry.js) to the pure logic.
 *
 * Roles: every client decorates rendered cards and relays its users' clicks; only the active GM
 * (`game.users.activeGM`) holds the bridge connection, forwards SoHL cards, and acts on spend and
 * choice requests. A request arriving over the module socket is attributed to Foundry's sender
 * id, never to a user id inside the payload.
 */

import * as fvtt from "./foundry.js";
import { messageBuilders, resolveFateOption } from "./logic/messages.js";
import { BridgeConnection, STATE, DOWN_REASONS, isInsecureRemote } from "./logic/connection.js";
import { createFateFlow, noticeKey } from "./logic/fate-flow.js";
import { decorateCard } from "./logic/card-ui.js";
import { readSohlCard } from "./logic/sohl-card.js";

/** Default bridge address: the bridge on the GM's own machine. */
export const DEFAULT_URL = "ws://127.0.0.1:8765";

/** `fateOption` setting values -> their labels. */
const FATE_OPTION_CHOICES = {
  system: "FATE_BRIDGE.Settings.FateOption.System",
  everyone: "FATE_BRIDGE.Settings.FateOption.Everyone",
  pc_only: "FATE_BRIDGE.Settings.FateOption.PcOnly",
  off: "FATE_BRIDGE.Settings.FateOption.Off",
};

/** Socket payload types between clients. */
const SOCKET_TYPES = Object.freeze({ SPEND: "spend", CHOICE: "choice", NOTICE: "notice" });

/**
 * Register every hook. Runs once, when Foundry loads this module (tests load a fresh copy of the
 * module per fake world).
 *
 * @returns {{connection: () => BridgeConnection|null}} a view on the live connection (tests, macros)
 */
function install() {
  const build = messageBuilders(fvtt.randomId);
  const onBridgeChange = () => {
    stopConnection();
    evaluateRole();
  };
  const onFateOptionChange = () => sendSettings();
  let connection = null;
  let flow = null;

  function sendSettings() {
    if (!connection?.isReady()) return;
    const fateOption = resolveFateOption(fvtt.getSetting("fateOption"), fvtt.sohlFateOption());
    connection.request(build.settings({ fateOption })).catch((error) => console.warn("fate-bridge | settings refused", error));
  }

  function onStatus(status) {
    if (status.state === STATE.CONNECTED) fvtt.notify("info", "FATE_BRIDGE.Status.Connected");
    else if (status.reason === DOWN_REASONS.UNAUTHORIZED) fvtt.notify("error", "FATE_BRIDGE.Status.Unauthorized");
    else if (status.state === STATE.DOWN && status.retryInMs !== null) {
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
    });
    flow = createFateFlow({ foundry: fvtt, connection, build, domParser: fvtt.domParser() });
    connection.start();
  }

  function stopConnection() {
    connection?.stop();
    connection = null;
    flow = null;
  }

  /** Connect when this client is the active GM, let go when it no longer is. */
  function evaluateRole() {
    if (fvtt.isActiveGM()) {
      if (!connection) startConnection();
    } else if (connection) {
      stopConnection();
    }
  }

  /** A click on this client: act directly as the active GM, else relay to the active GM. */
  function relay(type, payload) {
    if (fvtt.isActiveGM() && flow) {
      const request = { ...payload, userId: fvtt.currentUserId() };
      return type === SOCKET_TYPES.SPEND ? flow.requestSpend(request) : flow.requestChoice(request);
    }
    if (fvtt.isActiveGM()) return fvtt.notify("warn", noticeKey("bridge_down"));
    if (!fvtt.activeGMOnline()) return fvtt.notify("warn", "FATE_BRIDGE.Error.no_gm");
    return fvtt.emitSocket(
      type === SOCKET_TYPES.SPEND
        ? { type, message_id: payload.messageId, point_id: payload.pointId }
        : { type, message_id: payload.messageId, choice: payload.choice },
    );
  }

  function onSocketMessage(payload, senderId) {
    if (!payload || typeof payload !== "object") return;
    if (payload.type === SOCKET_TYPES.NOTICE) {
      const forMe = payload.to === fvtt.currentUserId() && fvtt.isGMUser(senderId);
      if (forMe && typeof payload.key === "string" && payload.key.startsWith("FATE_BRIDGE.")) {
        fvtt.notify(["info", "warn", "error"].includes(payload.level) ? payload.level : "warn", payload.key);
      }
      return;
    }
    if (!fvtt.isActiveGM() || typeof payload.message_id !== "string") return;
    if (!flow) {
      fvtt.emitSocket({ type: SOCKET_TYPES.NOTICE, to: senderId, level: "warn", key: noticeKey("bridge_down") });
      return;
    }
    if (payload.type === SOCKET_TYPES.SPEND && typeof payload.point_id === "string") {
      flow.requestSpend({ messageId: payload.message_id, pointId: payload.point_id, userId: senderId });
    } else if (payload.type === SOCKET_TYPES.CHOICE && typeof payload.choice === "string") {
      flow.requestChoice({ messageId: payload.message_id, choice: payload.choice, userId: senderId });
    }
  }

  fvtt.onceHook("init", () => {
    fvtt.registerWorldSettings({ onBridgeChange, onFateOptionChange }, { fateOptions: FATE_OPTION_CHOICES, defaultUrl: DEFAULT_URL });
  });
  fvtt.onceHook("setup", () => fvtt.registerTokenSetting({ onBridgeChange }));
  fvtt.onceHook("ready", () => {
    fvtt.onSocket(onSocketMessage);
    evaluateRole();
  });
  fvtt.onHook("userConnected", () => evaluateRole());
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
      onSpend: (messageId, pointId) => relay(SOCKET_TYPES.SPEND, { messageId, pointId }),
      onChoice: (messageId, choice) => relay(SOCKET_TYPES.CHOICE, { messageId, choice }),
    });
  });
  return { connection: () => connection };
}

/** The live module: `bridge.connection()` is the bridge connection or null (for macros and tests). */
export const bridge = install();
