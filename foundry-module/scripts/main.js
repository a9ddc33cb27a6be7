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
import { createRelayTracker, createRelayInbox, isRequestId, RELAY_LIMITS } from "./logic/relay.js";
import { isAuditCommand } from "./logic/audit.js";
import { defineAuditWindow } from "./audit-window.js";

/** Default bridge address: the bridge on the GM's own machine. */
export const DEFAULT_URL = "ws://127.0.0.1:8765";

/** `fateOption` setting values -> their labels. */
const FATE_OPTION_CHOICES = {
  system: "FATE_BRIDGE.Settings.FateOption.System",
  everyone: "FATE_BRIDGE.Settings.FateOption.Everyone",
  pc_only: "FATE_BRIDGE.Settings.FateOption.PcOnly",
  off: "FATE_BRIDGE.Settings.FateOption.Off",
};

/**
 * Socket payload types between clients. `spend` / `choice` go to the active GM, which answers
 * `ack`; the clicking user's `go` lets it act; `done` and `notice` come back to that user (see
 * logic/relay.js for the exchange and its deadlines).
 */
const SOCKET_TYPES = Object.freeze({
  SPEND: "spend",
  CHOICE: "choice",
  NOTICE: "notice",
  ACK: "ack",
  DONE: "done",
  GO: "go",
});

/**
 * Register every hook. Runs once, when Foundry loads this module (tests load a fresh copy of the
 * module per fake world).
 *
 * @returns {{connection: () => BridgeConnection|null, auditWindow: () => Function|null,
 *   openAudit: () => void, dispose: () => void}} a view on the live module (tests, macros):
 *   the bridge connection, the audit window class (after `init`), a way to open the audit window
 *   (GMs only), and `dispose` to stop the connection and drop pending relay deadlines
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
  let AuditWindow = null;
  let openWindow = null;
  const relays = createRelayTracker({ timers: fvtt.timers(), newId: fvtt.randomId });
  const inbox = createRelayInbox({ timers: fvtt.timers() });

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

  /**
   * A click on this client: act directly as the active GM, else relay to the active GM with a
   * deadline. `release` re-enables the clicked button(s) whenever nothing was spent.
   */
  function relay(type, payload, release) {
    if (fvtt.isActiveGM() && flow) {
      const request = { ...payload, userId: fvtt.currentUserId() };
      const run = type === SOCKET_TYPES.SPEND ? flow.requestSpend(request) : flow.requestChoice(request);
      return run.then((applied) => {
        if (!applied) release();
      });
    }
    if (fvtt.isActiveGM() || !fvtt.activeGMOnline()) {
      release();
      return fvtt.notify("warn", fvtt.isActiveGM() ? noticeKey("bridge_down") : "FATE_BRIDGE.Error.no_gm");
    }
    const requestId = relays.start({
      onNoAnswer: () => fvtt.notify("warn", "FATE_BRIDGE.Error.gm_no_answer", { seconds: String(RELAY_LIMITS.ACK_TIMEOUT_MS / 1000) }),
      onUnfinished: () => fvtt.notify("warn", "FATE_BRIDGE.Error.gm_unfinished"),
      release,
    });
    return fvtt.emitSocket(
      type === SOCKET_TYPES.SPEND
        ? { type, request_id: requestId, message_id: payload.messageId, point_id: payload.pointId }
        : { type, request_id: requestId, message_id: payload.messageId, choice: payload.choice },
    );
  }

  /** Payloads addressed to this client by a GM: notices, acks and results of its relayed clicks. */
  function onReplyToMe(payload, senderId) {
    if (payload.to !== fvtt.currentUserId() || !fvtt.isGMUser(senderId)) return;
    if (payload.type === SOCKET_TYPES.NOTICE) {
      if (typeof payload.key === "string" && payload.key.startsWith("FATE_BRIDGE.")) {
        fvtt.notify(["info", "warn", "error"].includes(payload.level) ? payload.level : "warn", payload.key);
      }
    } else if (payload.type === SOCKET_TYPES.ACK) {
      // Only a click still waiting gets its go: after the deadline the GM never hears back.
      if (relays.ack(payload.request_id)) fvtt.emitSocket({ type: SOCKET_TYPES.GO, request_id: payload.request_id });
    } else if (payload.type === SOCKET_TYPES.DONE) {
      relays.done(payload.request_id, payload.ok === true);
    }
  }

  /**
   * The active GM's side of a relayed click: ack it and hold it until the sender's `go` (a click
   * without `request_id` runs at once). Held clicks are keyed by sender, since every client
   * sees every request id.
   */
  function onRelayedClick(payload, senderId) {
    const isSpend = payload.type === SOCKET_TYPES.SPEND && typeof payload.point_id === "string";
    const isChoice = payload.type === SOCKET_TYPES.CHOICE && typeof payload.choice === "string";
    if (!isSpend && !isChoice) return;
    const requestId = isRequestId(payload.request_id) ? payload.request_id : null;
    const reply = (extra) => requestId && fvtt.emitSocket({ to: senderId, request_id: requestId, ...extra });
    const run = () => {
      if (!flow) {
        fvtt.emitSocket({ type: SOCKET_TYPES.NOTICE, to: senderId, level: "warn", key: noticeKey("bridge_down") });
        reply({ type: SOCKET_TYPES.DONE, ok: false });
        return;
      }
      const request = { messageId: payload.message_id, userId: senderId };
      const decided = isSpend ? flow.requestSpend({ ...request, pointId: payload.point_id }) : flow.requestChoice({ ...request, choice: payload.choice });
      decided.then((applied) => reply({ type: SOCKET_TYPES.DONE, ok: applied }));
    };
    if (!requestId) return run();
    inbox.hold(`${senderId}:${requestId}`, run);
    return reply({ type: SOCKET_TYPES.ACK });
  }

  /** The sender's go for a held click; a go for a click no longer held is answered as expired. */
  function onGo(payload, senderId) {
    if (!isRequestId(payload.request_id) || inbox.go(`${senderId}:${payload.request_id}`)) return;
    fvtt.emitSocket({ type: SOCKET_TYPES.NOTICE, to: senderId, level: "warn", key: "FATE_BRIDGE.Error.relay_expired" });
    fvtt.emitSocket({ type: SOCKET_TYPES.DONE, to: senderId, request_id: payload.request_id, ok: false });
  }

  function onSocketMessage(payload, senderId) {
    if (!payload || typeof payload !== "object") return;
    if ([SOCKET_TYPES.NOTICE, SOCKET_TYPES.ACK, SOCKET_TYPES.DONE].includes(payload.type)) {
      onReplyToMe(payload, senderId);
      return;
    }
    if (!fvtt.isActiveGM()) return;
    if (payload.type === SOCKET_TYPES.GO) onGo(payload, senderId);
    else if (typeof payload.message_id === "string") onRelayedClick(payload, senderId);
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
  // `/fateaudit` in chat opens the audit window; returning false keeps the text out of the log.
  fvtt.onHook("chatMessage", (_chatLog, text) => {
    if (!isAuditCommand(text)) return undefined;
    openAudit();
    return false;
  });
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
      onSpend: (messageId, pointId, release) => relay(SOCKET_TYPES.SPEND, { messageId, pointId }, release),
      onChoice: (messageId, choice, release) => relay(SOCKET_TYPES.CHOICE, { messageId, choice }, release),
    });
  });
  return {
    connection: () => connection,
    auditWindow: () => AuditWindow,
    openAudit,
    dispose: () => {
      stopConnection();
      relays.clear();
      inbox.clear();
    },
  };
}

/** The live module: `bridge.connection()` is the bridge connection or null; see install(). */
export const bridge = install();
