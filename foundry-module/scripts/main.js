/**
 * fate-bridge wiring: Foundry hooks (through scripts/foundry.js) to the shared pieces (bridge link,
 * relay, chat commands, overlay, audit window), and every ruleset of scripts/rulesets/ (SoHL
 * included) installed through the ruleset api. Foundry loads scripts/module.js, which calls
 * `install()`. Nothing here is specific to one ruleset.
 *
 * Roles: every client decorates rendered cards, runs chat commands and relays its users' requests;
 * one GM's browser holds the bridge connection and runs relayed requests (each ruleset's actions):
 * the link holder every client elects from the GMs' announcements (logic/link-holder.js: any GM
 * with the bridge token may hold it). A request arriving over the module socket is
 * attributed to Foundry's sender id, never to a user id inside the payload.
 *
 * The bridge token stays in the browser of the GM who entered it (a `client` setting);
 * a GM's browser without it gets it from the link holder's, sealed (logic/token-pairing.js).
 */

import * as fvtt from "./foundry.js";
import { messageBuilders, PROTOCOL_VERSION } from "./logic/messages.js";
import { BridgeConnection, DOWN_REASONS, isInsecureRemote } from "./logic/connection.js";
import { newRequestSecret, registerMessage, startRegistration } from "./logic/registration.js";
import { createLinkStatus, linkBadge } from "./logic/link-status.js";
import { createLinkElection } from "./logic/link-holder.js";
import { createTokenPairing } from "./logic/token-pairing.js";
import { createPendingActions } from "./logic/pending.js";
import { createRelayHub } from "./logic/relay.js";
import { createCommandRegistry } from "./logic/commands.js";
import { createOverlayControls, overlayAction } from "./logic/overlay.js";
import { createBridgeRouter } from "./logic/bridge-events.js";
import { installRulesets } from "./ruleset-api.js";
import { RULESETS } from "./rulesets/index.js";
import { defineAuditWindow } from "./audit-window.js";
import {
  createClientSeeds, DEFAULT_DICE_SETTINGS, DICE_SCHEDULE_SETTING, DICE_SETTINGS_SETTING, installDiceCommands, newClientSeed, rememberRolls,
} from "./logic/dice-trust.js";

/** Default bridge address: the bridge on the GM's own machine. */
export const DEFAULT_URL = "ws://127.0.0.1:8765";

/**
 * Register every hook and install the rulesets. Foundry runs it once (scripts/module.js); tests
 * run it once per fake world.
 *
 * @param {{rulesets?: Array<{id: string, install: Function}>, timers?: {setTimeout: Function, clearTimeout: Function, now?: () => number}}} [options]
 *   the ruleset modules to install (scripts/rulesets/index.js by default; tests pass their own),
 *   and the timers of the bridge connection, the relay and the dice session's schedule (the
 *   platform's by default; tests inject a clock to put the bridge away for 30 s, or reload before
 *   a planned reveal, without waiting them out; `now`, ms since the epoch, Date.now without it)
 * @returns {{connection: () => BridgeConnection|null, auditWindow: () => Function|null,
 *   openAudit: () => void, rulesets: () => string[], relayIdle: () => Promise<void>, pairingIdle: () => Promise<void>,
 *   dispose: () => void}} a view on the live
 *   module (tests, macros): the bridge connection, the audit window class (after `init`), a way to
 *   open the audit window (GMs only), the ids of the rulesets installed, `relayIdle` (the relay's
 *   sealing work is over: logic/relay.js `idle`), `pairingIdle` (the token pairing's WebCrypto work
 *   is over: logic/token-pairing.js `idle`), and `dispose` to stop the
 *   connection and drop pending relay deadlines and token asks
 * @throws {TypeError} when a ruleset module breaks the contract (see ruleset-api.js installRulesets)
 */
export function install({ rulesets = RULESETS, timers = fvtt.timers() } = {}) {
  const build = messageBuilders(fvtt.randomId);
  /** This GM was told once that its browser cannot be given the token (no WebCrypto). */
  let toldNoWebCrypto = false;
  /** `ready` has run (and a token an earlier release kept elsewhere has moved here): settings changes count. */
  let started = false;
  const onBridgeChange = () => {
    if (!started) return;
    pairing.cancel();
    stopConnection();
    stopRegistration();
    election.reset();
    evaluateRole();
  };
  /** The invite code changed: register with the new one (unless a token is set meanwhile). */
  const onInviteChange = () => {
    stopRegistration();
    if (!fvtt.getSetting(fvtt.TOKEN_KEY)) evaluateRole();
  };
  let connection = null;
  /** This GM's registration through an invite code: running, or refused (kept until the code or address changes). */
  let registration = null;
  let AuditWindow = null;
  const welcomeListeners = [];
  let openWindow = null;
  // Every request carries the asking player's own random value (client_seed).
  const seeds = createClientSeeds(() => newClientSeed(fvtt.randomValues));
  // Which GM's browser holds the bridge link; every client agrees (logic/link-holder.js).
  const election = createLinkElection({
    selfId: fvtt.currentUserId,
    selfIsGM: fvtt.currentUserIsGM,
    activeGMIds: fvtt.activeGMIds,
    activeGMId: fvtt.activeGMId,
    hasToken: () => Boolean(fvtt.getSetting(fvtt.TOKEN_KEY)),
    isGMUser: fvtt.isGMUser,
    send: fvtt.emitSocket,
    timers,
    onChange: () => {
      evaluateRole();
      relays.holderChanged();
    },
  });
  /** This client's browser holds the bridge link (replaces Foundry's "active GM" everywhere here). */
  const isLinkHolder = () => election.isHolder();
  // A GM's browser without the token gets it, sealed, from the link holder's (logic/token-pairing.js).
  const pairing = createTokenPairing({
    selfId: fvtt.currentUserId,
    isGMUser: fvtt.isGMUser,
    tokenToGive: () => (isLinkHolder() && connection?.isReady() ? fvtt.getSetting(fvtt.TOKEN_KEY) || null : null),
    send: fvtt.emitSocket,
    crypto: { subtle: fvtt.webCrypto(), randomValues: fvtt.randomValues },
    newId: fvtt.randomId,
    onToken: keepPairedToken,
    onError: (error) => console.warn("fate-bridge | a sealed bridge token could not be made or opened", error),
  });
  const relays = createRelayHub({
    timers,
    newId: fvtt.randomId,
    port: {
      send: (payload) => fvtt.emitSocket(seeds.seedRelayRequest(payload)),
      isLinkHolder,
      linkHolderId: () => election.holderId(),
      currentUser: () => ({ id: fvtt.currentUserId(), isGM: fvtt.currentUserIsGM() }),
      isGMUser: fvtt.isGMUser,
    },
    crypto: { subtle: fvtt.webCrypto(), randomValues: fvtt.randomValues },
    onHandlerBug: (error) => console.error("fate-bridge | a relayed request failed", error),
  });
  const commands = createCommandRegistry({
    domParser: fvtt.domParser(),
    onError: (error, name) => {
      console.error(`fate-bridge | /${name} failed`, error);
      fvtt.notify("error", "FATE_BRIDGE.Command.Failed", { command: `/${name}` });
    },
  });
  // Action buttons waiting for their answer, by key, across re-renders (logic/pending.js).
  const pending = createPendingActions();
  const router = createBridgeRouter({ onError: (error, type) => console.error(`fate-bridge | a listener for ${type} failed`, error) });

  /** After each `welcome`: every ruleset's listener (e.g. SoHL's settings), each on its own. */
  function onWelcome() {
    for (const listener of welcomeListeners) {
      try {
        listener();
      } catch (error) {
        console.error("fate-bridge | a welcome listener failed", error);
      }
    }
  }

  function startConnection() {
    const url = fvtt.getSetting("bridgeUrl");
    const token = fvtt.getSetting(fvtt.TOKEN_KEY);
    if (!token) {
      withoutToken();
      return;
    }
    if (isInsecureRemote(url)) fvtt.notify("warn", "FATE_BRIDGE.Status.InsecureUrl");
    // The GM's view of the link: badge and notices (logic/link-status.js).
    const link = createLinkStatus({
      url,
      pageProtocol: fvtt.pageProtocol(),
      pageHost: fvtt.pageHost(),
      permissionState: fvtt.permissionState,
      moduleVersion: fvtt.moduleVersion(),
      protocolVersion: PROTOCOL_VERSION,
      notify: fvtt.notify,
      localize: fvtt.localize,
      show: (view) => fvtt.showLinkBadge(linkBadge(view, fvtt.localize)),
    });
    connection = new BridgeConnection({
      url,
      hello: () => build.hello({ worldId: fvtt.worldId(), token, client: fvtt.clientInfo() }),
      ping: build.ping,
      WebSocket: fvtt.webSocketClass(),
      timers,
      onStatus: (status) => {
        link.status(status);
        // A token the bridge refused, or a link another browser took: let another GM hold it
        // (after a 4003 only while another GM offers to, logic/link-holder.js).
        if (status.reason === DOWN_REASONS.UNAUTHORIZED) election.withdraw();
        if (status.reason === DOWN_REASONS.SUPERSEDED) election.withdraw({ yielded: true });
        if (status.retryInMs !== null) console.warn(`fate-bridge | bridge ${status.reason}; retrying in ${status.retryInMs} ms`);
      },
      onWelcome: (welcome) => {
        link.welcome(welcome);
        pairing.answer();
        onWelcome();
      },
      onRefused: link.refused,
      onUnsolicited: router.dispatch,
    });
    // Each request gets its player's client_seed; each reply's dice stay with its card
    // (logic/dice-trust.js), so the card's ChatMessage carries them as real Rolls.
    const send = connection.request.bind(connection);
    connection.request = (message) => send(seeds.stampRequest(message)).then(rememberRolls);
    connection.start();
    election.setHolding(true);
  }

  /**
   * This client holds (or would hold) the link but has no token: a GM with an invite code registers
   * the world (logic/registration.js) and keeps the token the bridge gives as a pasted one; anyone
   * else is told to enter a token. A registration the bridge refused is not tried again until the
   * code or the bridge address changes.
   */
  function withoutToken() {
    const inviteCode = fvtt.getSetting(fvtt.INVITE_KEY);
    if (!fvtt.currentUserIsGM() || !inviteCode) {
      fvtt.notify("warn", "FATE_BRIDGE.Status.NoToken");
      return;
    }
    if (registration) return;
    const url = fvtt.getSetting("bridgeUrl");
    if (isInsecureRemote(url)) fvtt.notify("warn", "FATE_BRIDGE.Status.InsecureUrl");
    let requestSecret = fvtt.getSetting(fvtt.REQUEST_SECRET_KEY);
    if (!requestSecret) {
      // kept with the GM's user, so asking again after a reload (or from another browser) collects the token
      requestSecret = newRequestSecret(fvtt.randomValues);
      fvtt.setSetting(fvtt.REQUEST_SECRET_KEY, requestSecret).catch((error) => console.error("fate-bridge | the registration request's secret could not be saved", error));
    }
    let toldWaiting = false;
    registration = startRegistration({
      url,
      WebSocket: fvtt.webSocketClass(),
      timers,
      message: () => registerMessage({ worldId: fvtt.worldId(), inviteCode, requestSecret, client: fvtt.clientInfo() }),
      onToken: keepToken,
      onWaiting: (seconds) => {
        if (!toldWaiting) fvtt.notify("info", "FATE_BRIDGE.Registration.Waiting", { seconds });
        toldWaiting = true;
      },
      onRefused: ({ message }) => fvtt.notify("error", "FATE_BRIDGE.Registration.Refused", { message }),
      onUnreachable: () => fvtt.notify("warn", "FATE_BRIDGE.Registration.Unreachable", { url }),
    });
  }

  /** The token a registration got, kept as a pasted one (its onChange connects); the code and secret are spent. */
  function keepToken(token) {
    registration = null;
    fvtt.setSetting(fvtt.TOKEN_KEY, token).then(
      async () => {
        await fvtt.setSetting(fvtt.INVITE_KEY, "");
        await fvtt.setSetting(fvtt.REQUEST_SECRET_KEY, "");
        fvtt.notify("info", "FATE_BRIDGE.Registration.Done");
      },
      (error) => {
        console.error("fate-bridge | the token the bridge gave could not be saved", error);
        fvtt.notify("error", "FATE_BRIDGE.Registration.NotKept", { token });
      },
    );
  }

  function stopRegistration() {
    registration?.stop();
    registration = null;
  }

  function stopConnection() {
    connection?.stop();
    connection = null;
    fvtt.showLinkBadge(null);
    election.setHolding(false);
  }

  /**
   * Connect when this client is elected to hold the link, let go when it no longer is. A
   * connection stopped by the bridge (bad token, superseded) withdraws this browser from the
   * election and is kept, stopped (its badge says why), until the settings change or, superseded,
   * the GM types `/fatelink` or the GMs it yielded to hand the link over (logic/link-holder.js):
   * reconnecting on its own would fight the browser that took over. Elected again, it replaces
   * that stopped connection with a new one. A GM without a token asks the link holder's browser
   * for it, or, while no GM with one is online, is told to enter it (or registers with an invite
   * code).
   */
  function evaluateRole() {
    if (isLinkHolder()) {
      if (connection?.isStopped()) stopConnection();
      if (!connection) startConnection();
    } else if (connection && !connection.isStopped()) {
      stopConnection();
    } else if (!connection && fvtt.currentUserIsGM() && !fvtt.getSetting(fvtt.TOKEN_KEY)) {
      const holder = election.holderId();
      if (holder === null) withoutToken();
      else if (!pairing.ask(holder) && !toldNoWebCrypto) {
        toldNoWebCrypto = true;
        fvtt.notify("warn", "FATE_BRIDGE.Pairing.NoSecureContext", { name: fvtt.userName(holder) ?? holder });
      }
    }
  }

  /** The token the link holder's browser gave this one: kept as a pasted one (its onChange re-runs the election). */
  function keepPairedToken(token, fromId) {
    if (fvtt.getSetting(fvtt.TOKEN_KEY)) return;
    stopRegistration();
    fvtt.setSetting(fvtt.TOKEN_KEY, token).then(
      () => fvtt.notify("info", "FATE_BRIDGE.Pairing.Received", { name: fvtt.userName(fromId) ?? fromId }),
      (error) => console.error("fate-bridge | the bridge token another GM's browser gave could not be saved", error),
    );
  }

  /**
   * A token an earlier release kept with this GM's user on Foundry's server (`user` scope) moves into
   * this browser (`client` scope) unless this browser has one already, and the server's copy is
   * cleared, once: the first of the GM's browsers to start takes it; the others get it from the
   * link holder. (A token the release before kept in this browser is already where the `client`
   * setting reads it.)
   *
   * @returns {Promise<void>|null} settles once moved; null when there is nothing to move
   */
  function migrateToken() {
    const kept = fvtt.currentUserIsGM() ? fvtt.userScopeToken() : null;
    if (kept === null) return null;
    const moved = fvtt.getSetting(fvtt.TOKEN_KEY) ? Promise.resolve() : fvtt.setSetting(fvtt.TOKEN_KEY, kept);
    return moved
      .then(fvtt.forgetUserScopeToken)
      .catch((error) => console.error("fate-bridge | the bridge token kept with your user could not be moved to this browser", error));
  }

  function onSocketMessage(payload, senderId) {
    if (election.receive(payload, senderId) || pairing.receive(payload, senderId)) return;
    seeds.rememberRelaySeed(payload, senderId);
    relays.receive(payload, senderId);
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
  // `/fatelink`: a GM whose link another browser took (4003) takes it back by hand. The
  // module never does so by itself, so two browsers (or two bridge processes' forwarders of one
  // world) never take it from each other in turn: a person decides. The browser holding it is then
  // closed 4003 in its turn and stops. A GM of this world whose browser holds the link keeps it.
  commands.register("fatelink", (args, { isGM }) => {
    if (!isGM) {
      fvtt.notify("warn", "FATE_BRIDGE.Link.TakeBack.GmOnly");
    } else if (connection && !connection.isStopped()) {
      fvtt.notify("info", "FATE_BRIDGE.Link.TakeBack.HeldHere");
    } else {
      onBridgeChange();
      const holder = election.holderId();
      if (!connection && holder !== null) fvtt.notify("warn", "FATE_BRIDGE.Link.TakeBack.OtherGM", { holder: fvtt.userName(holder) ?? holder });
    }
    return false;
  });
  // `/fateoverlay [url|clear|replay]`: the GM's stream overlay controls (logic/overlay.js).
  const overlay = createOverlayControls({
    link: () => connection,
    newId: fvtt.randomId,
    bridgeUrl: () => fvtt.getSetting("bridgeUrl"),
    copyText: fvtt.copyText,
    notify: fvtt.notify,
    language: fvtt.language,
  });
  commands.register("fateoverlay", (args, { isGM }) => {
    if (isGM) return overlay.run(overlayAction(args));
    fvtt.notify("warn", "FATE_BRIDGE.Overlay.GmOnly");
    return false;
  });
  // `/dicesession start [MINUTES]|end`, `/dicesettings`, `/diceoverride`: provable dice and GM overrides.
  // The world's dice settings and the reveal schedule live in world settings (every client reads
  // the first; the active GM's browser re-arms the second after a reload).
  installDiceCommands({
    commands, relays, link: () => connection, foundry: { ...fvtt, isActiveGM: isLinkHolder }, newEventId: fvtt.randomId,
    timers: { setTimeout: timers.setTimeout, clearTimeout: timers.clearTimeout, now: typeof timers.now === "function" ? timers.now : fvtt.timers().now },
    onWelcome: (listener) => welcomeListeners.push(listener),
  });
  const installed = installRulesets(rulesets, {
    commands, relays, router, pending, bridgeLink: () => connection, onWelcome: (listener) => welcomeListeners.push(listener), isLinkHolder,
  });

  fvtt.onceHook("init", () => {
    fvtt.registerWorldSettings({ onBridgeChange }, { defaultUrl: DEFAULT_URL });
    fvtt.registerHiddenWorldSetting(DICE_SETTINGS_SETTING, DEFAULT_DICE_SETTINGS);
    fvtt.registerHiddenWorldSetting(DICE_SCHEDULE_SETTING, null);
    AuditWindow = defineAuditWindow(() => connection);
    fvtt.registerAuditMenu(AuditWindow);
  });
  fvtt.onceHook("setup", () => {
    fvtt.registerTokenSetting({ onBridgeChange });
    fvtt.registerInviteSettings({ onInviteChange });
  });
  fvtt.onceHook("ready", () => {
    fvtt.onSocket(onSocketMessage);
    const begin = () => {
      started = true;
      election.start();
      evaluateRole();
    };
    // A token being moved is in place before the election starts (no "no token" notice meanwhile).
    const moving = migrateToken();
    if (moving) moving.then(begin);
    else begin();
  });
  fvtt.onHook("userConnected", () => election.usersChanged());
  fvtt.onHook("chatMessage", (_chatLog, text) => commands.handle(text, { userId: fvtt.currentUserId(), isGM: fvtt.currentUserIsGM() }));
  // A card's dice roll in the colours of the user who asked, where Dice So Nice allows it.
  fvtt.installDiceAppearance();
  return {
    connection: () => connection,
    auditWindow: () => AuditWindow,
    openAudit,
    rulesets: () => [...installed],
    relayIdle: () => relays.idle(),
    pairingIdle: () => pairing.idle(),
    dispose: () => {
      stopConnection();
      stopRegistration();
      relays.clear();
      election.dispose();
      pairing.dispose();
    },
  };
}
