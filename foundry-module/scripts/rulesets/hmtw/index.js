/**
 * His Majesty the Worm (ruleset `hmtw`, docs/rules.md H1-H13; wire in docs/protocol.md "hmtw"):
 * tests of fate drawn from tarot decks the bridge keeps. Players type `/tof pentacles favor` (or
 * `/tof` for the dialog, or use the "Test of fate" button of an adventurer's sheet in the HMtW
 * system); the drawer alone sees "Push fate" on a failed test's card; GMs type `/tof decks`,
 * `/tof reshuffle`, `/tof round-end`, `/tof gm-draw`, `/tof clear "obstacle"`.
 *
 * The adventurer is the selected token's actor (`fvtt.controlledActors`), or the sheet's
 * (`fvtt.actorData`). In the HMtW system (`hmtw-foundry`) the scores are read from the actor
 * (`system.swords` ...); elsewhere they are typed. Every request runs on the active GM's client
 * through `api.relay`, attributed to Foundry's sender id; the GM's side reads the actor's owners
 * from Foundry itself. A test's card is seen per its roll mode (typed, chosen in the dialog, else
 * the drawer's own; logic/cards.js cardAudience), a push's card as the test's card, the GM's
 * deck cards by every GM. Foundry is reached through `api.fvtt` only; the objects hooks hand over
 * (sheets, chat messages) are read as plain data here.
 */

import { HMTW_SYSTEM_ID, TOF_COMMAND, drawMessage, drawerOf, gmMessage, groupMessage, hmtwScores,
  mostAndLeast, parseTofCommand, pushMessage, scoreFor } from "./command.js";
import { DIALOG_CLASS, PUSH_BUTTON, decoratePushButtons, dialogRequest, emptyTestForm, renderTestDialog } from "./ui.js";
import { BridgeError } from "../../logic/errors.js";
import { cardAudience, checkedVisibility, relayedResult, visibilityOfMessage } from "../../logic/cards.js";

export const id = "hmtw";

/** Relayed actions, run on the active GM's client. */
export const ACTIONS = Object.freeze({ DRAW: "draw", GROUP: "group", PUSH: "push", GM: "gm" });
/** This module's flags on a test card: the test ids it shows, and those pushed since. */
export const FLAGS = Object.freeze({ TESTS: "hmtw_tests", PUSHED: "hmtw_pushed" });

/**
 * @param {import("../../ruleset-api.js").RulesetApi} api
 * @returns {{draw(request: object, actor: object): Promise<unknown>, openDialog(actor: object): Promise<unknown>}}
 *   what the command, the sheet button and the dialog use (returned for tests and macros)
 */
export function install(api) {
  const { fvtt } = api;
  const isHmtwSystem = () => fvtt.clientInfo().system_id === HMTW_SYSTEM_ID;
  const sender = (who) => ({ userId: who.userId, userName: fvtt.userName(who.userId), isGM: who.isGM });

  // --- GM side ---------------------------------------------------------------------------------

  /** The adventurer as the bridge wants it, from Foundry (never from the asking client). */
  function bridgeActor(actorId) {
    const snapshot = typeof actorId === "string" ? fvtt.actorSnapshot(`Actor.${actorId}`) : null;
    if (!snapshot) throw new BridgeError("not_found", `no actor ${actorId} in this world`);
    return { actor_id: snapshot.id, name: snapshot.name, owner_user_ids: snapshot.ownerUserIds };
  }

  /** Who sees a card of `visibility` asked by `who` (Foundry's roll modes, every GM). */
  const audience = (visibility, who) => cardAudience({ visibility, askerId: who.userId, gmIds: fvtt.gmUserIds() });

  /**
   * Post a reply's card to `seenBy` (flagged with the tests it shows, when it shows tests; its
   * draws on it as Rolls, thrown by Dice So Nice as `who`) and its reshuffle notice for everyone.
   */
  async function postTestCard(reply, seenBy, who, testIds = null) {
    await api.postCard(reply.card, { ...seenBy, ...(testIds ? { flags: { [FLAGS.TESTS]: testIds } } : {}), diceUserId: who.userId });
    if (reply.notice) await api.postCard(reply.notice);
  }

  api.onRelay(ACTIONS.DRAW, async (data, who) => {
    const kind = data?.kind === "challenge" ? "challenge" : "test";
    const request = { kind, attribute: data?.attribute, score: data?.score, favor: Boolean(data?.favor),
      disfavor: Boolean(data?.disfavor), obstacle: typeof data?.obstacle === "string" ? data.obstacle : null,
      visibility: checkedVisibility(data?.visibility) };
    const reply = await api.request(drawMessage(request, bridgeActor(data?.actor_id), sender(who), api.newEventId()));
    if (kind === "challenge") {
      await postTestCard(reply, audience(request.visibility, who), who);
      return relayedResult(request.visibility, { value: reply.value, card: reply.drawn.name });
    }
    await postTestCard(reply, audience(request.visibility, who), who, [reply.test.test_id]);
    return relayedResult(request.visibility, { outcome: reply.test.outcome, total: reply.test.total });
  });

  api.onRelay(ACTIONS.GROUP, async (data, who) => {
    const members = (Array.isArray(data?.members) ? data.members : []).map((m) => {
      const actor = bridgeActor(m?.actor_id);
      const userId = drawerOf(actor.owner_user_ids, fvtt.isGMUser, who.userId);
      return { actor, score: m?.score, userId, userName: fvtt.userName(userId) };
    });
    const request = { attribute: data?.attribute, obstacle: typeof data?.obstacle === "string" ? data.obstacle : null,
      visibility: checkedVisibility(data?.visibility), members };
    const reply = await api.request(groupMessage(request, sender(who), api.newEventId()));
    await postTestCard(reply, audience(request.visibility, who), who, reply.members.map((m) => m.test_id));
    return relayedResult(request.visibility, { outcome: reply.outcome, hits: reply.hits });
  });

  api.onRelay(ACTIONS.PUSH, async (data, who) => {
    if (typeof data?.test_id !== "string") throw new BridgeError("bad_message", "a push needs test_id");
    const found = typeof data.message_id === "string" ? fvtt.messageData(data.message_id) : null;
    const card = found?.flags[FLAGS.TESTS]?.includes(data.test_id) ? found : null;
    const reply = await api.request(pushMessage(data.test_id, sender(who), api.newEventId()));
    const tests = reply.test ? [reply.test] : reply.members;
    // Seen by whoever saw the test's card; without that card, by the GMs and the pusher.
    await postTestCard(reply, card ? cardAudience({ sameAs: card }) : audience("gm", who), who, tests.map((t) => t.test_id));
    if (card) await fvtt.setMessageFlag(card.id, FLAGS.PUSHED, [...(card.flags[FLAGS.PUSHED] ?? []), data.test_id]);
    return relayedResult(card ? visibilityOfMessage(card) : "gm", { outcome: reply.test?.outcome ?? reply.outcome });
  });

  api.onRelay(ACTIONS.GM, async (data, who) => {
    if (!who.isGM) throw new BridgeError("forbidden", "only a GM commands the decks");
    const command = { kind: data?.kind, command: data?.command, obstacle: data?.obstacle };
    const reply = await api.request(gmMessage(command, sender(who), api.newEventId()));
    // The GM deck's card and the deck counts are the GMs'; an obstacle cleared is news for the table.
    await postTestCard(reply, audience(command.kind === "clear" ? "public" : "gm", who), who);
    return true;
  });

  // --- every client ----------------------------------------------------------------------------

  /** A refusal or a failed link, told to this client's user; never thrown. */
  function tell(error) {
    api.notify("warn", "FATE_BRIDGE.Hmtw.Refused", { message: String(error?.message ?? error?.code ?? error) });
    return null;
  }
  const warn = (error, data) => {
    api.notify("warn", `FATE_BRIDGE.Hmtw.Error.${error}`, data);
    return false;
  };

  const scoresOf = (actor) => (isHmtwSystem() ? hmtwScores(actor.system) : null);

  /** A test or Challenge Action of `actor` (foundry.js ActorData), relayed to the GM. */
  function draw(request, actor) {
    const score = scoreFor(request.attribute, request.scores[0], scoresOf(actor));
    if (!score.ok) return Promise.resolve(warn(score.error, score.data));
    const { kind, attribute, favor, disfavor, obstacle, visibility } = request;
    return api.relay(id, ACTIONS.DRAW, { actor_id: actor.id, kind, attribute, score: score.score, favor, disfavor, obstacle, visibility }).catch(tell);
  }

  /** H10: the most and the least qualified of the selected adventurers. */
  function groupTest(request) {
    const actors = fvtt.controlledActors();
    const typed = request.scores.length > 0;
    if (actors.length < 2 || (typed && actors.length !== request.scores.length)) {
      return warn("group_tokens", { count: String(typed ? request.scores.length : 2) });
    }
    const adventurers = [];
    for (const [index, actor] of actors.entries()) {
      const score = scoreFor(request.attribute, typed ? request.scores[index] : undefined, scoresOf(actor));
      if (!score.ok) return warn(score.error, { ...score.data, name: actor.name });
      adventurers.push({ actor_id: actor.id, score: score.score });
    }
    const members = mostAndLeast(adventurers);
    return api.relay(id, ACTIONS.GROUP, { attribute: request.attribute, obstacle: request.obstacle, visibility: request.visibility, members }).catch(tell);
  }

  /** The one selected adventurer, or a warning. */
  function oneSelected() {
    const actors = fvtt.controlledActors();
    if (actors.length !== 1) {
      warn(actors.length ? "several_tokens" : "no_token");
      return null;
    }
    return actors[0];
  }

  let TestDialog = null;
  /** Open the test of fate dialog for `actor` (foundry.js ActorData). */
  function openDialog(actor) {
    TestDialog ??= defineTestDialog(api, { draw, scoresOf, warn });
    return new TestDialog(actor).render({ force: true });
  }

  api.registerCommand(TOF_COMMAND, (args, who) => {
    const parsed = parseTofCommand(args, { visibility: fvtt.rollMode() });
    if (!parsed.ok) return warn(parsed.error, parsed.data);
    switch (parsed.kind) {
      case "help":
        api.notify("info", "FATE_BRIDGE.Hmtw.Usage");
        return false;
      case "deck": case "gm_draw": case "clear":
        if (!who.isGM) return warn("gm_only");
        return api.relay(id, ACTIONS.GM, parsed).catch(tell);
      case "group":
        return groupTest(parsed);
      case "dialog": {
        const actor = oneSelected();
        return actor ? openDialog(actor) : false;
      }
      default: {
        const actor = oneSelected();
        return actor ? draw(parsed, actor) : false;
      }
    }
  });

  // The HMtW system's adventurer sheet (an ActorSheet, Foundry's v1 sheets) gets a header button.
  fvtt.onHook("getActorSheetHeaderButtons", (sheet, buttons) => {
    const uuid = sheet?.actor?.uuid;
    if (!isHmtwSystem() || typeof uuid !== "string" || !fvtt.userOwnsActor(uuid)) return;
    buttons.unshift({
      label: api.localize("FATE_BRIDGE.Hmtw.Dialog.Title"),
      class: "fate-bridge-hmtw-test",
      icon: "fas fa-star",
      // Read when clicked, so the dialog shows the sheet's scores as they are then.
      onclick: () => {
        const actor = fvtt.actorData(uuid);
        return actor ? openDialog(actor) : null;
      },
    });
  });

  fvtt.onHook("renderChatMessageHTML", (message, html) => {
    if (!html?.querySelector?.(PUSH_BUTTON)) return;
    decoratePushButtons({
      root: html,
      viewerId: fvtt.currentUserId(),
      pushed: message.flags?.[fvtt.MODULE_ID]?.[FLAGS.PUSHED] ?? [],
      onPush: (testId, settle) => {
        api.relay(id, ACTIONS.PUSH, { test_id: testId, message_id: message.id }).then(() => settle(true), (error) => {
          tell(error);
          settle();
        });
      },
      pending: api.pending,
    });
  });

  return { draw, openDialog };
}

/**
 * The dialog's class: an ApplicationV2 with the test of fate form; drawing closes it.
 *
 * @param {import("../../ruleset-api.js").RulesetApi} api
 * @param {{draw: Function, scoresOf: Function, warn: Function}} deps
 * @returns {Function} `new TestDialog(actor).render({force: true})` opens it
 */
function defineTestDialog(api, { draw, scoresOf, warn }) {
  const Base = api.fvtt.applicationV2Base();
  return class TestOfFateDialog extends Base {
    static DEFAULT_OPTIONS = {
      id: "fate-bridge-hmtw-{id}",
      classes: [DIALOG_CLASS],
      window: { title: "FATE_BRIDGE.Hmtw.Dialog.Title", icon: "fa-solid fa-star" },
      position: { width: 360 },
    };

    #actor;
    #form = emptyTestForm(api.fvtt.rollMode());
    /** The draw the dialog asked (resolves with the relay's summary), for callers and tests. */
    drawn = null;

    constructor(actor, options) {
      super(options);
      this.#actor = actor;
    }

    async _renderHTML() {
      const scores = scoresOf(this.#actor);
      return renderTestDialog(api.fvtt.htmlDocument(), { actorName: this.#actor.name, scores, form: this.#form }, api.localize, {
        onDraw: (values) => {
          this.#form = values;
          const built = dialogRequest(values, !scores);
          if (!built.ok) {
            warn(built.error, built.data);
            return;
          }
          this.drawn = draw(built.request, this.#actor);
          this.close();
        },
      });
    }

    _replaceHTML(result, content) {
      content.replaceChildren(result);
    }
  };
}
