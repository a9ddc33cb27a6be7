/**
 * The test fixtures copied into the repository: `<repo>/tests/fixtures/samples/` (see its README for
 * each sample's provenance and licence). The Python tests read the same folder (tests/helpers.py).
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
export const SAMPLES_ROOT = path.join(REPO, "tests/fixtures/samples");
export const SAMPLES_DIR = path.join(SAMPLES_ROOT, "sohl");

/**
 * @param {string} relative a path under tests/fixtures/samples/, e.g. "foundry/d20-v13-dnd5e-attack-1d20.json"
 * @returns {any} the parsed sample
 * @throws {Error} naming the file expected when it is absent
 */
export function readSample(relative) {
  const file = path.join(SAMPLES_ROOT, relative);
  if (!existsSync(file)) throw new Error(`sample not found: expected ${file} (tests/fixtures/samples/ in the repository)`);
  return JSON.parse(readFileSync(file, "utf8"));
}

/**
 * @param {string} prefix a SoHL sample file name's start, e.g. "07-"
 * @returns {any} the parsed sample
 * @throws {Error} naming where the samples were expected when none matches
 */
export function sample(prefix) {
  const name = existsSync(SAMPLES_DIR) && readdirSync(SAMPLES_DIR).find((file) => file.startsWith(prefix));
  if (!name) throw new Error(`no SoHL sample starting with ${prefix} in ${SAMPLES_DIR}`);
  return readSample(`sohl/${name}`);
}

/** @param {string} name a file in samples/foundry/ @returns {any} the parsed Foundry capture */
export const foundrySample = (name) => readSample(`foundry/${name}`);

/** @param {string} name a file in samples/hmtw/ @returns {any} the parsed His Majesty the Worm sample */
export const hmtwSample = (name) => readSample(`hmtw/${name}`);

/** SoHL chat messages made by SoHL's own code (samples/sohl/captured/, its README in samples/README.md). */
export const CAPTURED_DIR = path.join(SAMPLES_DIR, "captured");

/**
 * @param {string} name the case, e.g. "skill-test-gmroll-core-setting" for
 *   `sohl-v14-skill-test-gmroll-core-setting.captured.json`
 * @returns {{_provenance: object, chatMessageCreateData: object, reconstructedPersistedChatMessage: object}}
 * @throws {Error} naming the file expected when it is absent
 */
export function captured(name) {
  const file = path.join(CAPTURED_DIR, `sohl-v14-${name}.captured.json`);
  if (!existsSync(file)) throw new Error(`captured SoHL sample not found: expected ${file}`);
  return JSON.parse(readFileSync(file, "utf8"));
}
