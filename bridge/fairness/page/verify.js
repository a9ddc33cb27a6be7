/**
 * fate-bridge dice check, in the browser (WebCrypto) or Node: check the chain of an exported trail and
 * recompute every die of every revealed dice session of it (`fate-bridge audit export --format jsonl`) from the trail and
 * the revealed seed alone, and check each seed against the commitment posted before the rolls.
 * The same recipe as bridge/fairness/dice.py (derive_die) and checks as bridge/fairness/trail.py
 * (check_dice): HMAC-SHA256(seed, "fate-bridge die v1\n" world "\n" seq "\n" index "\n" faces "\n"
 * client_seed "\n" attempt), first 4 bytes big-endian, rejection sampling against modulo bias.
 */

const encoder = new TextEncoder();
const RANGE = 2 ** 32;

/** @param {string} hex @returns {Uint8Array} */
function fromHex(hex) {
  if (!/^([0-9a-f]{2})*$/.test(hex)) throw new Error("not hex");
  return Uint8Array.from(hex.match(/../g) ?? [], (pair) => parseInt(pair, 16));
}

/** @param {ArrayBuffer} buffer @returns {string} */
function toHex(buffer) {
  return Array.from(new Uint8Array(buffer), (b) => b.toString(16).padStart(2, "0")).join("");
}

/**
 * The die of `faces` sides at draw `index` of record `seq` of `worldId`.
 * @param {CryptoKey} key the seed as an HMAC-SHA-256 key (see seedKey)
 * @returns {Promise<number>} in 1..faces
 */
export async function deriveDie(key, clientSeed, worldId, seq, index, faces) {
  const limit = RANGE - (RANGE % faces);
  const prefix = `fate-bridge die v1\n${worldId}\n${seq}\n${index}\n${faces}\n${clientSeed}\n`;
  for (let attempt = 0; ; attempt += 1) {
    const digest = await crypto.subtle.sign("HMAC", key, encoder.encode(prefix + attempt));
    const x = new DataView(digest).getUint32(0, false);
    if (x < limit) return (x % faces) + 1;
  }
}

/** @param {string} seedHex @returns {Promise<CryptoKey>} */
export function seedKey(seedHex) {
  return crypto.subtle.importKey("raw", fromHex(seedHex), { name: "HMAC", hash: "SHA-256" }, false, ["sign"]);
}

/**
 * Check an exported trail (JSON lines, each `{record, prev_hash, hash, ...}`): its chain (hashes and
 * links, as bridge/audit.py chains records) and its dice.
 * @param {string} text the export
 * @returns {Promise<{problems: {seq: number, detail: string}[], notes: string[], verified: number,
 *   sessions: {sessionId: string, fingerprint: string, startSeq: number|null, revealSeq: number|null, fair: number, ok: boolean}[]}>}
 */
export async function checkTrail(text) {
  const rows = text.split("\n").filter((line) => line.trim()).map((line, i) => {
    let row;
    try {
      row = JSON.parse(line);
    } catch {
      throw new Error(`line ${i + 1} of the export is not JSON`);
    }
    if (!row?.record || typeof row.record.seq !== "number") throw new Error(`line ${i + 1} of the export is not an audit record`);
    return row;
  }).sort((a, b) => (a.record.world_id === b.record.world_id ? a.record.seq - b.record.seq : a.record.world_id < b.record.world_id ? -1 : 1));
  const records = rows.map((row) => row.record);
  const problems = await chainProblems(rows);
  const notes = [];
  const sessions = new Map();
  const session = (id) => {
    if (!sessions.has(id)) sessions.set(id, { sessionId: id, commitment: null, startSeq: null, revealSeq: null, seed: null, fair: 0, ok: true });
    return sessions.get(id);
  };
  for (const record of records) {
    if (!record.ok || (record.type !== "dice_session_start" && record.type !== "dice_session_end")) continue;
    const found = session(record.reply.session_id);
    if (record.type === "dice_session_start") {
      found.commitment = record.reply.commitment;
      found.startSeq = record.seq;
    } else {
      found.seed = record.reply.seed;
      found.revealSeq = record.seq;
      if (record.reply.commitment !== found.commitment) {
        problems.push({ seq: record.seq, detail: `record ${record.seq}: the reveal of dice session ${found.sessionId} names another commitment than its start record posted` });
      }
    }
  }
  for (const found of sessions.values()) {
    if (found.seed === null) continue;
    let hash = "";
    try {
      hash = toHex(await crypto.subtle.digest("SHA-256", fromHex(found.seed)));
    } catch { /* not hex: fails below */ }
    if (hash !== found.commitment || (found.commitment ?? "").slice(0, 16) !== found.sessionId) {
      const where = found.startSeq ?? found.revealSeq ?? 0;
      problems.push({ seq: where, detail: `record ${where}: the commitment of dice session ${found.sessionId} does not match the seed revealed at record ${found.revealSeq}` });
      found.seed = null;
      found.ok = false;
    } else {
      found.key = await seedKey(found.seed);
    }
  }
  let verified = 0;
  const waiting = new Map();
  for (const record of records) {
    const draws = record.draws ?? [];
    if (!draws.length) continue;
    for (const [index, draw] of draws.entries()) {
      if (draw.source === "secret" && record.dice_session !== null && record.dice_session !== undefined) {
        problems.push({ seq: record.seq, detail: `record ${record.seq}: die ${index + 1} is marked secret inside dice session ${record.dice_session}, where every die is derived` });
      }
    }
    if (draws.length !== record.dice.length) {
      problems.push({ seq: record.seq, detail: `record ${record.seq}: ${record.dice.length} dice but ${draws.length} draws` });
      continue;
    }
    const clientSeed = record.message.client_seed ?? "";
    for (const [index, draw] of draws.entries()) {
      if (draw.source !== "fair") continue;
      const found = sessions.get(record.dice_session);
      if (!found || found.startSeq === null) {
        problems.push({ seq: record.seq, detail: `record ${record.seq}: die ${index + 1} is marked fair but no dice session ${record.dice_session} was committed before it` });
        continue;
      }
      found.fair += 1;
      if (record.seq < found.startSeq) {
        problems.push({ seq: record.seq, detail: `record ${record.seq}: die ${index + 1} was rolled before dice session ${found.sessionId} was committed (record ${found.startSeq})` });
      }
      if (!found.key) {
        waiting.set(found.sessionId, (waiting.get(found.sessionId) ?? 0) + 1);
        continue;
      }
      const expected = await deriveDie(found.key, clientSeed, record.world_id, record.seq, index, draw.faces);
      if (expected !== record.dice[index]) {
        found.ok = false;
        problems.push({ seq: record.seq, detail: `record ${record.seq}: die ${index + 1} (d${draw.faces}) recorded ${record.dice[index]}, the revealed seed of dice session ${found.sessionId} gives ${expected}` });
      } else {
        verified += 1;
      }
    }
  }
  for (const [id, count] of [...waiting].sort()) notes.push(`dice session ${id}: ${count} fair dice wait for its reveal (dice_session_end)`);
  problems.sort((a, b) => a.seq - b.seq);
  const shown = [...sessions.values()].map(({ sessionId, commitment, startSeq, revealSeq, fair, ok, seed }) => ({
    sessionId, fingerprint: (commitment ?? "").slice(0, 16).match(/.{1,4}/g)?.join(" ") ?? "",
    startSeq, revealSeq, fair, ok: ok && seed !== null && !problems.some((p) => p.detail.includes(`session ${sessionId}`)),
  }));
  return { problems, notes, verified, sessions: shown };
}

/** `value` with the keys of every object sorted: the bridge's canonical record JSON (msgspec, sorted keys). */
function sortedDeep(value) {
  if (Array.isArray(value)) return value.map(sortedDeep);
  if (value && typeof value === "object") return Object.fromEntries(Object.keys(value).sort().map((key) => [key, sortedDeep(value[key])]));
  return value;
}

const GENESIS = "0".repeat(64);

/**
 * The chain of an export, as bridge/audit.py chains it: each row's `hash` is
 * SHA-256(prev_hash bytes || the record's canonical JSON), and each row's `prev_hash` is the hash of
 * the record before it (zeros before record 1). A changed record or a broken link is a problem
 * naming the record; an export that starts after record 1 (filtered) is checked from where it starts.
 */
async function chainProblems(rows) {
  const problems = [];
  let previous = null;
  for (const { record, hash, prev_hash: prevHash } of rows) {
    if (typeof hash !== "string" || typeof prevHash !== "string") continue; // an export without the chain columns
    const canonical = encoder.encode(JSON.stringify(sortedDeep(record)));
    const bytes = new Uint8Array(32 + canonical.length);
    bytes.set(fromHex(prevHash));
    bytes.set(canonical, 32);
    if (toHex(await crypto.subtle.digest("SHA-256", bytes)) !== hash) {
      problems.push({ seq: record.seq, detail: `record ${record.seq} was changed after it was written (hash mismatch)` });
    }
    const sameWorld = previous && previous.record.world_id === record.world_id;
    const expected = sameWorld && previous.record.seq === record.seq - 1 ? previous.hash : record.seq === 1 ? GENESIS : null;
    if (expected !== null && prevHash !== expected) problems.push({ seq: record.seq, detail: `record ${record.seq} does not link to the record before it` });
    if (sameWorld && previous.record.seq !== record.seq - 1) problems.push({ seq: record.seq, detail: `records ${previous.record.seq + 1}..${record.seq - 1} are missing before record ${record.seq}` });
    previous = { record, hash };
  }
  return problems;
}

/** Wire the page (only in a browser with the page's elements). */
function mountPage() {
  const input = document.getElementById("trail");
  const out = document.getElementById("result");
  input.addEventListener("change", async () => {
    out.replaceChildren();
    const line = (text, cls) => {
      const p = document.createElement("p");
      p.textContent = text;
      if (cls) p.className = cls;
      out.append(p);
    };
    try {
      const result = await checkTrail(await input.files[0].text());
      for (const s of result.sessions) {
        line(`dice session ${s.fingerprint}: committed at record ${s.startSeq ?? "?"}, revealed at record ${s.revealSeq ?? "(not yet)"}, ${s.fair} fair dice${s.ok ? ": verified" : ""}`, s.ok ? "pass" : "fail");
      }
      for (const p of result.problems) line(p.detail, "fail");
      for (const n of result.notes) line(`note: ${n}`);
      line(result.problems.length ? `FAIL: ${result.problems.length} problem${result.problems.length === 1 ? "" : "s"}` : `PASS: ${result.verified} dice recomputed from the revealed seeds`, result.problems.length ? "fail" : "pass");
    } catch (error) {
      line(String(error.message ?? error), "fail");
    }
  });
}

if (typeof document !== "undefined" && document.getElementById("trail")) mountPage();
