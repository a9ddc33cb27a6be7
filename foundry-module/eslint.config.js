/**
 * ESLint's flat configuration for the Foundry module (`npm run lint`, run by ../run-tests).
 *
 * The module's architecture (docs/architecture.md) as lint rules: scripts/foundry.js is the one
 * file that reads Foundry's globals and the browser's; every other script sees only what Node and
 * the browser share (timers, console, URL, TextEncoder...), so scripts/logic/ and the rulesets
 * load in `node --test` unchanged, and anything else comes in as a parameter. Tests run in Node;
 * the functions a browser test hands to Playwright's `page.evaluate` run in the page.
 */

import js from "@eslint/js";
import globals from "globals";

/** Foundry's globals, defined in scripts/foundry.js alone. */
const FOUNDRY_GLOBALS = ["game", "ui", "Hooks", "CONFIG", "CONST", "foundry", "ChatMessage", "Roll", "canvas", "fromUuid", "fromUuidSync"];

/** Browser facilities Node has too: outside the shim they come in as parameters (main.js passes fvtt's). */
const SHIM_FACILITIES = ["WebSocket", "crypto", "fetch", "localStorage", "sessionStorage", "navigator"];

const SHIM_ONLY = "Only scripts/foundry.js reads Foundry's and the browser's globals (docs/architecture.md): add a helper there, or take it as a parameter.";

export default [
  js.configs.recommended,
  {
    rules: {
      // `const { dropped, ...kept } = value` is how a field is left out.
      "no-unused-vars": ["error", { ignoreRestSiblings: true }],
    },
  },
  {
    files: ["scripts/**/*.js"],
    ignores: ["scripts/foundry.js"],
    languageOptions: { globals: globals["shared-node-browser"] },
    rules: {
      "no-restricted-globals": [
        "error",
        ...[...FOUNDRY_GLOBALS, ...SHIM_FACILITIES, "globalThis", "window", "self", "document"].map((name) => ({ name, message: SHIM_ONLY })),
      ],
    },
  },
  {
    files: ["scripts/foundry.js"],
    languageOptions: {
      globals: { ...globals.browser, ...Object.fromEntries(FOUNDRY_GLOBALS.map((name) => [name, "readonly"])) },
    },
  },
  {
    files: ["test/**/*.js", "bench/**/*.js", "eslint.config.js"],
    languageOptions: { globals: globals.node },
  },
  {
    // Run in a Chromium page: the browser tests' page.evaluate functions, the click bench's, and
    // the fake Foundry client a page loads (test/helpers/foundry-page.js).
    files: ["test/*-browser.test.js", "bench/**/*.js", "test/helpers/foundry-page.js"],
    languageOptions: { globals: globals.browser },
  },
];
