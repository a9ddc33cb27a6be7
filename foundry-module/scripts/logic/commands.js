/**
 * Chat commands (`/name args...`) of this module and its rulesets, read from Foundry's
 * `chatMessage` hook. Foundry v13 passes the typed text as is; v14 passes the editor's HTML
 * (`<p>/fateaudit</p>`, entities escaped), which is read back as text before parsing.
 */

/** A command name: a lower-case word. */
const COMMAND_NAME = /^[a-z][a-z0-9_-]{0,31}$/;
/** `/name` then optional whitespace-separated arguments. */
const COMMAND_TEXT = /^\/([A-Za-z][\w-]*)(?:\s+([\s\S]*))?$/;

/**
 * Foundry's own chat commands (ChatLog): registering one of these would take it away from Foundry.
 */
export const FOUNDRY_COMMANDS = Object.freeze([
  "r", "roll", "pr", "proll", "publicroll", "gmr", "gmroll", "br", "broll", "blindroll", "sr", "sroll", "selfroll",
  "ic", "ooc", "em", "emote", "me", "w", "whisper", "reply", "gm", "players", "macro",
]);

/**
 * @param {unknown} text the chat text the `chatMessage` hook received
 * @param {{parseFromString(text: string, type: string): Document}} domParser reads v14's HTML
 * @returns {{name: string, args: string}|null} the command (name lower-cased, arguments trimmed,
 *   "" when none), or null when the text is not a `/command`
 */
export function parseChatCommand(text, domParser) {
  if (typeof text !== "string") return null;
  let plain = text.trim();
  if (/^<p[\s>]/i.test(plain)) plain = (domParser.parseFromString(plain, "text/html").body.textContent ?? "").trim();
  const match = COMMAND_TEXT.exec(plain);
  return match ? { name: match[1].toLowerCase(), args: (match[2] ?? "").trim() } : null;
}

/**
 * @typedef {(args: string, context: {userId: string, isGM: boolean}) => unknown} CommandHandler
 *   returns false to keep the text out of chat; a Promise keeps it out too (Foundry's hook cannot
 *   wait for it); anything else lets Foundry handle the text as usual
 */

/**
 * The registered commands.
 *
 * @param {object} deps
 * @param {{parseFromString(text: string, type: string): Document}} deps.domParser
 * @param {(error: unknown, name: string) => void} deps.onError a handler threw or its Promise
 *   rejected (the text stays out of chat)
 * @returns {{register(name: string, handler: CommandHandler): void,
 *   handle(text: unknown, context: {userId: string, isGM: boolean}): false|undefined}}
 *   `register` throws a TypeError for a name that is not a lower-case word, is Foundry's or is
 *   taken; `handle` returns false when a registered command consumed the text (the hook's answer
 *   to Foundry), undefined otherwise
 */
export function createCommandRegistry({ domParser, onError }) {
  /** @type {Map<string, CommandHandler>} */
  const commands = new Map();
  return {
    register(name, handler) {
      if (typeof name !== "string" || !COMMAND_NAME.test(name)) {
        throw new TypeError(`a chat command name is a lower-case word ([a-z][a-z0-9_-]*, at most 32), got ${JSON.stringify(name)}`);
      }
      if (FOUNDRY_COMMANDS.includes(name)) throw new TypeError(`/${name} is one of Foundry's own chat commands`);
      if (commands.has(name)) throw new TypeError(`/${name} is already registered`);
      if (typeof handler !== "function") throw new TypeError(`the handler of /${name} is not a function`);
      commands.set(name, handler);
    },
    handle(text, context) {
      const command = parseChatCommand(text, domParser);
      const handler = command && commands.get(command.name);
      if (!handler) return undefined;
      let result;
      try {
        result = handler(command.args, context);
      } catch (error) {
        onError(error, command.name);
        return false;
      }
      if (typeof result?.then === "function") {
        Promise.resolve(result).catch((error) => onError(error, command.name));
        return false;
      }
      return result === false ? false : undefined;
    },
  };
}
