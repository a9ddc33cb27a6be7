/**
 * Foundry's entry point (module.json `esmodules`): install the module, with every ruleset of
 * scripts/rulesets/index.js, once per page load. The wiring lives in main.js.
 */

import { install } from "./main.js";

/** The live module: `bridge.connection()` is the bridge connection or null; see main.js install(). */
export const bridge = install();
