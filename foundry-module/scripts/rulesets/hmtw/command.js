/**
 * His Majesty the Worm (ruleset `hmtw`, docs/rules.md H1-H13; wire in docs/protocol.md "hmtw"):
 * the `/tof` chat command, the attribute scores of an adventurer, and the bridge messages.
 * Pure: plain data in, plain data out. The bridge keeps the decks and draws every card.
 *
 * `/tof ATTRIBUTE [SCORE] [favor] [disfavor] ["obstacle"] [MODE]`    a test of fate (H3-H6, H9)
 * `/tof challenge ATTRIBUTE [SCORE] [favor] [disfavor] [MODE]`       a Challenge Action (H8)
 * `/tof group ATTRIBUTE [SCORE...] ["obstacle"] [MODE]`              a group test of the selected tokens (H10)
 * `/tof decks | reshuffle | round-end | gm-draw | clear "obstacle"`   the GM's commands (H1, H7, H9)
 * `/tof` alone opens the dialog; `/tof help` shows the usage.
 * MODE is who sees the card: `public`, `gm`, `blind`, `self` (or Foundry's `gmroll` ...); without
 * it, the drawer's roll mode.
 */

import { visibilityWord } from "../../logic/cards.js";

export const TOF_COMMAND = "tof";
/** The public Foundry system for the game (omarwhite/hmtw-foundry): scores at `system.<attribute>`. */
export const HMTW_SYSTEM_ID = "hmtw-foundry";
/** H3: the attributes, each its own suit. */
export const ATTRIBUTES = Object.freeze(["swords", "pentacles", "cups", "wands"]);
/** H3: attribute scores. */
export const SCORE_MIN = 1;
export const SCORE_MAX = 4;
/** H10: the group test's adventurers, the most and the least qualified. */
export const GROUP_SIZE = 2;

/** `/tof WORD` commands of the GM -> the bridge's `hmtw_deck_command` command. */
const DECK_COMMANDS = Object.freeze({ decks: "status", reshuffle: "reshuffle", "round-end": "round_end" });
const FLAGS = Object.freeze(["favor", "disfavor"]);
/** Words, "double quoted", “curly quoted” or 'single quoted' text. */
const TOKEN = /"([^"]*)"|“([^”]*)”|'([^']*)'|(\S+)/g;

/**
 * @typedef {object} TofRequest what a `/tof` test, action or group test asks
 * @property {"test"|"challenge"|"group"} kind
 * @property {string} attribute one of ATTRIBUTES
 * @property {number[]} scores the scores typed (none: read from the actor in the HMtW system)
 * @property {boolean} favor
 * @property {boolean} disfavor
 * @property {string|null} obstacle
 * @property {string} visibility who sees the card: typed, else the default given to the parser
 */

/**
 * Parse the text after `/tof`.
 *
 * @param {string} args
 * @param {{visibility?: string}} [defaults] `visibility` when no mode is typed (`public` by default;
 *   the ruleset passes the user's roll mode)
 * @returns {{ok: true, kind: "dialog"|"help"|"gm_draw"} | {ok: true, kind: "deck", command: string}
 *   | {ok: true, kind: "clear", obstacle: string} | ({ok: true} & TofRequest)
 *   | {ok: false, error: string, data: object}} `error` is a key under `FATE_BRIDGE.Hmtw.Error.`:
 *   `unclosed_quote`, `no_attribute`, `unknown_word` (`data.token`), `twice` (`data.token`),
 *   `score_range` (`data.score`), `scores` (`data.count`), `no_obstacle`, `challenge_obstacle`;
 *   a second mode is `twice` (`data.token` the mode word)
 */
export function parseTofCommand(args, { visibility = "public" } = {}) {
  const text = String(args ?? "").trim();
  if ((text.match(/"/g) ?? []).length % 2 === 1) return fail("unclosed_quote");
  const tokens = [...text.matchAll(TOKEN)].map((m) => ({ quoted: m[4] === undefined, text: m[1] ?? m[2] ?? m[3] ?? m[4] }));
  if (tokens.length === 0) return { ok: true, kind: "dialog" };
  const [head, ...rest] = tokens;
  const word = head.quoted ? "" : head.text.toLowerCase();
  if (word === "help") return { ok: true, kind: "help" };
  if (word === "gm-draw") return { ok: true, kind: "gm_draw" };
  if (word in DECK_COMMANDS) return { ok: true, kind: "deck", command: DECK_COMMANDS[word] };
  if (word === "clear") {
    const obstacle = rest.map((t) => t.text).join(" ").trim();
    return obstacle ? { ok: true, kind: "clear", obstacle } : fail("no_obstacle");
  }
  const kind = word === "challenge" || word === "group" ? word : "test";
  return parseRequest(kind, kind === "test" ? tokens : rest, visibility);
}

function parseRequest(kind, tokens, defaultVisibility) {
  /** @type {TofRequest} */
  const request = { kind, attribute: null, scores: [], favor: false, disfavor: false, obstacle: null, visibility: defaultVisibility };
  let modeTyped = false;
  for (const token of tokens) {
    const word = token.text.toLowerCase();
    const mode = token.quoted ? null : visibilityWord(word);
    if (mode) {
      if (modeTyped) return fail("twice", { token: token.text });
      modeTyped = true;
      request.visibility = mode;
    } else if (token.quoted) {
      if (request.obstacle !== null) return fail("twice", { token: "obstacle" });
      request.obstacle = token.text.trim() || null;
    } else if (ATTRIBUTES.includes(word)) {
      if (request.attribute) return fail("twice", { token: word });
      request.attribute = word;
    } else if (FLAGS.includes(word)) {
      request[word] = true; // H4: favor does not stack, so a repeat changes nothing
    } else if (/^-?\d+$/.test(word)) {
      const score = Number(word);
      if (score < SCORE_MIN || score > SCORE_MAX) return fail("score_range", { score: word });
      request.scores.push(score);
    } else {
      return fail("unknown_word", { token: token.text });
    }
  }
  if (!request.attribute) return fail("no_attribute");
  const allowed = kind === "group" ? [0, GROUP_SIZE] : [0, 1];
  if (!allowed.includes(request.scores.length)) return fail("scores", { count: String(allowed.at(-1)) });
  if (kind === "challenge" && request.obstacle !== null) return fail("challenge_obstacle");
  return { ok: true, ...request };
}

function fail(error, data = {}) {
  return { ok: false, error, data };
}

/**
 * H3: an HMtW adventurer's scores, read from the hmtw-foundry actor's `system` (flat integers;
 * 0 on a new character). A missing or non-integer score is null.
 *
 * @param {object|null|undefined} system the actor's `system` data
 * @returns {{swords: number|null, pentacles: number|null, cups: number|null, wands: number|null}}
 */
export function hmtwScores(system) {
  return Object.fromEntries(ATTRIBUTES.map((a) => [a, Number.isInteger(system?.[a]) ? system[a] : null]));
}

/**
 * The score a test uses: the one typed, else the actor's (HMtW system). H3 wants 1..4: a score of
 * 0 (a new character) or 5+ is refused here, before the bridge is asked.
 *
 * @param {string} attribute
 * @param {number|undefined} typed the typed score, if any
 * @param {ReturnType<typeof hmtwScores>|null} scores the actor's, or null outside the HMtW system
 * @returns {{ok: true, score: number} | {ok: false, error: "no_score"|"actor_score", data: object}}
 */
export function scoreFor(attribute, typed, scores) {
  if (typed !== undefined) return { ok: true, score: typed };
  if (!scores) return fail("no_score", { attribute });
  const score = scores[attribute];
  if (!Number.isInteger(score) || score < SCORE_MIN || score > SCORE_MAX) {
    return fail("actor_score", { attribute, score: String(score ?? "?") });
  }
  return { ok: true, score };
}

/**
 * H10: the most and the least qualified of the selected adventurers (highest score first; ties
 * keep the selection order).
 *
 * @template {{score: number}} T
 * @param {T[]} adventurers at least two
 * @returns {[T, T] | null} null with fewer than two
 */
export function mostAndLeast(adventurers) {
  if (adventurers.length < GROUP_SIZE) return null;
  const ranked = adventurers.map((a, i) => ({ a, i })).sort((x, y) => y.a.score - x.a.score || x.i - y.i);
  return [ranked[0].a, ranked.at(-1).a];
}

/**
 * Who draws for a group member (and alone may push its failure, H6): its first owner who is not
 * a GM, else `fallbackUserId` (the GM who asked).
 *
 * @param {string[]} ownerUserIds
 * @param {(userId: string) => boolean} isGM
 * @param {string} fallbackUserId
 * @returns {string}
 */
export function drawerOf(ownerUserIds, isGM, fallbackUserId) {
  return ownerUserIds.find((id) => !isGM(id)) ?? fallbackUserId;
}

/**
 * @typedef {object} Sender who asked, as the GM's client knows them (Foundry's sender id)
 * @property {string} userId
 * @property {string|null} userName
 * @property {boolean} isGM
 */

/** @param {Sender} sender */
function who(sender) {
  return { user_id: sender.userId, ...(sender.userName ? { user_name: sender.userName } : {}) };
}

/**
 * `hmtw_test` or `hmtw_challenge_action`.
 *
 * @param {{kind: "test"|"challenge", attribute: string, score: number, favor: boolean, disfavor: boolean,
 *   obstacle: string|null, visibility: string}} request
 * @param {{actor_id: string, name: string, owner_user_ids: string[]}} actor from Foundry, on the GM's client
 * @param {Sender} sender
 * @param {string} eventId also the test's (or action's) id
 * @returns {object}
 */
export function drawMessage(request, actor, sender, eventId) {
  const common = {
    v: 1, event_id: eventId, actor, attribute: request.attribute, score: request.score,
    favor: request.favor, disfavor: request.disfavor, ...who(sender), user_is_gm: sender.isGM, visibility: request.visibility,
  };
  if (request.kind === "challenge") return { type: "hmtw_challenge_action", action_id: eventId, ...common };
  return { type: "hmtw_test", test_id: eventId, ...common, ...(request.obstacle ? { obstacle: request.obstacle } : {}) };
}

/**
 * `hmtw_group_test` (H10).
 *
 * @param {{attribute: string, obstacle: string|null, visibility: string, members: Array<{actor: object, score: number,
 *   userId: string, userName: string|null}>}} request the most, then the least qualified
 * @param {Sender} sender
 * @param {string} eventId also the group test's id
 * @returns {object}
 */
export function groupMessage(request, sender, eventId) {
  return {
    type: "hmtw_group_test", v: 1, event_id: eventId, test_id: eventId, attribute: request.attribute,
    ...(request.obstacle ? { obstacle: request.obstacle } : {}),
    members: request.members.map((m) => ({ actor: m.actor, score: m.score, ...who({ userId: m.userId, userName: m.userName }) })),
    ...who(sender), user_is_gm: sender.isGM, visibility: request.visibility,
  };
}

/**
 * `hmtw_push` (H6): the bridge checks that the sender drew.
 *
 * @param {string} testId
 * @param {Sender} sender
 * @param {string} eventId
 * @returns {object}
 */
export function pushMessage(testId, sender, eventId) {
  return { type: "hmtw_push", v: 1, event_id: eventId, test_id: testId, ...who(sender) };
}

/**
 * The GM's commands: `hmtw_deck_command`, `hmtw_gm_draw`, `hmtw_clear_obstacle`.
 *
 * @param {{kind: "deck", command: string} | {kind: "gm_draw"} | {kind: "clear", obstacle: string}} command
 * @param {Sender} sender
 * @param {string} eventId
 * @returns {object}
 */
export function gmMessage(command, sender, eventId) {
  const common = { v: 1, event_id: eventId, user_id: sender.userId, user_is_gm: sender.isGM };
  switch (command.kind) {
    case "deck": return { type: "hmtw_deck_command", ...common, command: command.command };
    case "gm_draw": return { type: "hmtw_gm_draw", ...common };
    case "clear": return { type: "hmtw_clear_obstacle", ...common, obstacle: command.obstacle };
    default: throw new TypeError(`not a GM command: ${JSON.stringify(command?.kind)}`);
  }
}
