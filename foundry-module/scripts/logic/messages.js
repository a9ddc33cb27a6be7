/**
 * Builders for every message the module sends to the bridge (wire protocol v1, see
 * docs/protocol.md and bridge/wire.py). Each builder returns a plain object ready for
 * JSON.stringify, always with `v: 1`. Event ids come from an injected generator so tests
 * can predict them.
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
  TEST_ROLLED: "test_rolled",
  TEST_GRADED: "test_graded",
  FATE_SPEND: "fate_spend",
  FATE_CHOICE: "fate_choice",
  FATE_RESOLVED: "fate_resolved",
});

/** World option values the bridge accepts (rule S12). */
export const FATE_OPTIONS = Object.freeze(["everyone", "pc_only", "off"]);

/** The two answers to a Fate Test critical success (rule S9). */
export const CHOICES = Object.freeze(["spend", "keep"]);

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
 *   testRolled: (p: {messageId: string, actor: object, test: object, visibility: string}) => object,
 *   fateSpend: (p: {messageId: string, pointId: string, userId: string, userName?: string, userIsGM: boolean}) => object,
 *   fateChoice: (p: {messageId: string, choice: string, userId: string, userName?: string, userIsGM: boolean}) => object,
 * }}
 * `userIsGM` is Foundry's `user.isGM` for `userId` (the bridge lets a GM act for any actor and
 * answer any choice); `hello`'s `client.user_name` names the GM holding the link, its
 * `client.language` (Foundry's `game.i18n.lang`) is the language the bridge writes the world's cards in.
 * `settings` throws a TypeError for a fate option outside FATE_OPTIONS, `fateChoice` for a
 * choice outside CHOICES.
 */
export function messageBuilders(newEventId) {
  const withName = (message, userName) => (userName ? { ...message, user_name: userName } : message);
  return {
    hello: ({ worldId, token, client }) => ({ type: MSG.HELLO, v: PROTOCOL_VERSION, world_id: worldId, token, client }),
    ping: () => ({ type: MSG.PING, v: PROTOCOL_VERSION }),
    settings: ({ fateOption }) => {
      if (!FATE_OPTIONS.includes(fateOption)) {
        throw new TypeError(`fate option ${JSON.stringify(fateOption)} is not one of ${FATE_OPTIONS.join(", ")}`);
      }
      return { type: MSG.SETTINGS, v: PROTOCOL_VERSION, event_id: newEventId(), fate_option: fateOption };
    },
    testRolled: ({ messageId, actor, test, visibility }) => ({
      type: MSG.TEST_ROLLED,
      v: PROTOCOL_VERSION,
      event_id: newEventId(),
      ruleset: "sohl",
      message_id: messageId,
      actor,
      test,
      visibility,
    }),
    fateSpend: ({ messageId, pointId, userId, userName, userIsGM }) =>
      withName(
        {
          type: MSG.FATE_SPEND, v: PROTOCOL_VERSION, event_id: newEventId(), message_id: messageId, point_id: pointId, user_id: userId,
          user_is_gm: userIsGM === true,
        },
        userName,
      ),
    fateChoice: ({ messageId, choice, userId, userName, userIsGM }) => {
      if (!CHOICES.includes(choice)) {
        throw new TypeError(`choice ${JSON.stringify(choice)} is not one of ${CHOICES.join(", ")}`);
      }
      return withName(
        {
          type: MSG.FATE_CHOICE, v: PROTOCOL_VERSION, event_id: newEventId(), message_id: messageId, choice, user_id: userId,
          user_is_gm: userIsGM === true,
        },
        userName,
      );
    },
  };
}

/** SoHL's world setting `sohl.optionFate` -> the bridge's fate option. */
export const SOHL_FATE_OPTION = Object.freeze({ none: "off", pconly: "pc_only", everyone: "everyone" });

/**
 * The fate option to send in `settings`.
 *
 * @param {string} moduleOption this module's `fateOption` setting: `system`, `everyone`, `pc_only` or `off`
 * @param {unknown} sohlOption SoHL's `optionFate` world setting (read only for `system`)
 * @returns {"everyone"|"pc_only"|"off"} `system` follows SoHL (`none` -> off, `pconly` -> pc_only,
 *   `everyone` -> everyone, anything else -> everyone, the bridge's default)
 */
export function resolveFateOption(moduleOption, sohlOption) {
  if (FATE_OPTIONS.includes(moduleOption)) return moduleOption;
  return Object.hasOwn(SOHL_FATE_OPTION, sohlOption) ? SOHL_FATE_OPTION[sohlOption] : "everyone";
}
