/**
 * Every ruleset the module installs, SoHL included, each through the same api. Adding one is a
 * folder `scripts/rulesets/<id>/` (its `index.js` and the logic it needs) and two lines here:
 * its import and its entry in RULESETS. Nothing in main.js changes.
 *
 * Contract of a ruleset module (`scripts/rulesets/<id>/index.js`):
 * - `export const id`: its ruleset id as the bridge spells it (`"hmtw"`, `"mythic"`, `"pool"`);
 *   lower-case letters, digits, `_` or `-`, unique among the rulesets.
 * - `export function install(api)`: called once while the module loads (before Foundry's `init`),
 *   on every client. It registers what the ruleset needs through `api` (see scripts/ruleset-api.js
 *   for the full shape, errors and guarantees) and touches Foundry only through `api.fvtt`:
 *   - `api.registerCommand(name, handler)`: chat command `/name args...` on any client;
 *   - `api.request(message)`: a bridge request, on the active GM's client only;
 *   - `api.relay(ruleset, action, data)` (any client) and `api.onRelay(action, handler, {sealed})`
 *     (runs on the active GM's client, attributed to Foundry's sender id; `sealed`: the answer
 *     reaches the asker only encrypted, logic/relay.js "Sealed replies");
 *   - `api.postCard(card, {whisper, blind, authorId, flags, dice, diceUserId})`: a bridge `card` as
 *     a new ChatMessage (its audience from logic/cards.js cardAudience: a self card is posted as its
 *     asker), its dice on it as Rolls (Dice So Nice throws them once, for its readers);
 *   - `api.physicalDice(faces, count)` (the roller's client, before relaying: null when the world
 *     allows no physical dice for this ruleset, else a Promise of the dice thrown) and
 *     `api.sendWithPhysical(physical, send)` (sends again with each further die the bridge names);
 *   - `api.onBridgeMessage(type, listener)`: unsolicited bridge frames by `type`;
 *   - `api.linked()`, `api.linkReady()`, `api.onLinkUp(listener)`: the bridge link's state, and a
 *     listener run after each `welcome`;
 *   - `api.newEventId()`, `api.isActiveGM()`, `api.localize(key, data)`, `api.notify(level, key, data)`.
 *   A ruleset whose `install` throws is skipped (logged); the others still load.
 *
 * @example
 * import * as hmtw from "./hmtw/index.js";
 * export const RULESETS = [hmtw];
 */

import * as sohl from "./sohl/index.js";
import * as pool from "./pool/index.js";
import * as mythic from "./mythic/index.js";
import * as hmtw from "./hmtw/index.js";

/** @type {Array<{id: string, install: (api: import("../ruleset-api.js").RulesetApi) => void}>} */
export const RULESETS = [sohl, pool, mythic, hmtw];
