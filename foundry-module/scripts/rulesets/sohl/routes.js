/**
 * No route to Fate around the bridge: SoHL's own ways to spend Fate are closed in a
 * world this module serves, with a one-line notice naming where Fate is spent now.
 *
 * SoHL 0.8.x (HeroicLands/Song-of-Heroic-Lands-FoundryVTT, read at v0.8.0 and 0.8.2, commit
 * 37af8d1e) has three Fate entries, and all of them end in one method, `fateTest(context)`, of
 * its two Fate hosts `SkillLogic` and `AttributeLogic` (src/document/item/logic/SkillLogic.ts,
 * AttributeLogic.ts; both call `performFateTest` in fate-host.ts, which rolls SoHL's Fate Test,
 * spends a Mystery's charge and reposts the test):
 * - the Fate cell of the character sheet's skill list, `data-action="fateTest"`: the sheet's
 *   ApplicationV2 action `BeingSheet._onRollFateTest` calls `item.logic.fateTest(context)`
 *   (src/document/actor/foundry/BeingSheet.ts);
 * - the Fate button on a test card (hidden by card-ui.js): `dispatchChatCardAction` runs the
 *   item's intrinsic action `fateTest`, whose executor is `logic.fateTest` bound when the logic
 *   is built (src/document/chat/chat-card-dispatch.ts, src/entity/action/SohlAction.ts), or
 *   calls `logic.fateTest` itself;
 * - a macro calling `item.logic.fateTest(...)`.
 * SoHL puts its namespaces on the `sohl` global at its `init` (src/sohl.ts: `system.document =
 * documentNs`), so the classes are `sohl.document.item.logic.SkillLogic` / `.AttributeLogic`.
 * Replacing `fateTest` on their prototypes at Foundry's `i18nInit` hook closes all three, on
 * every render of the sheet and every card, whatever the Foundry version (v13 or v14): nothing
 * here depends on the sheet's DOM. `i18nInit` runs after every package's `init` (so `sohl` is
 * there) and before `setup`, which fires once the world's Documents are initialized (Foundry API
 * v13/v14, hookEvents.i18nInit and hookEvents.setup): SoHL's item logic, and the intrinsic
 * actions that bind `logic.fateTest` as they are built, come after the replacement.
 *
 * SoHL's world option `sohl.optionFate` is left alone on purpose: this module reads it as the
 * world's Fate option (S12, `fateOption` = `system`), so turning it off to close SoHL's routes
 * would switch the bridge's Fate off too. What stays open: `sohl.document.item.logic.performFateTest`
 * called directly (an ES module export, not replaceable); a Fate Test made that way, or by a client
 * without this module, is recognised from what SoHL posts and recorded as fated outside the bridge
 * (bridge/rulesets/sohl/decide.py, rule S11 and docs/rules.md).
 */

/** SoHL's Fate hosts (dotted paths from `globalThis`) and the method every Fate entry ends in. */
export const SOHL_FATE_HOSTS = Object.freeze(["sohl.document.item.logic.SkillLogic", "sohl.document.item.logic.AttributeLogic"]);
export const SOHL_FATE_METHOD = "fateTest";

/** The notice a closed route shows: where Fate is spent now. */
export const ROUTE_CLOSED_KEY = "FATE_BRIDGE.Sohl.FateRouteClosed";
/** The GM's warning when this SoHL version exposes no Fate host to close. */
export const ROUTE_OPEN_KEY = "FATE_BRIDGE.Sohl.FateRouteOpen";

/**
 * Close SoHL's Fate routes.
 *
 * @param {object} deps
 * @param {(path: string, method: string, makeReplacement: (original: Function) => Function) => boolean} deps.wrapClassMethod
 *   scripts/foundry.js wrapClassMethod
 * @param {(level: "info"|"warn"|"error", key: string, data?: object) => void} deps.notify shows a
 *   notice to this client's user
 * @returns {{closed: string[], open: string[]}} the hosts whose `fateTest` now only says where Fate
 *   is spent (it resolves undefined, as SoHL's does when Fate is unavailable, and spends nothing),
 *   and those not found (their route stays open: the caller warns the GM)
 */
export function closeSohlFateRoutes({ wrapClassMethod, notify }) {
  const closed = [];
  const open = [];
  for (const host of SOHL_FATE_HOSTS) {
    const done = wrapClassMethod(host, SOHL_FATE_METHOD, () => async function fateTestThroughBridge() {
      notify("info", ROUTE_CLOSED_KEY);
    });
    (done ? closed : open).push(host);
  }
  return { closed, open };
}
