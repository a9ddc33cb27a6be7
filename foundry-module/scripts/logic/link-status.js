/**
 * What the GM sees of the bridge link: a status badge (connected / connecting / refused /
 * superseded / version mismatch) and notices: once per outage when the bridge cannot be reached
 * (naming the URL tried and the likely cause), when the bridge refuses the token (saying why, and
 * asking for the new token, when it closed an open link: a token changed, the world removed) or another
 * browser takes the link, when the bridge speaks another protocol or is another release, and when
 * a request is refused in the browser (too large for the bridge, or the outage queue is full).
 *
 * Pure: fed the BridgeConnection's `onStatus`, `onWelcome` and `onRefused`; it calls `show(view)`
 * after every change and `notify(level, key, data)` for notices (lang/en.json
 * `FATE_BRIDGE.Link.*`). main.js wires it on the active GM's client only.
 *
 * A bridge on the GM's own computer (`ws://127.0.0.1:8765`) seen from a Foundry page served over
 * https from elsewhere (The Forge, a rented server) is not mixed content (loopback is potentially
 * trustworthy: connection.js LOOPBACK_HOST), but Chromium-based browsers (Chrome, Edge, Brave)
 * let a public page reach this device only with the user's permission (Local Network Access;
 * for WebSockets since Chrome 147: developer.chrome.com/blog/local-network-access,
 * developer.chrome.com/docs/modern-web-guidance/guides/security/local-network-access). They
 * ask once: "<site> wants to: Access other apps and services on this device" (Chromium 156's own
 * strings), the site setting is "Apps on device". When such a link fails, the browser's answer
 * to `navigator.permissions.query` tells a block ("denied") from a question not answered yet
 * ("prompt") and from a permission that is not the cause ("granted").
 */

import { STATE, DOWN_REASONS, REFUSED, isLoopbackUrl } from "./connection.js";

/** Badge states (`view.state`), also the suffix of their `FATE_BRIDGE.Link.State.*` label. */
export const LINK = Object.freeze({
  CONNECTED: "connected",
  CONNECTING: "connecting",
  REFUSED: "refused",
  SUPERSEDED: "superseded",
  VERSION_MISMATCH: "version_mismatch",
});

/** Likely causes of an unreachable bridge (`FATE_BRIDGE.Link.Cause.*`). */
export const CAUSE = Object.freeze({
  /** The page is https:// and the address ws:// to another machine: the browser blocks it (mixed content). */
  MIXED_CONTENT: "mixed_content",
  /** The address does not parse as a ws:// or wss:// URL. */
  BAD_URL: "bad_url",
  /** Nothing answered: the bridge is not running there, or the host or port is wrong. */
  NOTHING_THERE: "nothing_there",
  /** Something answered but never sent `welcome`: most likely another service on that port. */
  NOT_THE_BRIDGE: "not_the_bridge",
  /** The bridge closed the link after `welcome` and does not come back. */
  DROPPED: "dropped",
  /** A bridge on this computer, an https page from elsewhere: the browser says the GM blocked this site from it. */
  DEVICE_BLOCKED: "device_blocked",
  /** The same, and the browser's question was not answered yet (or the bridge is not running). */
  DEVICE_ASK: "device_ask",
  /** The same in a browser that does not tell: nothing there, or the browser blocks this page from this computer. */
  DEVICE_MAYBE: "device_maybe",
});

/**
 * Names under which browsers answer `navigator.permissions.query` for a public page reaching
 * this device, most precise first: Chromium's `loopback-network` (Chrome 146+; Firefox's Local
 * Network Access uses the same key), then `local-network-access`, the alias that covers it (Chrome 142+). Chromium 156
 * answers both; a browser that knows neither throws a TypeError (Safari, older Chrome).
 */
export const DEVICE_PERMISSIONS = Object.freeze(["loopback-network", "local-network-access"]);

/** What the browser answered for DEVICE_PERMISSIONS (`null`: it does not say). */
export const PERMISSION = Object.freeze({ GRANTED: "granted", DENIED: "denied", PROMPT: "prompt" });

/**
 * Whether the browser's local-network permission can be why the bridge at `url` is unreachable:
 * the bridge is on this computer, the page is https:// and not itself on this computer (a
 * loopback page reaching loopback is never asked), and the socket never opened.
 *
 * @param {{url: string, pageProtocol: string, pageHost: string, reason: string|null}} args
 *   `pageHost` is the Foundry page's `location.hostname`
 * @returns {boolean}
 */
export function permissionMatters({ url, pageProtocol, pageHost, reason }) {
  return pageProtocol === "https:" && isLoopbackUrl(url) && !isLoopbackUrl(`https://${pageHost}`)
    && (reason === DOWN_REASONS.UNREACHABLE || reason === DOWN_REASONS.ERROR);
}

/**
 * Why the bridge at `url` could not be reached, as far as the browser can tell.
 *
 * @param {{url: string, pageProtocol: string, pageHost?: string, reason: string|null, permission?: string|null}} args
 *   `pageProtocol` is the Foundry page's `location.protocol` (`"https:"`), `pageHost` its
 *   `location.hostname`; `reason` a DOWN_REASONS value; `permission` the browser's answer for
 *   DEVICE_PERMISSIONS (a PERMISSION value, null when it does not say), read when
 *   `permissionMatters`
 * @returns {string} a CAUSE value
 */
export function likelyCause({ url, pageProtocol, pageHost = "", reason, permission = null }) {
  let parsed;
  try {
    parsed = new URL(url);
  } catch {
    return CAUSE.BAD_URL;
  }
  if (parsed.protocol !== "ws:" && parsed.protocol !== "wss:") return CAUSE.BAD_URL;
  if (parsed.protocol === "ws:" && pageProtocol === "https:" && !isLoopbackUrl(url)) return CAUSE.MIXED_CONTENT;
  if (reason === DOWN_REASONS.NO_WELCOME) return CAUSE.NOT_THE_BRIDGE;
  if (reason === DOWN_REASONS.CLOSED || reason === DOWN_REASONS.NO_PONG) return CAUSE.DROPPED;
  if (permissionMatters({ url, pageProtocol, pageHost, reason })) {
    if (permission === PERMISSION.DENIED) return CAUSE.DEVICE_BLOCKED;
    if (permission === PERMISSION.PROMPT) return CAUSE.DEVICE_ASK;
    if (permission !== PERMISSION.GRANTED) return CAUSE.DEVICE_MAYBE;
  }
  return CAUSE.NOTHING_THERE;
}

/**
 * How the bridge's versions differ from the module's, where it matters.
 *
 * @param {{moduleVersion: string, protocolVersion: number, welcome: object}} args
 *   `welcome.protocol_version` (a bridge older than that field speaks its frames' `v`) and
 *   `welcome.bridge_version` ("MAJOR.MINOR.PATCH")
 * @returns {{protocol: boolean, release: boolean, bridgeProtocol: number|null, bridgeVersion: string}}
 *   `protocol`: the bridge speaks another wire protocol (messages may be refused or misread);
 *   `release`: another release line (major differs, or minor while the major is 0, as semver
 *   allows breaking changes there); a patch difference is neither
 */
export function compareVersions({ moduleVersion, protocolVersion, welcome }) {
  const bridgeProtocol = Number.isSafeInteger(welcome?.protocol_version) ? welcome.protocol_version : Number.isSafeInteger(welcome?.v) ? welcome.v : null;
  const bridgeVersion = typeof welcome?.bridge_version === "string" ? welcome.bridge_version : "";
  const line = (version) => {
    const [major = "", minor = ""] = String(version).split(".");
    return major === "0" ? `0.${minor}` : major;
  };
  return {
    protocol: bridgeProtocol !== protocolVersion,
    release: Boolean(bridgeVersion && moduleVersion) && line(bridgeVersion) !== line(moduleVersion),
    bridgeProtocol,
    bridgeVersion,
  };
}

/**
 * @typedef {object} LinkView what the badge shows
 * @property {string} state a LINK value
 * @property {string} url the bridge address tried
 * @property {string} moduleVersion this module's version
 * @property {number} protocolVersion the wire protocol this module speaks
 * @property {number|null} retryInMs the next attempt's delay while connecting after a failure
 * @property {string|null} cause a CAUSE value while the bridge cannot be reached
 * @property {string|null} holder who holds the link (superseded), when the bridge said so
 * @property {string|null} said why the bridge closed an open link (refused), when it said so
 * @property {{protocol: boolean, release: boolean, bridgeProtocol: number|null, bridgeVersion: string}|null} versions
 *   after a `welcome`
 * @property {number} refused requests refused in the browser since the page loaded (queue full, too large)
 */

/**
 * @param {object} deps
 * @param {string} deps.url the bridge address the connection uses
 * @param {string} deps.pageProtocol the Foundry page's `location.protocol`
 * @param {string} [deps.pageHost] the Foundry page's `location.hostname`
 * @param {string} deps.moduleVersion this module's version (module.json)
 * @param {number} deps.protocolVersion the wire protocol this module speaks
 * @param {(level: "info"|"warn"|"error", key: string, data?: object) => void} deps.notify
 * @param {(key: string) => string} deps.localize (a cause's text goes into the notice)
 * @param {(view: LinkView) => void} deps.show draws the badge
 * @param {(names: readonly string[]) => Promise<string|null>} [deps.permissionState] the
 *   browser's answer for the first of `names` it knows (foundry.js permissionState); asked after
 *   each failed attempt where `permissionMatters`, so the outage notice and the badge name the
 *   permission's state as it is then. Without it the browser is taken not to say.
 * @returns {{status(status: import("./connection.js").ConnectionStatus): void, welcome(welcome: object): void,
 *   refused(refusal: {code: string, type: string, bytes: number|null, limit: number|null}): void, view(): LinkView}}
 *   the three connection callbacks, and the current view
 */
export function createLinkStatus({ url, pageProtocol, pageHost = "", moduleVersion, protocolVersion, notify, localize, show, permissionState = async () => null }) {
  /** @type {LinkView} */
  let view = { state: LINK.CONNECTING, url, moduleVersion, protocolVersion, retryInMs: null, cause: null, holder: null, said: null, versions: null, refused: 0 };
  /** True from the first failed attempt until the next `welcome`: one notice per outage. */
  let outageNoticed = false;
  let queueFullNoticed = false;
  /** "bridgeVersion/protocol" of the last version difference told, so a reconnect does not repeat it. */
  let versionsNoticed = null;
  /** Counts status and welcome calls: a permission answer arriving after a newer one changes no badge. */
  let seen = 0;

  const update = (changes) => {
    view = { ...view, ...changes };
    show({ ...view });
  };

  /** A failed attempt that will be retried: the badge's cause, and the outage's one notice. */
  function failed(status) {
    const at = (seen += 1);
    // A link that drops and comes straight back is no news; one that cannot be reached is.
    const tell = !outageNoticed && status.reason !== DOWN_REASONS.CLOSED;
    if (tell) outageNoticed = true;
    const settle = (permission) => {
      const cause = likelyCause({ url, pageProtocol, pageHost, reason: status.reason, permission });
      if (at === seen) update({ state: LINK.CONNECTING, retryInMs: status.retryInMs, cause });
      if (tell) notify("error", "FATE_BRIDGE.Link.Notice.Unreachable", { url, cause: localize(`FATE_BRIDGE.Link.Cause.${cause}`) });
    };
    if (!permissionMatters({ url, pageProtocol, pageHost, reason: status.reason })) {
      settle(null);
      return;
    }
    update({ state: LINK.CONNECTING, retryInMs: status.retryInMs, cause: null });
    permissionState(DEVICE_PERMISSIONS).then(settle, () => settle(null));
  }

  return {
    status(status) {
      if (status.state === STATE.CONNECTED) return; // welcome() follows with the versions
      if (status.reason === DOWN_REASONS.UNAUTHORIZED) {
        seen += 1;
        update({ state: LINK.REFUSED, retryInMs: null, cause: null, said: status.said ?? null });
        if (status.said) notify("error", "FATE_BRIDGE.Link.Notice.RefusedBecause", { url, said: status.said });
        else notify("error", "FATE_BRIDGE.Link.Notice.Refused", { url });
      } else if (status.reason === DOWN_REASONS.SUPERSEDED) {
        seen += 1;
        update({ state: LINK.SUPERSEDED, retryInMs: null, cause: null, holder: status.holder });
        if (status.holder) notify("warn", "FATE_BRIDGE.Status.Superseded", { holder: status.holder });
        else notify("warn", "FATE_BRIDGE.Status.SupersededUnknown");
      } else if (status.state === STATE.DOWN && status.retryInMs !== null) {
        failed(status);
      } else if (status.state === STATE.CONNECTING) {
        seen += 1;
        update({ state: LINK.CONNECTING, retryInMs: null });
      }
    },
    welcome(welcome) {
      seen += 1;
      const versions = compareVersions({ moduleVersion, protocolVersion, welcome });
      update({ state: versions.protocol ? LINK.VERSION_MISMATCH : LINK.CONNECTED, retryInMs: null, cause: null, holder: null, versions });
      notify("info", outageNoticed ? "FATE_BRIDGE.Link.Notice.Back" : "FATE_BRIDGE.Status.Connected", { url });
      // A difference is told once per page for the same pair of versions, not on every reconnect.
      const pair = `${versions.bridgeVersion}/${versions.bridgeProtocol}`;
      if ((versions.protocol || versions.release) && pair !== versionsNoticed) {
        versionsNoticed = pair;
        const data = { module: moduleVersion, bridge: versions.bridgeVersion, moduleProtocol: String(protocolVersion), bridgeProtocol: String(versions.bridgeProtocol ?? "?") };
        if (versions.protocol) notify("error", "FATE_BRIDGE.Link.Notice.Protocol", data);
        else notify("warn", "FATE_BRIDGE.Link.Notice.Release", data);
      }
      outageNoticed = false;
      queueFullNoticed = false;
    },
    refused(refusal) {
      update({ refused: view.refused + 1 });
      if (refusal.code === REFUSED.TOO_LARGE && refusal.limit === null) {
        notify("error", "FATE_BRIDGE.Link.Notice.TooLargeClosed", { type: refusal.type, bytes: String(refusal.bytes) });
      } else if (refusal.code === REFUSED.TOO_LARGE) {
        notify("error", "FATE_BRIDGE.Link.Notice.TooLarge", { type: refusal.type, bytes: String(refusal.bytes), limit: String(refusal.limit) });
      } else if (!queueFullNoticed) {
        queueFullNoticed = true;
        notify("error", "FATE_BRIDGE.Link.Notice.QueueFull", { limit: String(refusal.limit) });
      }
    },
    view: () => ({ ...view }),
  };
}

/**
 * The badge's texts for a view.
 *
 * @param {LinkView} view
 * @param {(key: string, data?: object) => string} t localize (`format` when data is given)
 * @returns {{state: string, label: string, details: string[]}} `label` the badge text, `details`
 *   its tooltip lines: the address, the likely cause, the next attempt, who holds the link (and,
 *   superseded, how to take it back), why the bridge closed it, the versions, requests refused
 */
export function linkBadge(view, t) {
  const details = [t("FATE_BRIDGE.Link.Detail.Url", { url: view.url })];
  if (view.cause) details.push(t(`FATE_BRIDGE.Link.Cause.${view.cause}`));
  if (view.retryInMs !== null) details.push(t("FATE_BRIDGE.Link.Detail.Retry", { seconds: String(Math.ceil(view.retryInMs / 1000)) }));
  if (view.holder) details.push(t("FATE_BRIDGE.Link.Detail.Holder", { holder: view.holder }));
  if (view.said) details.push(t("FATE_BRIDGE.Link.Detail.Said", { said: view.said }));
  if (view.state === LINK.SUPERSEDED) details.push(t("FATE_BRIDGE.Link.Detail.TakeBack"));
  if (view.versions) {
    details.push(t("FATE_BRIDGE.Link.Detail.Versions", {
      module: view.moduleVersion, moduleProtocol: String(view.protocolVersion),
      bridge: view.versions.bridgeVersion, bridgeProtocol: String(view.versions.bridgeProtocol ?? "?"),
    }));
  }
  if (view.refused > 0) details.push(t("FATE_BRIDGE.Link.Detail.Refused", { count: String(view.refused) }));
  return { state: view.state, label: t(`FATE_BRIDGE.Link.State.${view.state}`), details };
}

