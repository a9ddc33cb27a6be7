/**
 * The Fate Chart (ruleset `mythic`): any table, in any game system, asks yes/no questions with
 * `/fatechart high vs average +1dr "Is the door locked?"` or the dialog `/fatechart` opens.
 *
 * Every request goes through the relay to the active GM's client (run there directly when the
 * asker is that GM), which sends the bridge message with Foundry's sender id as `user_id`, posts
 * the answer's card whispered or public per the asked roll mode, and returns a short summary. The
 * roll mode is the one typed (`gm`, `blindroll` ...) or chosen in the dialog, else the asker's own.
 * Foundry is reached through `api.fvtt` only.
 */

import { BridgeError } from "../../logic/errors.js";
import { relayedPhysical, withPhysical } from "../../logic/dice-trust.js";
import { cardAudience, relayedResult } from "../../logic/cards.js";
import { CHART_COMMAND, chartMessage, parseChartCommand } from "./chart.js";
import { CHART_DIALOG_CLASS, chartRequestOf, emptyChartForm, renderChartDialog } from "./dialog.js";

export const id = "mythic";

/** Relay actions (run on the active GM's client). */
export const ACTIONS = Object.freeze({ ASK: "ask", SETTINGS: "settings", CATALOG: "catalog" });

/**
 * @param {import("../../ruleset-api.js").RulesetApi} api
 * @returns {{ask(request: object): Promise<object|null>, openDialog(): Promise<object>}} what the
 *   command and the dialog use (returned for tests and macros)
 */
export function install(api) {
  /** The bridge request of a relayed request, sent with the sender as the asker. */
  async function decide(request, sender) {
    return api.request(withPhysical(chartMessage(request, {
      eventId: api.newEventId(),
      userId: sender.userId,
      userName: api.fvtt.userName(sender.userId),
      isGM: sender.isGM,
    }), request.kind === "settings" ? null : relayedPhysical(request.physical)));
  }

  api.onRelay(ACTIONS.ASK, async (request, sender) => {
    if (request?.kind !== "question" && request?.kind !== "odds") {
      throw new BridgeError("bad_message", "ask takes a question by ranks or by odds", { field: "kind" });
    }
    const reply = await decide(request, sender);
    const audience = cardAudience({ visibility: reply.visibility, askerId: sender.userId, gmIds: api.fvtt.gmUserIds() });
    // The Fate Chart's d100 rides on the card (Dice So Nice throws it once, as the asker, for the card's readers).
    await api.postCard(reply.card, { ...audience, dice: [{ faces: 100, results: [reply.roll] }], diceUserId: sender.userId });
    return relayedResult(reply.visibility, { answer: reply.answer, chance: reply.chance, roll: reply.roll });
  });
  api.onRelay(ACTIONS.SETTINGS, (request, sender) => decide({ ...request, kind: "settings" }, sender));
  api.onRelay(ACTIONS.CATALOG, () => api.request({ type: "chart_catalog_query", v: 1, event_id: api.newEventId() }));

  /** Run one action on the GM's client; a refusal is shown to this user, never thrown. */
  function relay(action, request) {
    return api.relay(id, action, request).catch((error) => {
      api.notify("error", "FATE_BRIDGE.Mythic.Refused", { message: error?.message ?? String(error) });
      return null;
    });
  }

  /**
   * Ask the Fate Chart; where the world allows physical dice for `mythic`, the asker throws the
   * chart's d100 first (M5: one d100 per question), on this client.
   */
  function ask(request) {
    const thrown = api.physicalDice(100, 1);
    if (thrown === null) return relay(ACTIONS.ASK, request);
    return thrown.then((physical) => relay(ACTIONS.ASK, { ...request, physical }), (error) => {
      api.notify("warn", "FATE_BRIDGE.Dice.PhysicalNotSent", { message: String(error?.message ?? error) });
      return null;
    });
  }

  async function changeSettings(request) {
    const applied = await relay(ACTIONS.SETTINGS, request);
    if (applied) {
      api.notify("info", "FATE_BRIDGE.Mythic.Settings", {
        odds: api.localize(`FATE_BRIDGE.Mythic.Odds.${applied.odds_questions ? "On" : "Off"}`),
        chaos: applied.chaos_factor,
      });
    }
    return applied;
  }

  let ChartDialog = null;
  /** Open the dialog (its class is made on first use, once Foundry's ApplicationV2 exists). */
  function openDialog() {
    ChartDialog ??= defineChartDialog(api, { ask, loadCatalog: () => api.relay(id, ACTIONS.CATALOG, {}) });
    return new ChartDialog().render({ force: true });
  }

  api.registerCommand(CHART_COMMAND, (args) => {
    const parsed = parseChartCommand(args, { visibility: api.fvtt.rollMode() });
    if (!parsed.ok) {
      api.notify("warn", `FATE_BRIDGE.Mythic.Error.${parsed.error}`, parsed.data);
      return false;
    }
    switch (parsed.kind) {
      case "dialog": return openDialog();
      case "help":
        api.notify("info", "FATE_BRIDGE.Mythic.Usage");
        return false;
      case "settings": return changeSettings(parsed.request);
      default: return ask(parsed.request);
    }
  });

  return { ask, openDialog };
}

/**
 * The dialog's class: an ApplicationV2 showing the catalog's form; asking closes it.
 *
 * @param {import("../../ruleset-api.js").RulesetApi} api
 * @param {{ask(request: object): Promise<unknown>, loadCatalog(): Promise<object>}} deps
 * @returns {Function} `new ChartDialog().render({force: true})` opens it
 */
function defineChartDialog(api, { ask, loadCatalog }) {
  const Base = api.fvtt.applicationV2Base();
  return class FateChartDialog extends Base {
    static DEFAULT_OPTIONS = {
      id: "fate-bridge-mythic-{id}",
      classes: [CHART_DIALOG_CLASS],
      window: { title: "FATE_BRIDGE.Mythic.Dialog.Title", icon: "fa-solid fa-dice-d20" },
      position: { width: 480 },
    };

    #catalog = null;
    #form = emptyChartForm(api.fvtt.rollMode());
    /** The request the dialog asked (resolves with the relay's summary), for callers and tests. */
    asked = null;

    async _prepareContext(options) {
      if (!this.#catalog) {
        this.#catalog = await loadCatalog().catch((error) => ({ error: error?.message ?? String(error) }));
      }
      return { catalog: this.#catalog, form: this.#form, ...(await super._prepareContext?.(options)) };
    }

    async _renderHTML({ catalog, form }) {
      const doc = api.fvtt.htmlDocument();
      if (catalog.error) {
        const unavailable = doc.createElement("p");
        unavailable.className = "notification error";
        unavailable.textContent = api.localize("FATE_BRIDGE.Mythic.Dialog.Unavailable", { message: catalog.error });
        return unavailable;
      }
      return renderChartDialog(doc, { catalog, form }, api.localize, {
        onNamedChange: (values) => {
          this.#form = values;
          this.render();
        },
        onAsk: (values) => {
          this.#form = values;
          const built = chartRequestOf(values);
          if (!built.ok) {
            api.notify("warn", `FATE_BRIDGE.Mythic.Error.${built.error}`);
            return;
          }
          this.asked = ask(built.request);
          this.close();
        },
      });
    }

    _replaceHTML(result, content) {
      content.replaceChildren(result);
    }
  };
}
