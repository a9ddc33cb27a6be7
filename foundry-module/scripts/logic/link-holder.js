/**
 * Which GM's browser holds the bridge link. Every GM who has the bridge token may hold
 * it; one does at a time (the bridge keeps one link per world and closes an older one with 4003),
 * and every client, players' included, agrees on which one, so a player's click goes to it.
 *
 * Each GM's browser announces its state on the module socket, `link_state {has_token, holding}`;
 * a client that starts (Foundry's `ready`) asks every GM for theirs with `link_query`. From the
 * announcements of the GMs Foundry reports as connected (`User#active`), each client computes the
 * same holder:
 * 1. a GM that announces `holding` (its browser has a link) keeps it, so a GM who joins later never
 *    takes the link from a working one; when two announce it (both claimed at once), the lower user
 *    id keeps it and the other lets go;
 * 2. otherwise the GM with the lowest user id among those that announce `has_token`.
 * A GM's browser announces `has_token` only CLAIM_DELAY_MS after it started, when it has heard the
 * others' answers, so a GM who joins while another holds the link does not claim it first (at
 * once when it is the only GM connected: nobody else can hold it). A GM
 * without a token never announces `has_token`, so it never blocks one that has it; a GM whose token
 * the bridge refused (4001) withdraws (`has_token` false) until its bridge settings change. A GM
 * whose link another browser took (4003) yields: it withdraws too, so it never fights a browser it
 * does not know of (the same GM's other window, another bridge process's forwarder) and stays out
 * until its GM's `/fatelink` (main.js); but once another connected GM of the world is seen offering
 * or holding the link, the 4003 is that election's doing (two GMs claimed at once, and the bridge's
 * 4003 may reach the GM the election keeps before it hears the other: the race it lost), and the
 * yield lasts only while some other GM offers or holds it. When none does any more (they left,
 * withdrew or lost their token), the yielded GM offers itself again, so a hand-over still reaches
 * it. When the holder leaves (Foundry's `userConnected` hook, the user no longer active) the next
 * GM is elected at once.
 *
 * Until a client has heard any other GM's announcement (the first second after it starts, or GMs
 * running an earlier release of this module, which announce nothing) it takes Foundry's active GM
 * (`game.users.activeGM`) for the holder, as earlier releases did.
 *
 * The announcements come with Foundry's sender id: a player cannot pose as a GM, and only GMs'
 * announcements count. Pure: the socket, the user list, the token check and the timers are injected.
 */

/** Socket payload types of the election. */
export const LINK_TYPES = Object.freeze({ STATE: "link_state", QUERY: "link_query" });

/** Why a GM's browser stopped offering itself (`withdraw`). */
const WITHDRAWN = Object.freeze({ REFUSED: "refused", YIELDED: "yielded" });

/** Bounds, with their reasons. */
export const LINK_LIMITS = Object.freeze({
  /**
   * A GM's browser waits this long after it starts before it offers to hold the link: the other
   * GMs answer `link_query` in one socket round trip (well under a second), so by then it knows
   * whether one of them already holds it.
   */
  CLAIM_DELAY_MS: 2_000,
});

/**
 * @param {object} deps
 * @param {() => string} deps.selfId this client's user id
 * @param {() => boolean} deps.selfIsGM this client's user is a GM
 * @param {() => string[]} deps.activeGMIds the ids of the GM users Foundry reports as connected
 * @param {() => string|null} deps.activeGMId Foundry's active GM's id (`game.users.activeGM`), null
 *   when no GM is connected
 * @param {() => boolean} deps.hasToken this client's user has a bridge token set
 * @param {(userId: string) => boolean} deps.isGMUser that user is a GM (Foundry's users)
 * @param {(payload: object) => void} deps.send emit on the module socket to the other clients
 * @param {{setTimeout: Function, clearTimeout: Function}} deps.timers
 * @param {(holderId: string|null) => void} deps.onChange runs whenever the holder this client
 *   computes changes (also from or to this client)
 * @param {Partial<typeof LINK_LIMITS>} [deps.limits] overrides (tests)
 * @returns {{
 *   start(): void,
 *   receive(payload: unknown, senderId: string): boolean,
 *   usersChanged(): void,
 *   setHolding(holding: boolean): void,
 *   withdraw(options?: {yielded?: boolean}): void,
 *   reset(): void,
 *   holderId(): string|null,
 *   isHolder(): boolean,
 *   dispose(): void,
 * }} `start` (once, at `ready`) asks the GMs for their state and arms the claim delay;
 *   `receive` takes a module-socket payload with Foundry's sender id and returns true when it was
 *   part of the election (the caller passes it on otherwise); `usersChanged` re-counts after a
 *   user connected or left; `setHolding` tells whether this client now has a link (announced);
 *   `withdraw` stops offering this client until `reset` (after the bridge settings change, or
 *   `/fatelink`); `yielded` (after a 4003): also until no other connected GM offers or holds the
 *   link any more, once one has been seen doing so since (see above);
 *   `holderId` is the elected GM's user id, null when no GM with a token is connected
 */
export function createLinkElection({ selfId, selfIsGM, activeGMIds, activeGMId, hasToken, isGMUser, send, timers, onChange, limits = {} }) {
  const limit = { ...LINK_LIMITS, ...limits };
  /** @type {Map<string, {hasToken: boolean, holding: boolean}>} the other GMs' last announcements */
  const others = new Map();
  let ready = false;
  let holding = false;
  /** Why this client does not offer itself: null (it does), REFUSED (until reset) or YIELDED (see `withdraw`). */
  let withdrawn = null;
  /** While YIELDED: another connected GM has offered or held the link since, so its end is a hand-over. */
  let yieldedToGM = false;
  let claimTimer = null;
  let last = null;
  /** Some other GM's announcement has arrived. */
  let heard = false;

  /** What this client announces: a token counts once the claim delay is over and it has not withdrawn. */
  const own = () => ({ hasToken: ready && withdrawn === null && Boolean(hasToken()), holding });

  function announce() {
    if (!selfIsGM()) return;
    const state = own();
    send({ type: LINK_TYPES.STATE, has_token: state.hasToken, holding: state.holding });
  }

  function holderId() {
    const active = new Set(activeGMIds());
    const states = new Map(others);
    if (selfIsGM()) states.set(selfId(), own());
    const present = [...states].filter(([id]) => active.has(id)).sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    const holder = present.find(([, state]) => state.holding) ?? present.find(([, state]) => state.hasToken);
    if (holder) return holder[0];
    const guess = heard ? null : activeGMId();
    return guess !== null && guess !== selfId() ? guess : null;
  }

  /** Another connected GM offers (`has_token`) or holds the link. */
  function anotherOffers() {
    const active = new Set(activeGMIds());
    return [...others].some(([id, state]) => active.has(id) && (state.hasToken || state.holding));
  }

  /**
   * A yield ends once the GMs it was seen yielding to no longer offer or hold the link: this
   * client offers itself again (announced). Call after every change of the others' states.
   */
  function reviewYield() {
    if (withdrawn !== WITHDRAWN.YIELDED) return;
    if (anotherOffers()) {
      yieldedToGM = true;
    } else if (yieldedToGM) {
      withdrawn = null;
      yieldedToGM = false;
      announce();
    }
  }

  function recount() {
    const now = holderId();
    if (now === last) return;
    last = now;
    onChange(now);
  }

  return {
    start() {
      // Alone among the connected GMs, nobody else can hold the link: no need to wait for answers.
      if (activeGMIds().every((id) => id === selfId())) ready = true;
      send({ type: LINK_TYPES.QUERY });
      announce();
      if (ready) {
        recount();
        return;
      }
      claimTimer = timers.setTimeout(() => {
        claimTimer = null;
        ready = true;
        announce();
        recount();
      }, limit.CLAIM_DELAY_MS);
      recount();
    },
    receive(payload, senderId) {
      if (!payload || typeof payload !== "object") return false;
      if (payload.type === LINK_TYPES.QUERY) {
        if (senderId !== selfId()) announce();
        return true;
      }
      if (payload.type !== LINK_TYPES.STATE) return false;
      if (!isGMUser(senderId) || senderId === selfId()) return true;
      others.set(senderId, { hasToken: payload.has_token === true, holding: payload.holding === true });
      heard = true;
      reviewYield();
      recount();
      return true;
    },
    usersChanged() {
      const active = new Set(activeGMIds());
      for (const id of [...others.keys()]) if (!active.has(id)) others.delete(id);
      reviewYield();
      recount();
    },
    setHolding(value) {
      if (holding === Boolean(value)) return;
      holding = Boolean(value);
      announce();
      recount();
    },
    withdraw({ yielded = false } = {}) {
      if (withdrawn !== WITHDRAWN.REFUSED) withdrawn = yielded ? WITHDRAWN.YIELDED : WITHDRAWN.REFUSED;
      yieldedToGM = false;
      holding = false;
      announce();
      reviewYield();
      recount();
    },
    reset() {
      withdrawn = null;
      yieldedToGM = false;
      announce();
      recount();
    },
    holderId,
    isHolder: () => selfIsGM() && holderId() === selfId(),
    dispose() {
      if (claimTimer !== null) timers.clearTimeout(claimTimer);
      claimTimer = null;
    },
  };
}
