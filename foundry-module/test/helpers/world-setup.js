/**
 * A fake world with the Basic Folk actor (owned by a player), a GM, the player, another player,
 * and the Archery card as a ChatMessage.
 */
import { installFakeFoundry } from "./fake-foundry.js";
import { FakeClock, fakeWebSocketClass } from "./fake-socket.js";
import { archeryCard, basicFolk, basicFolkItems } from "./sohl-fixtures.js";
import { captured, sample } from "./samples.js";

/**
 * @param {object} [options] passed to installFakeFoundry
 * @returns {Promise<{world: object, gm: string, player: string, stranger: string, actor: object, messageId: string}>}
 */
export async function sampleWorld(options = {}) {
  const world = installFakeFoundry(options);
  const gm = world.addUser({ id: "gmUser000000001", name: "Gamemaster", isGM: true });
  const player = world.addUser({ id: "playerUser00001", name: "Player One" });
  const stranger = world.addUser({ id: "strangerUser001", name: "Player Two" });
  world.activeGMId = gm;
  world.asUser(gm);
  const actor = world.addActor({
    id: basicFolk()._id,
    name: basicFolk().name,
    hasPlayerOwner: true,
    ownership: { [player]: 3 },
    items: basicFolkItems({ auraEml: 55 }),
  });
  return { world, gm, player, stranger, actor };
}

/** The global timers as they were before any test replaced them (see restoreTimers). */
const REAL_TIMERS = { setTimeout: globalThis.setTimeout, clearTimeout: globalThis.clearTimeout };

/**
 * sampleWorld with a fake WebSocket class (`env.Socket`, its `instances`) and a FakeClock
 * (`env.clock`) installed as the global setTimeout/clearTimeout; undo with restoreTimers().
 *
 * @param {object} [settings] the world settings (default: the token "secret")
 * @param {{diceSoNice?: boolean}} [options] pretend Dice So Nice is active (installFakeFoundry)
 */
export async function clockedWorld(settings = { "fate-bridge.token": "secret" }, { diceSoNice = false } = {}) {
  const Socket = fakeWebSocketClass();
  const env = await sampleWorld({ WebSocket: Socket, settings, diceSoNice });
  env.Socket = Socket;
  env.clock = new FakeClock();
  globalThis.setTimeout = env.clock.setTimeout;
  globalThis.clearTimeout = env.clock.clearTimeout;
  return env;
}

/** Put the real global timers back (after clockedWorld). */
export function restoreTimers() {
  Object.assign(globalThis, REAL_TIMERS);
}

/** Post the Archery card as `userId` (fires createChatMessage). */
export async function postArchery(world) {
  const message = await world.createMessage(structuredClone(archeryCard().message));
  return message.id;
}

/** The users and actor the captured SoHL messages name (samples/sohl/captured/). */
export const CAPTURED_IDS = Object.freeze({ gm: "GmUser7fK2pQ9xLb", player: "PlyrX4q8Wm2Tn5Rz", actor: "AldricKaldor0001", item: "ArcherySkill0001" });

/**
 * A fake world for the captured SoHL messages: their GM and player, another player, and the
 * actor they test (Aldric of Kaldor, owned by the player) with the Archery skill (sample 04,
 * under the captured item id), Aura and the Fate Mysteries of sample 03.
 *
 * @param {object} [options] passed to installFakeFoundry
 */
export async function capturedWorld(options = {}) {
  const world = installFakeFoundry(options);
  const gm = world.addUser({ id: CAPTURED_IDS.gm, name: "Gamemaster", isGM: true });
  const player = world.addUser({ id: CAPTURED_IDS.player, name: "Player One" });
  const stranger = world.addUser({ id: "strangerUser001", name: "Player Two" });
  world.activeGMId = gm;
  world.asUser(gm);
  const { _id, ...skill } = sample("04-");
  const archery = { ...skill, id: CAPTURED_IDS.item };
  const actor = world.addActor({
    id: CAPTURED_IDS.actor,
    name: "Aldric of Kaldor",
    hasPlayerOwner: true,
    ownership: { [player]: 3 },
    items: [...basicFolkItems({ auraEml: 60 }).filter((item) => !(item.type === "skill" && item.system.shortcode === "archery")), archery],
  });
  return { world, gm, player, stranger, actor };
}

/**
 * Post a captured SoHL message as Foundry keeps it (content, whisper, blind, author), firing
 * createChatMessage.
 *
 * @param {object} world
 * @param {string} name the captured case (see samples.js captured)
 * @returns {Promise<string>} the new message's id
 */
export async function postCaptured(world, name) {
  const { content, whisper, blind, author, speaker } = captured(name).reconstructedPersistedChatMessage;
  const message = await world.createMessage({ content, whisper, blind, author, speaker });
  return message.id;
}
