/**
 * fate-bridge stream overlay: the page OBS shows as a browser source (`GET /overlay`, served by
 * the bridge with this file; no build step, no outside resources).
 *
 * It connects to the bridge that served it (`ws(s)://` + the page's folder), says
 * `hello {world_id, viewer_key}`, then shows each `overlay_card` it is sent: the card slides in,
 * stays `seconds`, and leaves; `overlay_clear` takes every card off screen. It sends nothing but
 * `hello` and `ping`, and reconnects by itself with backoff.
 *
 * Query parameters (see readOptions): `world` and `key` (required: the overlay URL the GM copies
 * from the module has them), `lang` (read by the bridge: the page's language, the world's), `position` (bottom-right), `max` cards at once (3), `seconds` on
 * screen (12), `scale` (1), `theme` dark|light (dark), `chroma` a background colour for a chroma
 * key (hex like `00ff00`, or green|blue|magenta; default transparent).
 *
 * Text safety: a card's `html` comes from the bridge with every outside string escaped; the
 * actor's name and every status line are set as text. The page's Content-Security-Policy lets no
 * other script run.
 */

/** Where the cards stack. */
export const POSITIONS = Object.freeze(["bottom-right", "bottom-left", "top-right", "top-left", "bottom", "top"]);
/** Colour schemes of the cards. */
export const THEMES = Object.freeze(["dark", "light"]);
/** Named chroma-key colours; any other value must be hex (`0f0`, `00ff00`, with or without `#`). */
export const CHROMA_NAMES = Object.freeze({ green: "#00ff00", blue: "#0000ff", magenta: "#ff00ff" });

/** Bounds and defaults of the numeric options, with their reasons. */
export const OPTION_LIMITS = Object.freeze({
  /** More than 10 cards covers the game; 1 shows only the newest. */
  max: { min: 1, max: 10, fallback: 3 },
  /** Under 2 s nobody reads a card; 10 minutes is "until the next one". */
  seconds: { min: 2, max: 600, fallback: 12 },
  /** 0.5 for a 720p canvas, up to 3 for 4K. */
  scale: { min: 0.5, max: 3, fallback: 1 },
});

/** The link's timings, with their reasons (the same as the Foundry module's). */
export const LINK = Object.freeze({
  /** Keeps proxies (nginx `proxy_read_timeout 120s`) from closing an idle overlay. */
  HEARTBEAT_MS: 20_000,
  /** A `pong` later than this means the link is dead even if TCP has not noticed. */
  PONG_TIMEOUT_MS: 10_000,
  /** Reconnect backoff: 1 s, doubled each failure, capped at 30 s (also after a refused key). */
  BACKOFF_MIN_MS: 1_000,
  BACKOFF_MAX_MS: 30_000,
  /**
   * After 1012 (service restart: the bridge process is draining) on a welcomed link,
   * reconnect after a random 0..RESTART_JITTER_MS (the load balancer sends it to another process)
   * instead of the backoff, as the Foundry module does.
   */
  RESTART_JITTER_MS: 500,
});

/** How long a card takes to slide in or out (the style sheet reads it as `--fb-animation-ms`). */
export const ANIMATION_MS = 450;

/** Close code of a refused `hello` (bridge/session.py CLOSE_UNAUTHORIZED). */
export const CLOSE_UNAUTHORIZED = 4001;
/** The bridge closes its links with this while it drains (SIGTERM): reconnect at once, elsewhere. */
export const CLOSE_SERVICE_RESTART = 1012;

/** Link states, put on `<body data-link>` for styling and tests. */
export const LINK_STATE = Object.freeze({ CONNECTING: "connecting", CONNECTED: "connected", DOWN: "down", REFUSED: "refused" });

/**
 * The status lines the page shows (as text) when it cannot work, in the page's language: the
 * bridge writes them into the status element's `data-missing` / `data-refused` attributes from its
 * message catalogs (bridge/overlay/index.html, `?lang=`).
 *
 * @param {HTMLElement} status the `#status` element
 * @returns {{missing: string, refused: string}}
 */
export function statusText(status) {
  return { missing: status.dataset.missing ?? "", refused: status.dataset.refused ?? "" };
}

/**
 * The overlay's options from the page's query string; out-of-range or unknown values fall back
 * to the defaults.
 *
 * @param {string} search `location.search`, e.g. `?world=w&key=k&position=top-left&max=2`
 * @returns {{world: string, key: string, position: string, max: number, seconds: number,
 *   scale: number, theme: string, chroma: string|null}} `world`/`key` are "" when missing;
 *   `chroma` is a `#rrggbb` / `#rgb` colour or null (transparent)
 */
export function readOptions(search) {
  const params = new URLSearchParams(search);
  const number = (name) => {
    const { min, max, fallback } = OPTION_LIMITS[name];
    const raw = params.get(name);
    const value = raw === null || raw.trim() === "" ? NaN : Number(raw);
    return Number.isFinite(value) && value >= min && value <= max ? value : fallback;
  };
  const oneOf = (name, allowed) => (allowed.includes(params.get(name)) ? params.get(name) : allowed[0]);
  return {
    world: params.get("world") ?? "",
    key: params.get("key") ?? "",
    position: oneOf("position", POSITIONS),
    max: Math.floor(number("max")),
    seconds: number("seconds"),
    scale: number("scale"),
    theme: oneOf("theme", THEMES),
    chroma: chromaColour(params.get("chroma")),
  };
}

/**
 * @param {string|null} value a `chroma` parameter
 * @returns {string|null} the CSS colour, or null for none / not a colour we accept
 */
export function chromaColour(value) {
  if (!value) return null;
  const name = value.toLowerCase();
  if (Object.hasOwn(CHROMA_NAMES, name)) return CHROMA_NAMES[name];
  const hex = /^#?([0-9a-f]{3}|[0-9a-f]{6})$/i.exec(value);
  return hex ? `#${hex[1].toLowerCase()}` : null;
}

/**
 * The bridge's WebSocket address for the page at `pageHref`: same host, the page's folder
 * (`http://h:8765/overlay` -> `ws://h:8765/`; behind a proxy,
 * `https://x/fate-bridge/overlay` -> `wss://x/fate-bridge/`).
 *
 * @param {string} pageHref `location.href`
 * @returns {string}
 */
export function bridgeSocketUrl(pageHref) {
  const url = new URL(".", pageHref);
  url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
  url.search = "";
  url.hash = "";
  return url.href;
}

/** The smallest a card's text is scaled to make a tall card fit the screen (of its size at `scale`). */
export const MIN_FIT_SCALE = 0.5;

/**
 * The text scale that makes a card `height` px tall fit `available` px: 1 when it fits, else the
 * ratio (a hair under it, as text rewraps), never below MIN_FIT_SCALE.
 *
 * @param {number} height the card's height at `current` scale, px
 * @param {number} available the stack's height, px
 * @param {number} [current] the scale the card was measured at
 * @returns {number}
 */
export function fitScale(height, available, current = 1) {
  if (height <= available || height <= 0) return current;
  return Math.max(MIN_FIT_SCALE, current * (available / height) * 0.98);
}

/**
 * How many of the oldest cards to take off so the others, `gap` px apart, fit `available` px:
 * a whole card goes, never a part of one, and never the newest.
 *
 * @param {number[]} heights the cards' heights, oldest first, px
 * @param {number} available the stack's height, px
 * @param {number} gap px between two cards
 * @returns {number}
 */
export function cardsToDrop(heights, available, gap) {
  let total = heights.reduce((sum, height) => sum + height, 0) + gap * Math.max(0, heights.length - 1);
  let drop = 0;
  while (total > available && drop < heights.length - 1) {
    total -= heights[drop] + gap;
    drop += 1;
  }
  return drop;
}

/**
 * A card's glyphs the screen cannot draw, replaced by their text: every element of `body` with a
 * `data-glyph-text` (a ruleset's card marks a symbol so, e.g. an hmtw suit mark) whose text
 * `canDraw` says no font draws gets that text instead (empty: the mark is hidden) and the class
 * `glyph-as-text`; its glyph is kept in `data-glyph`.
 *
 * @param {ParentNode} body a card's body
 * @param {(text: string) => boolean} canDraw whether the page's fonts draw `text` (glyphChecker)
 */
export function glyphFallbacks(body, canDraw) {
  for (const mark of body.querySelectorAll("[data-glyph-text]")) {
    const glyph = mark.textContent.trim();
    if (!glyph || canDraw(glyph)) continue;
    mark.dataset.glyph = glyph;
    mark.textContent = mark.dataset.glyphText;
    mark.classList.add("glyph-as-text");
  }
}

/** A code point no font draws (plane 16 private use): what a missing glyph looks like. */
const NEVER_DRAWN = "\u{10FFFD}";

/**
 * Whether the page's fonts draw a glyph, by drawing it on a canvas in the body's font: a glyph no
 * font has comes out as the font's "missing" box (as NEVER_DRAWN does) or as nothing. Chromium
 * falls back through every installed font before it draws that box, so a glyph any font has
 * passes (an emoji font's included). Answers are cached per text.
 *
 * @param {Document} document
 * @param {string} fontFamily the body's computed font-family
 * @returns {(text: string) => boolean}
 */
export function glyphChecker(document, fontFamily) {
  const size = 32;
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = size;
  const context = canvas.getContext("2d", { willReadFrequently: true });
  if (!context) return () => true; // nothing to measure with: keep the glyphs
  const pixels = (text) => {
    context.clearRect(0, 0, size, size);
    context.font = `${size * 0.75}px ${fontFamily}`;
    context.textBaseline = "top";
    context.fillStyle = "#000";
    context.fillText(text, 0, 0);
    return context.getImageData(0, 0, size, size).data.join(",");
  };
  const missing = pixels(NEVER_DRAWN);
  const blank = pixels("");
  const known = new Map();
  return (text) => {
    if (!known.has(text)) {
      const drawn = pixels(text);
      known.set(text, drawn !== missing && drawn !== blank);
    }
    return known.get(text);
  };
}

/**
 * The card stack: shows, replaces and retires cards in `root`. With `layout` (a browser page: the
 * stack's height and gap in px), every card fits the screen whole: a card taller than the stack
 * has its text scaled down (fitScale; its free texts are also clamped to a few lines by the style
 * sheet), and when the cards together are taller the oldest are taken off at once (cardsToDrop),
 * so no card is ever cut mid-line at the screen's edge, whatever `max` says.
 *
 * @param {{root: HTMLElement, document: Document, options: ReturnType<typeof readOptions>,
 *   timers: {setTimeout: Function, clearTimeout: Function},
 *   layout?: {available: () => number, gap: () => number},
 *   canDraw?: (text: string) => boolean}} deps `canDraw`: whether the page draws a glyph
 *   (glyphChecker; without it every glyph is kept)
 * @returns {{show: (message: {ruleset: string, card: {title: string, html: string,
 *   speaker_alias?: string|null}, key?: string|null}) => HTMLElement, clear: () => void,
 *   count: () => number, fit: () => void}} `show` returns the card's element; `count` the cards on
 *   screen (not leaving); `fit` fits them again (after the window is resized)
 */
export function createCardStack({ root, document, options, timers, layout, canDraw }) {
  /** @type {Map<HTMLElement, any>} cards on screen -> their stay timer */
  const shown = new Map();
  const newestFirst = options.position.startsWith("top");

  function leave(element) {
    if (!shown.has(element)) return;
    timers.clearTimeout(shown.get(element));
    shown.delete(element);
    element.classList.add("leaving");
    timers.setTimeout(() => element.remove(), ANIMATION_MS);
  }

  function fill(element, message) {
    const actor = document.createElement("div");
    actor.className = "overlay-actor";
    actor.textContent = message.card.speaker_alias ?? "";
    const body = document.createElement("div");
    body.className = "overlay-body";
    body.innerHTML = message.card.html; // escaped by the bridge (bridge/cards.py)
    for (const control of body.querySelectorAll(".card-buttons, button")) control.remove();
    if (canDraw) glyphFallbacks(body, canDraw);
    element.replaceChildren(actor, body);
    element.dataset.ruleset = String(message.ruleset ?? "");
  }

  function fit() {
    if (!layout) return;
    const available = layout.available();
    const cards = [...shown.keys()]; // oldest first, whatever the order on screen
    for (const card of cards) {
      let scale = 1;
      card.style.fontSize = "";
      for (let tries = 0; tries < 4; tries += 1) {
        const next = fitScale(card.offsetHeight, available, scale);
        if (next === scale) break;
        scale = next;
        card.style.fontSize = `${scale}em`;
      }
    }
    for (const card of cards.slice(0, cardsToDrop(cards.map((card) => card.offsetHeight), available, layout.gap()))) {
      timers.clearTimeout(shown.get(card));
      shown.delete(card);
      card.remove();
    }
  }

  function stay(element) {
    timers.clearTimeout(shown.get(element));
    shown.set(element, timers.setTimeout(() => leave(element), options.seconds * 1000));
  }

  return {
    show(message) {
      const key = typeof message.key === "string" ? message.key : null;
      const same = key === null ? undefined : [...shown.keys()].find((element) => element.dataset.key === key);
      if (same) {
        fill(same, message);
        stay(same);
        fit();
        return same;
      }
      const element = document.createElement("article");
      element.className = "overlay-card";
      if (key !== null) element.dataset.key = key;
      fill(element, message);
      if (newestFirst) root.prepend(element);
      else root.append(element);
      stay(element);
      const excess = shown.size - options.max;
      [...shown.keys()].slice(0, Math.max(0, excess)).forEach(leave);
      fit();
      return element;
    },
    clear() {
      [...shown.keys()].forEach(leave);
    },
    count: () => shown.size,
    fit,
  };
}

/**
 * The viewer's link to the bridge: hello, heartbeat, reconnect with backoff. Call `start()` once.
 *
 * @param {{url: string, hello: object, WebSocket: new (url: string) => WebSocket,
 *   timers: {setTimeout: Function, clearTimeout: Function},
 *   onMessage: (message: object) => void, onState: (state: string) => void,
 *   random?: () => number}} deps `random`: a number in [0, 1), the jitter after a 1012
 * @returns {{start: () => void}}
 */
export function createViewerLink({ url, hello, WebSocket, timers, onMessage, onState, random = Math.random }) {
  let failures = 0;
  let heartbeat = null;
  let pongDeadline = null;

  function stopTimers() {
    timers.clearTimeout(heartbeat);
    timers.clearTimeout(pongDeadline);
    heartbeat = pongDeadline = null;
  }

  function connect() {
    onState(LINK_STATE.CONNECTING);
    const socket = new WebSocket(url);
    let welcomed = false;
    const beat = () => {
      heartbeat = timers.setTimeout(() => {
        socket.send(JSON.stringify({ type: "ping", v: 1 }));
        pongDeadline = timers.setTimeout(() => socket.close(), LINK.PONG_TIMEOUT_MS);
        beat();
      }, LINK.HEARTBEAT_MS);
    };
    socket.onopen = () => socket.send(JSON.stringify(hello));
    socket.onmessage = (event) => {
      let message;
      try {
        message = JSON.parse(event.data);
      } catch {
        return;
      }
      if (message?.type === "welcome") {
        welcomed = true;
        failures = 0;
        onState(LINK_STATE.CONNECTED);
        beat();
      } else if (message?.type === "pong") {
        timers.clearTimeout(pongDeadline);
      } else if (message && typeof message === "object") {
        onMessage(message);
      }
    };
    socket.onclose = (event) => {
      stopTimers();
      const refused = event.code === CLOSE_UNAUTHORIZED;
      onState(refused ? LINK_STATE.REFUSED : LINK_STATE.DOWN);
      if (event.code === CLOSE_SERVICE_RESTART && welcomed) {  // a draining bridge: no failure
        timers.setTimeout(connect, Math.floor(random() * LINK.RESTART_JITTER_MS));
        return;
      }
      const delay = refused ? LINK.BACKOFF_MAX_MS : Math.min(LINK.BACKOFF_MAX_MS, LINK.BACKOFF_MIN_MS * 2 ** failures);
      failures += 1;
      timers.setTimeout(connect, delay);
    };
  }

  return { start: connect };
}

/**
 * Run the overlay in a browser page (`#cards` and `#status` from index.html).
 *
 * @param {Window & typeof globalThis} window
 */
export function runOverlay(window) {
  const { document } = window;
  const options = readOptions(window.location.search);
  const root = document.getElementById("cards");
  const status = document.getElementById("status");
  const text = statusText(status);
  const style = document.documentElement.style;
  style.setProperty("--fb-scale", String(options.scale));
  style.setProperty("--fb-animation-ms", `${ANIMATION_MS}ms`);
  if (options.chroma) style.setProperty("--fb-background", options.chroma);
  document.body.classList.add(`theme-${options.theme}`, `position-${options.position}`);
  const showStatus = (text) => {
    status.textContent = text ?? "";
    status.hidden = !text;
  };
  if (!options.world || !options.key) {
    showStatus(text.missing);
    return;
  }
  const timers = { setTimeout: window.setTimeout.bind(window), clearTimeout: window.clearTimeout.bind(window) };
  const px = (value) => Number.parseFloat(value) || 0;
  const layout = {
    available: () => px(window.getComputedStyle(root).maxHeight),
    gap: () => px(window.getComputedStyle(root).rowGap),
  };
  const canDraw = glyphChecker(document, window.getComputedStyle(document.body).fontFamily);
  const cards = createCardStack({ root, document, options, timers, layout, canDraw });
  window.addEventListener("resize", () => cards.fit());
  createViewerLink({
    url: bridgeSocketUrl(window.location.href),
    hello: { type: "hello", v: 1, world_id: options.world, viewer_key: options.key },
    WebSocket: window.WebSocket,
    timers,
    onMessage: (message) => {
      if (message.type === "overlay_card" && message.card) cards.show(message);
      else if (message.type === "overlay_clear") cards.clear();
      else if (message.type === "error") window.console.warn("fate-bridge overlay:", message.code, message.message);
    },
    onState: (state) => {
      document.body.dataset.link = state;
      showStatus(state === LINK_STATE.REFUSED ? text.refused : null);
    },
  }).start();
}

if (globalThis.document?.getElementById("cards")) runOverlay(globalThis);
