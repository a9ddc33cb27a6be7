/**
 * The stream overlay's pure parts: the GM's controls (scripts/logic/overlay.js) on a fake bridge
 * link, and the page's option parsing and card stack (bridge/overlay/overlay.js) on jsdom.
 * The page against a real bridge in chromium: overlay-browser.test.js.
 */
import { test } from "node:test";
import assert from "node:assert/strict";
import { JSDOM } from "jsdom";
import { createOverlayControls, overlayAction, overlayUrl } from "../scripts/logic/overlay.js";
import { ANIMATION_MS, MIN_FIT_SCALE, bridgeSocketUrl, cardsToDrop, chromaColour, createCardStack, fitScale, readOptions } from "../../bridge/overlay/overlay.js";

const INFO = { type: "overlay_info_reply", query_id: "q1", world_id: "my world", viewer_key: "k/=+", path: "overlay" };

test("overlayAction: '' copies the URL, the three words pass, anything else is null", () => {
  assert.deepEqual(["", " Clear ", "replay", "url", "nope"].map(overlayAction), ["url", "clear", "replay", "url", null]);
});

test("overlayUrl: http(s) for ws(s), a proxy path kept, world and key encoded", () => {
  assert.equal(overlayUrl("ws://127.0.0.1:8765", INFO), "http://127.0.0.1:8765/overlay?world=my+world&key=k%2F%3D%2B");
  assert.equal(overlayUrl("wss://foundry.example.org/fate-bridge", INFO), "https://foundry.example.org/fate-bridge/overlay?world=my+world&key=k%2F%3D%2B");
  assert.throws(() => overlayUrl("not a url", INFO), TypeError);
});

function controls({ ready = true, reply = INFO, fail = null } = {}) {
  const sent = [];
  const notices = [];
  const copied = [];
  const link = { isReady: () => ready, request: async (message) => { sent.push(message); if (fail) throw fail; return reply; } };
  let n = 0;
  const run = createOverlayControls({
    link: () => link,
    newId: () => `q${++n}`,
    bridgeUrl: () => "ws://127.0.0.1:8765",
    copyText: async (text) => { copied.push(text); },
    notify: (level, key, data) => notices.push([level, key, data]),
  }).run;
  return { run, sent, notices, copied };
}

test("url asks overlay_info and copies the overlay URL", async () => {
  const c = controls();
  assert.equal(await c.run("url"), true);
  assert.deepEqual(c.sent, [{ type: "overlay_info", v: 1, query_id: "q1" }]);
  assert.deepEqual(c.copied, ["http://127.0.0.1:8765/overlay?world=my+world&key=k%2F%3D%2B"]);
  assert.deepEqual(c.notices, [["info", "FATE_BRIDGE.Overlay.Copied", undefined]]);
});

test("clear and replay send overlay_control with their action", async () => {
  const c = controls({ reply: { type: "overlay_controlled" } });
  assert.equal(await c.run("clear"), true);
  assert.equal(await c.run("replay"), true);
  assert.deepEqual(c.sent.map((m) => [m.type, m.action, m.query_id]), [["overlay_control", "clear", "q1"], ["overlay_control", "replay", "q2"]]);
  assert.deepEqual(c.notices.map((n) => n[1]), ["FATE_BRIDGE.Overlay.Cleared", "FATE_BRIDGE.Overlay.Replayed"]);
});

test("no link, a refusal or an unknown word: the GM is told, nothing copied, never a rejection", async () => {
  const down = controls({ ready: false });
  assert.equal(await down.run("url"), false);
  assert.deepEqual([down.sent, down.copied, down.notices], [[], [], [["warn", "FATE_BRIDGE.Overlay.Down", undefined]]]);
  const refused = controls({ fail: Object.assign(new Error("x"), { code: "timeout" }) });
  assert.equal(await refused.run("clear"), false);
  assert.deepEqual(refused.notices, [["warn", "FATE_BRIDGE.Overlay.Failed", { code: "timeout" }]]);
  const usage = controls();
  assert.equal(await usage.run(null), false);
  assert.deepEqual([usage.sent, usage.notices], [[], [["info", "FATE_BRIDGE.Overlay.Usage", undefined]]]);
});

test("readOptions: defaults, bounds and the chroma colour", () => {
  assert.deepEqual(readOptions("?world=w&key=k"), {
    world: "w", key: "k", position: "bottom-right", max: 3, seconds: 12, scale: 1, theme: "dark", chroma: null,
  });
  assert.deepEqual(readOptions("?position=top-left&max=5&seconds=30&scale=1.5&theme=light&chroma=00FF00"), {
    world: "", key: "", position: "top-left", max: 5, seconds: 30, scale: 1.5, theme: "light", chroma: "#00ff00",
  });
  const bad = readOptions("?position=middle&max=99&seconds=-1&scale=abc&theme=neon&chroma=red;background:url(x)");
  assert.deepEqual([bad.position, bad.max, bad.seconds, bad.scale, bad.theme, bad.chroma], ["bottom-right", 3, 12, 1, "dark", null]);
  assert.deepEqual(["green", "#0f0", "0f0f", ""].map(chromaColour), ["#00ff00", "#0f0", null, null]);
});

test("bridgeSocketUrl: the page's own host and folder, ws or wss", () => {
  assert.equal(bridgeSocketUrl("http://127.0.0.1:8765/overlay?world=w&key=k"), "ws://127.0.0.1:8765/");
  assert.equal(bridgeSocketUrl("https://x.org/fate-bridge/overlay?key=k#a"), "wss://x.org/fate-bridge/");
});

/** A card stack on jsdom with manual timers: `tick()` runs every due timer. */
function stack(search) {
  const { window } = new JSDOM('<main id="cards"></main>');
  let now = 0;
  const timers = new Map();
  let next = 0;
  const fake = {
    setTimeout: (fn, ms) => { timers.set(++next, { fn, at: now + ms }); return next; },
    clearTimeout: (id) => timers.delete(id),
  };
  const tick = (ms) => {
    now += ms;
    for (const [id, { fn, at }] of [...timers]) if (at <= now) { timers.delete(id); fn(); }
  };
  const root = window.document.getElementById("cards");
  const cards = createCardStack({ root, document: window.document, options: readOptions(search), timers: fake });
  const keys = () => [...root.querySelectorAll(".overlay-card:not(.leaving)")].map((e) => e.dataset.key);
  return { cards, root, tick, keys };
}

const card = (key, html = "<p class=x>Level: MF</p>", alias = "Basic Folk") => ({ ruleset: "sohl", key, card: { title: "t", html, speaker_alias: alias } });

test("cards: names as text, no buttons, replaced by key, at most max, gone after seconds", () => {
  const { cards, root, tick, keys } = stack("?max=2&seconds=5");
  const shown = cards.show(card("a", '<div class="card-buttons"><button>Spend</button></div><p>pending</p>', "<img src=x>"));
  assert.equal(shown.querySelector(".overlay-actor").textContent, "<img src=x>");
  assert.equal(shown.querySelectorAll("img, button, .card-buttons").length, 0);
  tick(4000);
  cards.show(card("a", "<p>final</p>"));
  assert.deepEqual([keys(), root.querySelector(".overlay-body").textContent], [["a"], "final"]);
  tick(4000); // 8 s after the first show, 4 s after the replacement restarted its stay
  assert.deepEqual(keys(), ["a"]);
  cards.show(card("b"));
  cards.show(card("c"));
  assert.deepEqual(keys(), ["b", "c"], "the oldest leaves past max");
  tick(ANIMATION_MS);
  assert.equal(root.querySelector('[data-key="a"]'), null, "removed once its leave animation ran");
  tick(5000);
  assert.deepEqual(keys(), []);
});

test("cards: top positions put the newest first; clear takes every card off", () => {
  const { cards, root, tick, keys } = stack("?position=top-right");
  cards.show(card("a"));
  cards.show(card("b"));
  assert.deepEqual(keys(), ["b", "a"]);
  cards.clear();
  assert.deepEqual([keys(), cards.count()], [[], 0]);
  tick(ANIMATION_MS);
  assert.equal(root.children.length, 0);
});

test("fitting the stack (issue 25): whole cards taken off oldest first, never the newest; a tall card's text scaled to fit", () => {
  assert.equal(cardsToDrop([300, 300], 640, 16), 0, "616 px fit 640");
  assert.equal(cardsToDrop([400, 300], 640, 16), 1, "716 px do not: the oldest goes whole");
  assert.equal(cardsToDrop([200, 200, 500], 640, 16), 2);
  assert.equal(cardsToDrop([900], 640, 16), 0, "the newest stays (its text is scaled instead)");
  assert.equal(cardsToDrop([], 640, 16), 0);
  assert.equal(fitScale(500, 640), 1);
  assert.equal(fitScale(800, 640), 0.8 * 0.98);
  assert.equal(fitScale(800, 640, 0.8), 0.8 * 0.8 * 0.98, "measured at a scale already");
  assert.equal(fitScale(5000, 640), MIN_FIT_SCALE);
});

test("the card stack without a layout (no browser) fits nothing and keeps max cards", () => {
  const dom = new JSDOM('<main id="cards"></main>');
  const root = dom.window.document.getElementById("cards");
  const timers = { setTimeout: () => 0, clearTimeout: () => {} };
  const stack = createCardStack({ root, document: dom.window.document, options: readOptions("?max=2&seconds=600"), timers });
  for (const key of ["a", "b", "c"]) stack.show({ ruleset: "mythic", key, card: { title: "t", html: "<p>x</p>" } });
  assert.equal(stack.count(), 2);
  stack.fit(); // no layout: nothing measured, nothing taken off
  assert.equal(stack.count(), 2);
  assert.deepEqual([...root.querySelectorAll(".overlay-card:not(.leaving)")].map((card) => card.dataset.key), ["b", "c"]);
});

test("the card stack with a layout takes the oldest card off whole and scales a card taller than the stack", () => {
  const dom = new JSDOM('<main id="cards"></main>');
  const { document, HTMLElement } = dom.window;
  // jsdom lays nothing out: a card is as tall as its body's data-h says, times its font scale.
  Object.defineProperty(HTMLElement.prototype, "offsetHeight", {
    get() { return Number(this.querySelector("[data-h]")?.dataset.h ?? 0) * (Number.parseFloat(this.style.fontSize) || 1); },
  });
  const root = document.getElementById("cards");
  const timers = { setTimeout: () => 0, clearTimeout: () => {} };
  const layout = { available: () => 640, gap: () => 16 };
  const stack = createCardStack({ root, document, options: readOptions("?max=3&seconds=600"), timers, layout });
  const card = (key, height) => ({ ruleset: "mythic", key, card: { title: "t", html: `<p data-h="${height}">x</p>` } });
  stack.show(card("a", 300));
  stack.show(card("b", 300));
  assert.deepEqual([...root.children].map((c) => c.dataset.key), ["a", "b"], "616 px fit");
  stack.show(card("c", 300));
  assert.deepEqual([...root.children].map((c) => c.dataset.key), ["b", "c"], "the oldest is taken off at once, whole");
  const tall = stack.show(card("d", 1000));
  assert.deepEqual([...root.children].map((c) => c.dataset.key), ["d"]);
  assert.ok(tall.offsetHeight <= 640 && tall.offsetHeight > 600, `scaled to fit: ${tall.offsetHeight}`);
  assert.equal(tall.style.fontSize, `${0.64 * 0.98}em`);
});

test("the overlay reconnects within 0.5 s after a 1012 of a welcomed link, with the backoff otherwise (issue 28)", async () => {
  const { createViewerLink, LINK, CLOSE_SERVICE_RESTART } = await import("../../bridge/overlay/overlay.js");
  const sockets = [];
  class FakeSocket {
    constructor(url) { this.url = url; this.sent = []; sockets.push(this); }
    send(data) { this.sent.push(JSON.parse(data)); }
    close() {}
  }
  const reconnects = [];  // [delay ms, the function the timer would run]
  const timers = { setTimeout: (fn, ms) => { if (fn.name === "connect") reconnects.push([ms, fn]); return 0; }, clearTimeout: () => {} };
  createViewerLink({
    url: "ws://bridge/overlay", hello: { type: "hello", v: 1 }, WebSocket: FakeSocket, timers,
    onMessage: () => {}, onState: () => {}, random: () => 0.5,
  }).start();
  sockets[0].onmessage({ data: JSON.stringify({ type: "welcome", v: 1 }) });
  sockets[0].onclose({ code: CLOSE_SERVICE_RESTART });
  assert.equal(reconnects[0][0], 0.5 * LINK.RESTART_JITTER_MS);  // a draining bridge: at once, elsewhere
  reconnects[0][1]();
  assert.equal(sockets.length, 2);
  sockets[1].onclose({ code: CLOSE_SERVICE_RESTART });  // a 1012 before its welcome: the backoff
  assert.equal(reconnects[1][0], LINK.BACKOFF_MIN_MS);
  reconnects[1][1]();
  sockets[2].onclose({ code: 1006 });  // and it counted as a failure
  assert.equal(reconnects[2][0], 2 * LINK.BACKOFF_MIN_MS);
});

test("a glyph the screen cannot draw shows its text (issue 37: hmtw suit marks); one it draws stays", async () => {
  const { glyphFallbacks } = await import("../../bridge/overlay/overlay.js");
  const dom = new JSDOM('<div><span class="hmtw-mark" data-glyph-text="Cu">\u{1F3C6}</span> <span class="hmtw-mark" data-glyph-text="Sw">\u2694</span>'
    + ' <span class="hmtw-mark" data-glyph-text="">\u{1F0CF}</span></div>');
  const body = dom.window.document.querySelector("div");
  glyphFallbacks(body, (text) => text === "\u2694");
  const marks = [...body.querySelectorAll(".hmtw-mark")].map((mark) => [mark.textContent, mark.dataset.glyph ?? null, mark.classList.contains("glyph-as-text")]);
  assert.deepEqual(marks, [["Cu", "\u{1F3C6}", true], ["\u2694", null, false], ["", "\u{1F0CF}", true]]);
});

test("the card stack puts a card's undrawable glyphs as text before it is shown", () => {
  const dom = new JSDOM('<main id="cards"></main>');
  const root = dom.window.document.getElementById("cards");
  const timers = { setTimeout: () => 0, clearTimeout: () => {} };
  const stack = createCardStack({ root, document: dom.window.document, options: readOptions("?seconds=600"), timers, canDraw: () => false });
  const shown = stack.show({ ruleset: "hmtw", key: "t1", card: { title: "t", html: '<span class="hmtw-mark" data-glyph-text="Wa">\u{1FA84}</span> Knight of Wands' } });
  assert.equal(shown.querySelector(".hmtw-mark").textContent, "Wa");
});
