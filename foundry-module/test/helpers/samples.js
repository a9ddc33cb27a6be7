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
