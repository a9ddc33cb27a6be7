/**
 * The GM's stream overlay controls, without Foundry: `/fateoverlay [url|clear|replay]` in chat ->
 * `overlay_info` / `overlay_control` to the bridge (docs/protocol.md, Stream overlay;
 * bridge/wire/overlay.py) -> the overlay URL on the clipboard, or the viewers cleared / the last
 * card shown again. Only the active GM's browser holds the bridge link, so only it can act.
 */

import { PROTOCOL_VERSION } from "./messages.js";

/** Message tags of the overlay exchange. */
export const OVERLAY_MSG = Object.freeze({
  INFO: "overlay_info",
  INFO_REPLY: "overlay_info_reply",
  CONTROL: "overlay_control",
  CONTROLLED: "overlay_controlled",
});

/** What `/fateoverlay` can do: copy the URL (the default), clear the overlay, replay the last card. */
export const OVERLAY_ACTIONS = Object.freeze(["url", "clear", "replay"]);

/**
 * @param {string} args what follows `/fateoverlay` (logic/commands.js), e.g. "" or "clear"
 * @returns {string|null} one of OVERLAY_ACTIONS ("" means `url`), or null for anything else
 *   (the controls then show the usage)
 */
export function overlayAction(args) {
  const word = String(args ?? "").trim().toLowerCase() || "url";
  return OVERLAY_ACTIONS.includes(word) ? word : null;
}

/**
 * The overlay page's URL for OBS: the bridge's address with `http(s)` for `ws(s)` (a proxy path
 * such as `/fate-bridge/` is kept), the reply's `path`, and `world` / `key` (and `lang`, the
 * page's language, when given) as query parameters.
 *
 * @param {string} bridgeUrl the module's bridge URL setting, e.g. `ws://127.0.0.1:8765`
 * @param {{world_id: string, viewer_key: string, path: string}} info an `overlay_info_reply`
 * @param {string} [language] Foundry's `game.i18n.lang`, e.g. `de`
 * @returns {string}
 * @throws {TypeError} when `bridgeUrl` is not a URL
 */
export function overlayUrl(bridgeUrl, info, language) {
  const base = new URL(bridgeUrl);
  base.protocol = base.protocol === "wss:" || base.protocol === "https:" ? "https:" : "http:";
  if (!base.pathname.endsWith("/")) base.pathname += "/";
  const url = new URL(info.path, base);
  url.search = new URLSearchParams({ world: info.world_id, key: info.viewer_key, ...(language ? { lang: language } : {}) }).toString();
  return url.href;
}

/**
 * The controls, on injected dependencies.
 *
 * @param {object} deps
 * @param {() => ({isReady(): boolean, request(message: object): Promise<object>} | null)} deps.link
 *   this browser's bridge connection, or null when it holds none
 * @param {() => string} deps.newId a fresh query id
 * @param {() => string} deps.bridgeUrl the bridge URL setting
 * @param {(text: string) => Promise<void>} deps.copyText puts text on the clipboard
 * @param {(level: "info"|"warn"|"error", key: string, data?: object) => void} deps.notify
 * @param {() => string} [deps.language] the page language for the overlay URL (Foundry's `game.i18n.lang`)
 * @returns {{run: (action: string|null) => Promise<boolean>}} `run` resolves true when the
 *   bridge did it, false after telling the GM why not (never rejects)
 */
export function createOverlayControls({ link, newId, bridgeUrl, copyText, notify, language = () => "" }) {
  async function ask(message) {
    const connection = link();
    if (!connection?.isReady()) {
      notify("warn", "FATE_BRIDGE.Overlay.Down");
      return null;
    }
    try {
      return await connection.request(message);
    } catch (error) {
      notify("warn", "FATE_BRIDGE.Overlay.Failed", { code: String(error?.code ?? "internal") });
      return null;
    }
  }

  async function run(action) {
    if (!OVERLAY_ACTIONS.includes(action)) {
      notify("info", "FATE_BRIDGE.Overlay.Usage");
      return false;
    }
    const base = { v: PROTOCOL_VERSION, query_id: newId() };
    if (action === "url") {
      const info = await ask({ type: OVERLAY_MSG.INFO, ...base });
      if (!info) return false;
      await copyText(overlayUrl(bridgeUrl(), info, language()));
      notify("info", "FATE_BRIDGE.Overlay.Copied");
      return true;
    }
    const done = await ask({ type: OVERLAY_MSG.CONTROL, ...base, action });
    if (!done) return false;
    notify("info", action === "clear" ? "FATE_BRIDGE.Overlay.Cleared" : "FATE_BRIDGE.Overlay.Replayed");
    return true;
  }

  return { run };
}
