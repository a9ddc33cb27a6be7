/**
 * Fixtures built from the SoHL samples (tests/fixtures/samples/sohl/): the Basic Folk actor with the Lucky Star and
 * Blade of Destiny Fate Mysteries, owned by a player, and the Archery test card.
 */
import { sample } from "./samples.js";

/** The Archery card (sample 07 message 1) and the ids it names. */
export function archeryCard() {
  const message = sample("07-").messages[0];
  return { message, actorId: message.speaker.actor, itemId: "PLACEHOLDERarc01" };
}

/**
 * Items of the Basic Folk actor (sample 02) plus the Fate Mysteries of sample 03, with ids.
 *
 * @param {{auraEml?: number}} [options] runtime Aura EML to attach (SoHL's item.system.logic)
 */
export function basicFolkItems({ auraEml } = {}) {
  const actor = sample("02-");
  const mysteries = sample("03-").payloads.map((payload, index) => ({ ...payload, _id: `mystery0000000${index}` }));
  const fateAbility = { ...sample("06-"), _id: "fateability00001" };
  return actor.items
    .map((item) => (item.system.shortcode === "aur" && auraEml !== undefined ? { ...item, masteryLevel: { effective: auraEml, disabled: "" } } : item))
    .concat(mysteries, [fateAbility])
    .map(({ _id, ...item }) => ({ id: _id, ...item }));
}

/** @returns {any} the Basic Folk actor sample */
export function basicFolk() {
  return sample("02-");
}
