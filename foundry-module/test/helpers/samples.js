/**
 * The shared SoHL samples: `<repo>/../shared/samples/sohl/` (beside the repo clone, as in CI).
 */
import { existsSync, readFileSync, readdirSync } from "node:fs";
import { fileURLToPath } from "node:url";
import path from "node:path";

const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
export const SAMPLES_DIR = path.resolve(REPO, "../shared/samples/sohl");

/**
 * @param {string} prefix the file name's start, e.g. "07-"
 * @returns {any} the parsed sample
 * @throws {Error} naming where the samples were expected when they are absent
 */
export function sample(prefix) {
  if (!existsSync(SAMPLES_DIR)) {
    throw new Error(`SoHL samples not found: expected them in ${SAMPLES_DIR} (shared/ beside the repository clone)`);
  }
  const name = readdirSync(SAMPLES_DIR).find((file) => file.startsWith(prefix));
  if (!name) throw new Error(`no sample starting with ${prefix} in ${SAMPLES_DIR}`);
  return JSON.parse(readFileSync(path.join(SAMPLES_DIR, name), "utf8"));
}

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
