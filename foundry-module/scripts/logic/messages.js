/**
 * Builders for the link's own messages to the bridge (wire protocol v1, see docs/protocol.md and
 * bridge/wire/control.py): `hello`, `ping` and the world `settings`. Each ruleset builds its own requests
 * in its folder (SoHL's in rulesets/sohl/messages.js). Each builder returns a plain object ready
 * for JSON.stringify, always with `v: 1`. Event ids come from an injected generator so tests can
 * predict them.
 */

/** Protocol version carried by every frame. */
export const PROTOCOL_VERSION = 1;

/** Message tags, both directions, in one place. */
export const MSG = Object.freeze({
  HELLO: "hello",
  WELCOME: "welcome",
  SETTINGS: "settings",
  SETTINGS_APPLIED: "settings_applied",
  PING: "ping",
  PONG: "pong",
  ERROR: "error",
});

/** World option values the bridge accepts (rule S12). */
export const FATE_OPTIONS = Object.freeze(["everyone", "pc_only", "off"]);

/**
 * Make the message builders.
 *
 * @param {() => string} newEventId returns a fresh, world-unique event id (at most 128 chars)
 * @returns {{
 *   hello: (p: {worldId: string, token: string, client: {module_version: string,
 *     foundry_version: string, system_id: string, system_version: string, user_name?: string,
 *     language?: string}}) => object,
 *   ping: () => object,
 *   settings: (p: {fateOption: string}) => object,
 * }}
 * `hello`'s `client.user_name` names the GM holding the link, its `client.language` (Foundry's
 * `game.i18n.lang`) is the language the bridge writes the world's cards in. `settings` throws a
 * TypeError for a fate option outside FATE_OPTIONS.
 */
export function messageBuilders(newEventId) {
  return {
    hello: ({ worldId, token, client }) => ({ type: MSG.HELLO, v: PROTOCOL_VERSION, world_id: worldId, token, client }),
    ping: () => ({ type: MSG.PING, v: PROTOCOL_VERSION }),
    settings: ({ fateOption }) => {
      if (!FATE_OPTIONS.includes(fateOption)) {
        throw new TypeError(`fate option ${JSON.stringify(fateOption)} is not one of ${FATE_OPTIONS.join(", ")}`);
      }
      return { type: MSG.SETTINGS, v: PROTOCOL_VERSION, event_id: newEventId(), fate_option: fateOption };
    },
  };
}
