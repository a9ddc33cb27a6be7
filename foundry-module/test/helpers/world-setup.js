/**
 * A fake world with the Basic Folk actor (owned by a player), a GM, the player, another player,
 * and the Archery card as a ChatMessage.
 */
import { installFakeFoundry } from "./fake-foundry.js";
import { archeryCard, basicFolk, basicFolkItems } from "./sohl-fixtures.js";

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

/** Post the Archery card as `userId` (fires createChatMessage). */
export async function postArchery(world) {
  const message = await world.createMessage(structuredClone(archeryCard().message));
  return message.id;
}
