/**
 * The smallest fake of Song of Heroic Lands' own Fate routes, on top of fake-foundry.js. It
 * follows SoHL 0.8.2 (HeroicLands/Song-of-Heroic-Lands-FoundryVTT, commit 37af8d1e):
 * - `sohl.document.item.logic.{SkillLogic, AttributeLogic}` put on the `sohl` global at SoHL's
 *   `init` (src/sohl.ts), each with `fateTest(context)` -> `performFateTest(this, context)`
 *   (SkillLogic.ts, AttributeLogic.ts);
 * - `performFateTest` (fate-host.ts): Fate withheld -> nothing; no charged point -> a warning;
 *   otherwise the Fate Test d100, a Mystery's charge spent (`system.charges.value` - 1), the
 *   original test reposted with its level raised (when there is one) and SoHL's Fate card posted
 *   (the captured `fate-reposted-test` and `fate-test-card`);
 * - each item's logic built while the world's Documents are prepared, with its intrinsic action
 *   `fateTest` whose executor is `logic.fateTest` bound then (src/entity/action/SohlAction.ts:
 *   `this.executor = func.bind(target)`), run by `dispatchChatCardAction` for a card's button
 *   (src/document/chat/chat-card-dispatch.ts);
 * - the being sheet's Skills tab: a row per skill (`data-item-id`) with a Fate cell
 *   `data-action="fateTest"`, an ApplicationV2 whose click on `[data-action]` runs
 *   `options.actions[action].call(sheet, event, target)`; `fateTest` is `_onRollFateTest`, which
 *   finds the row's item and calls `item.logic.fateTest(context)` (BeingSheet.ts).
 */
import { FakeApplicationV2 } from "./fake-foundry.js";
import { captured } from "./samples.js";

/** SoHL's Fate host: what SkillLogic and AttributeLogic share for Fate. */
class FakeFateHost {
  constructor(item, actor, sohl) {
    this.item = item;
    this.actor = actor;
    this.sohl = sohl;
    // An intrinsic action binds its executor as it is built (SohlAction.ts).
    const executor = this.fateTest;
    this.actions = new Map([["fateTest", { execute: (context) => executor.bind(this)(context) }]]);
  }
  async fateTest(context) {
    return this.sohl.document.item.logic.performFateTest(this, context);
  }
}

/**
 * Install the fake SoHL on `world` (a fake-foundry world): the `sohl` global appears at `init`,
 * as SoHL's own `init` hook puts it there.
 *
 * @param {object} world from installFakeFoundry
 * @param {{fateDie?: number}} [options] the Fate Test's d100 (SoHL's own roll)
 * @returns {{prepareDocuments(): void, dispatchChatCardAction(logic: object, action: string, scope?: object): Promise<void>,
 *   BeingSheet: typeof FakeApplicationV2, fateTests: object[]}} `prepareDocuments` builds each
 *   actor's item logic (Foundry does it between `i18nInit` and `setup`); `fateTests` lists what
 *   SoHL's own Fate Tests did
 */
export function installFakeSohl(world, { fateDie = 23 } = {}) {
  const fateTests = [];
  class SkillLogic extends FakeFateHost {}
  class AttributeLogic extends FakeFateHost {}

  async function performFateTest(host, context) {
    const mystery = [...host.actor.items.values()].find((item) => item.type === "mystery" && item.system.subType === "fate" && (item.system.charges?.value ?? 0) > 0);
    if (!mystery) {
      globalThis.ui.notifications.warn(`No Fate points available for ${host.item.name}.`);
      return;
    }
    await mystery.update({ "system.charges.value": mystery.system.charges.value - 1 });
    if (context?.scope?.priorTestResult) {
      const repost = captured("fate-reposted-test").reconstructedPersistedChatMessage;
      await world.createMessage({ content: repost.content, whisper: repost.whisper, blind: repost.blind });
    }
    const card = captured("fate-test-card").reconstructedPersistedChatMessage;
    await world.createMessage({ content: card.content, whisper: card.whisper, blind: card.blind });
    fateTests.push({ itemId: host.item.id, die: fateDie, mysteryId: mystery.id });
  }

  globalThis.Hooks.once("init", () => {
    globalThis.sohl = { document: { item: { logic: { SkillLogic, AttributeLogic, performFateTest } } } };
  });

  class BeingSheet extends FakeApplicationV2 {
    static DEFAULT_OPTIONS = { ...FakeApplicationV2.DEFAULT_OPTIONS, actions: { fateTest: BeingSheet._onRollFateTest } };
    constructor({ document }) {
      super({});
      this.document = document;
    }
    static async _onRollFateTest(event, target) {
      const itemId = target.closest("[data-item-id]")?.getAttribute("data-item-id");
      const logic = itemId ? this.document.items.get(itemId)?.logic : undefined;
      if (typeof logic?.fateTest !== "function") return;
      await logic.fateTest({ speaker: { actor: this.document.id }, type: "fate-test", skipDialog: event.shiftKey });
    }
    async _renderHTML() {
      const rows = [...this.document.items.values()].filter((item) => item.type === "skill")
        .map((item) => `<li class="ledger__row" data-item-id="${item.id}"><span>${item.name}</span><a class="fate" data-action="fateTest">Fate</a></li>`);
      return `<section class="tab skills"><ol class="skills-ledger">${rows.join("")}</ol></section>`;
    }
    _replaceHTML(html, content) {
      content.innerHTML = html;
    }
    _onFirstRender() {
      // ApplicationV2 listens once on its element and dispatches `[data-action]` clicks to options.actions.
      this.element.addEventListener("click", (event) => {
        const target = event.target.closest("[data-action]");
        const handler = target ? this.options.actions?.[target.dataset.action] : undefined;
        if (handler) this.lastAction = handler.call(this, event, target);
      });
    }
  }

  return {
    BeingSheet,
    fateTests,
    prepareDocuments() {
      const { SkillLogic: Skill, AttributeLogic: Attribute } = globalThis.sohl.document.item.logic;
      for (const actor of world.actors.values()) {
        for (const item of actor.items.values()) {
          if (item.type === "skill") item.logic = new Skill(item, actor, globalThis.sohl);
          if (item.type === "attribute") item.logic = new Attribute(item, actor, globalThis.sohl);
        }
      }
    },
    /** A card button's click as dispatchChatCardAction runs it: the logic's action by name, else its method. */
    async dispatchChatCardAction(logic, action, scope = {}) {
      const context = { type: action, scope };
      const found = logic.actions.get(action);
      if (found) return found.execute(context);
      return logic[action](context);
    },
  };
}

/** Remove the fake SoHL global (call in afterEach, with uninstallFakeFoundry). */
export function uninstallFakeSohl() {
  delete globalThis.sohl;
}
