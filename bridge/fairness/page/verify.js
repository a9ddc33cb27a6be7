/**
 * fate-bridge trail check, in the browser (WebCrypto) or Node: check the chain of an exported trail
 * (`fate-bridge audit export --world W --out W.trail.json`, or `--format jsonl`), the signed heads of
 * a trail file, and recompute every die of every revealed dice session of it from the trail and
 * the revealed seed alone, and check each seed against the commitment posted before the rolls.
 * The same recipe as bridge/fairness/provable.py (derive_die) and checks as bridge/fairness/trail.py
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

export const TRAIL_FORMAT = "fate-bridge trail v1"; // bridge/trail_file.py FORMAT
const EXPORT_HELP = "export a trail with `fate-bridge audit export --world WORLD --out WORLD.trail.json` "
  + "(or --format jsonl)";

/**
 * The keys whose numbers the bridge's record types hold as floats (it writes `1.0`, not `1`):
 * bridge/record.py FLOAT_FIELDS (tests/test_trail.py checks both against the wire types).
 */
export const FLOAT_FIELDS = new Set(["pass_chance"]);

/** A JSON number as written in the file (its text: a value JSON.parse would round). */
class JsonNumber {
  /** @param {string} text */
  constructor(text) {
    this.text = text;
  }
}

const JSON_STRING = /"(?:[^"\\\u0000-\u001f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"/y;
const JSON_NUMBER = /-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?/y;
const JSON_LITERALS = [["true", true], ["false", false], ["null", null]];

/**
 * `text` parsed as JSON (RFC 8259), losing nothing: objects as Maps (a repeated key keeps its last
 * value, as JSON.parse and the bridge's decoder do), numbers as JsonNumber (their text).
 * @param {string} text
 * @returns {unknown}
 * @throws {SyntaxError} naming the position where the text stops being JSON
 */
function parseLossless(text) {
  let at = 0;
  const fail = (what) => {
    throw new SyntaxError(`${what} at character ${at + 1}`);
  };
  const space = () => {
    while (at < text.length && " \t\n\r".includes(text[at])) at += 1;
  };
  const token = (pattern) => {
    pattern.lastIndex = at;
    const found = pattern.exec(text);
    if (found) at = pattern.lastIndex;
    return found?.[0];
  };
  const value = () => {
    space();
    const c = text[at];
    if (c === "{" || c === "[") {
      at += 1;
      const close = c === "{" ? "}" : "]";
      const items = c === "{" ? new Map() : [];
      space();
      if (text[at] === close) {
        at += 1;
        return items;
      }
      for (;;) {
        if (c === "{") {
          space();
          const key = token(JSON_STRING);
          if (key === undefined) fail("expected a key");
          space();
          if (text[at] !== ":") fail("expected ':'");
          at += 1;
          items.set(JSON.parse(key), value());
        } else {
          items.push(value());
        }
        space();
        if (text[at] === close) {
          at += 1;
          return items;
        }
        if (text[at] !== ",") fail(`expected ',' or '${close}'`);
        at += 1;
      }
    }
    const string = token(JSON_STRING);
    if (string !== undefined) return JSON.parse(string);
    const number = token(JSON_NUMBER);
    if (number !== undefined) return new JsonNumber(number);
    for (const [word, literal] of JSON_LITERALS) {
      if (text.startsWith(word, at)) {
        at += word.length;
        return literal;
      }
    }
    return fail("expected a value");
  };
  const parsed = value();
  space();
  if (at < text.length) fail("unexpected text after the JSON value");
  return parsed;
}

/** A parseLossless value as JSON.parse gives it. */
function plain(node) {
  if (node instanceof Map) return Object.fromEntries([...node].map(([key, item]) => [key, plain(item)]));
  if (Array.isArray(node)) return node.map(plain);
  if (node instanceof JsonNumber) return Number(node.text);
  return node;
}

/** Strings in code point order (Python's, the bridge's sorted keys), not UTF-16 unit order. */
function byCodePoint(a, b) {
  const x = [...a];
  const y = [...b];
  for (let i = 0; i < Math.min(x.length, y.length); i += 1) {
    const d = x[i].codePointAt(0) - y[i].codePointAt(0);
    if (d) return d;
  }
  return x.length - y.length;
}

/**
 * A float as the bridge writes it (msgspec): the shortest digits that read back (as JS prints
 * them), plainly for a decimal exponent of -5..15 (`0.00001`, `1.0`), else `1.25e-7`, `1e16`.
 * @param {number} value finite
 */
export function floatText(value) {
  if (value === 0) return Object.is(value, -0) ? "-0.0" : "0.0";
  const [mantissa, exponentText] = Math.abs(value).toExponential().split("e");
  const exponent = Number(exponentText);
  const digits = mantissa.replace(".", "");
  const sign = value < 0 ? "-" : "";
  if (exponent < -5 || exponent >= 16) return `${sign}${mantissa}e${exponent}`;
  if (exponent < 0) return `${sign}0.${"0".repeat(-exponent - 1)}${digits}`;
  const whole = digits.slice(0, exponent + 1).padEnd(exponent + 1, "0");
  return `${sign}${whole}.${digits.slice(exponent + 1) || "0"}`;
}

/**
 * A number as the record's types hold it (bridge/record.py _by_value): a float under a key of
 * FLOAT_FIELDS, else an integer when its value is one (exact, however large, or below 2**53
 * when written with a fraction or exponent: `jq` writes `1.0` as `1`), else a float.
 * @throws {Error} for a number no record holds (too large for a float)
 */
function numberText(text, isFloat) {
  if (!isFloat && !/[.eE]/.test(text)) return BigInt(text).toString();
  const value = Number(text);
  if (!Number.isFinite(value)) throw new Error(`the number ${text} is too large for a float`);
  if (!isFloat && Number.isInteger(value) && Math.abs(value) < 2 ** 53) return String(Math.abs(value) === 0 ? 0 : value);
  return floatText(value);
}

/**
 * The canonical JSON of a parseLossless value, as bridge/record.py canonical_json gives it (the
 * bytes the bridge hashed, however the file was indented, ordered or escaped since): keys sorted
 * at every level, no whitespace, strings as the bridge escapes them (JSON.stringify's escapes),
 * numbers by value (numberText). A list's items are under its key.
 * @param {unknown} node @param {string|null} key the key the value is under
 * @returns {string}
 */
function canonicalText(node, key = null) {
  if (node instanceof Map) {
    return `{${[...node.keys()].sort(byCodePoint).map((k) => `${JSON.stringify(k)}:${canonicalText(node.get(k), k)}`).join(",")}}`;
  }
  if (Array.isArray(node)) return `[${node.map((item) => canonicalText(item, key)).join(",")}]`;
  if (node instanceof JsonNumber) return numberText(node.text, FLOAT_FIELDS.has(key));
  return JSON.stringify(node);
}

/**
 * One row of an export: the record as JSON.parse gives it, and its canonical text (null when a
 * number in it is one no record holds: the chain check then names the record).
 */
function exportRow(node) {
  const record = node instanceof Map ? node.get("record") : undefined;
  let canonical = null;
  try {
    canonical = record === undefined ? null : canonicalText(record);
  } catch { /* not a record the bridge wrote: its hash cannot match */ }
  return { ...plain(node), canonical };
}

/**
 * The rows and signed heads of an export, whichever format `fate-bridge audit export` wrote:
 * the whole-trail file (`--out W.trail.json`, bridge/trail_file.py: one JSON object
 * `{format: "fate-bridge trail v1", world_id, records: [{seq, prev_hash, hash, record}], heads, ...}`)
 * or JSON lines (`--format jsonl`: one `{record, prev_hash, hash, ...}` a line, no heads). The CSV
 * export (`--format csv`) is a summary without the records or their hashes: refused, saying so.
 * Each row keeps its record's canonical text (canonicalText) for the chain.
 * @param {string} text the file's text
 * @returns {{format: "trail"|"jsonl", rows: {record: object, canonical: string|null, prev_hash?: string, hash?: string}[],
 *   heads: {seq: number, hash: string, state_digest: string|null, public_key: string, sig: string, stored_digest?: string|null}[], worldId: string|null}}
 * @throws {Error} naming the line or field that is not an export, and how to make one
 */
export function parseExport(text) {
  const start = text.trimStart();
  if (start.startsWith("{")) {
    let tree = null;
    try {
      tree = parseLossless(start);
    } catch { /* JSON lines: one object a line, read below */ }
    if (tree instanceof Map && !tree.has("record")) {
      const file = plain(tree);
      if (file.format !== TRAIL_FORMAT) throw new Error(`the file's "format" is ${JSON.stringify(file.format ?? null)}, not "${TRAIL_FORMAT}": ${EXPORT_HELP}`);
      if (!Array.isArray(file.records)) throw new Error(`the trail file has no "records" list: ${EXPORT_HELP}`);
      const rows = tree.get("records").map((node, i) => {
        const row = exportRow(node);
        if (!row?.record || typeof row.record.seq !== "number") throw new Error(`records[${i}] of the trail file is not an audit record`);
        return row;
      });
      return { format: "trail", rows, heads: Array.isArray(file.heads) ? file.heads : [], worldId: file.world_id ?? null };
    }
  }
  const firstLine = start.slice(0, start.indexOf("\n") === -1 ? undefined : start.indexOf("\n"));
  if (/^[a-z_]+(,[a-z_]+)+\r?$/.test(firstLine)) {
    throw new Error(`this is the CSV summary export (--format csv): it has no records or hashes to check; ${EXPORT_HELP}`);
  }
  const rows = text.split("\n").filter((line) => line.trim()).map((line, i) => {
    let row;
    try {
      row = exportRow(parseLossless(line.trim()));
    } catch {
      throw new Error(`line ${i + 1} of the file is not JSON: ${EXPORT_HELP}`);
    }
    if (!row?.record || typeof row.record.seq !== "number") throw new Error(`line ${i + 1} of the file is not an audit record: ${EXPORT_HELP}`);
    return row;
  });
  return { format: "jsonl", rows, heads: [], worldId: null };
}

/** @param {string} text base64url, no padding @returns {Uint8Array} */
function fromBase64Url(text) {
  const plain = atob(text.replaceAll("-", "+").replaceAll("_", "/") + "=".repeat((4 - (text.length % 4)) % 4));
  return Uint8Array.from(plain, (c) => c.charCodeAt(0));
}

/**
 * Check the signed heads of a trail file (bridge/heads.py): each head's Ed25519 signature, by the
 * public key it names, over `"fate-bridge head v1\n" world "\n" seq "\n" hash "\n" state_digest`
 * (a version 2 head, one with a `stored_digest`: `"fate-bridge head v2\n" ... state_digest "\n"
 * stored_digest`), and that its hash is the hash of record `seq` in the file. The state and stored
 * digests are not recomputed (an export carries no state rows, and the records' JSON, not the
 * stored bytes a version 2 head seals); `fate-bridge audit verify` pins the key to trust.
 * @returns {Promise<{signed: number, keys: string[], problems: {seq: number, detail: string}[]}>}
 *   `keys`: the key ids (first 16 hex digits of SHA-256 of the raw key) that signed them
 */
async function checkHeads(heads, worldId, hashes) {
  const problems = [];
  const keys = new Set();
  let signed = 0;
  for (const head of heads) {
    const common = `${worldId}\n${head.seq}\n${head.hash}\n${head.state_digest ?? ""}`;
    const message = encoder.encode(typeof head.stored_digest === "string"
      ? `fate-bridge head v2\n${common}\n${head.stored_digest}` : `fate-bridge head v1\n${common}`);
    let ok = false;
    let keyId = "?";
    try {
      const raw = fromBase64Url(head.public_key);
      keyId = toHex(await crypto.subtle.digest("SHA-256", raw)).slice(0, 16);
      const key = await crypto.subtle.importKey("raw", raw, { name: "Ed25519" }, false, ["verify"]);
      ok = await crypto.subtle.verify({ name: "Ed25519" }, key, fromBase64Url(head.sig), message);
    } catch { /* a malformed key or signature: not signed */ }
    if (!ok) {
      problems.push({ seq: head.seq, detail: `the signed head at record ${head.seq} does not carry a valid signature by key ${keyId}` });
      continue;
    }
    if (hashes.has(head.seq) && hashes.get(head.seq) !== head.hash) {
      problems.push({ seq: head.seq, detail: `the signed head at record ${head.seq} names another hash than record ${head.seq} of the file` });
      continue;
    }
    signed += 1;
    keys.add(keyId);
  }
  return { signed, keys: [...keys], problems };
}

/**
 * Check an export (see parseExport): its chain (hashes and links, as bridge/audit.py chains
 * records), its signed heads (a trail file's) and its dice.
 * @param {string} text the export
 * @returns {Promise<{problems: {seq: number, detail: string}[], notes: string[], verified: number,
 *   format: "trail"|"jsonl", records: number, chained: number, worlds: string[],
 *   heads: {count: number, signed: number, keys: string[]},
 *   sessions: {sessionId: string, fingerprint: string, startSeq: number|null, revealSeq: number|null, fair: number, ok: boolean}[]}>}
 *   `chained`: the records whose hash was recomputed (an export without the chain columns has none)
 */
export async function checkTrail(text) {
  const parsed = parseExport(text);
  const rows = parsed.rows.sort((a, b) => (a.record.world_id === b.record.world_id ? a.record.seq - b.record.seq : a.record.world_id < b.record.world_id ? -1 : 1));
  const records = rows.map((row) => row.record);
  const problems = await chainProblems(rows);
  const worlds = [...new Set(records.map((record) => record.world_id))];
  const heads = await checkHeads(parsed.heads, parsed.worldId ?? worlds[0] ?? "", new Map(rows.map((row) => [row.record.seq, row.hash])));
  problems.push(...heads.problems);
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
  return {
    problems, notes, verified, sessions: shown, format: parsed.format, records: records.length, worlds,
    chained: rows.filter((row) => typeof row.hash === "string" && typeof row.prev_hash === "string").length,
    heads: { count: parsed.heads.length, signed: heads.signed, keys: heads.keys },
  };
}

const GENESIS = "0".repeat(64);

/**
 * The chain of an export, as bridge/audit.py chains it: each row's `hash` is
 * SHA-256(prev_hash bytes || the record's canonical JSON, canonicalText), and each row's `prev_hash` is the hash of
 * the record before it (zeros before record 1). A changed record or a broken link is a problem
 * naming the record; an export that starts after record 1 (filtered) is checked from where it starts.
 */
async function chainProblems(rows) {
  const problems = [];
  let previous = null;
  for (const { record, canonical: text, hash, prev_hash: prevHash } of rows) {
    if (typeof hash !== "string" || typeof prevHash !== "string") continue; // an export without the chain columns
    const canonical = encoder.encode(text ?? "");
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

const plural = (count, one, many = `${one}s`) => `${count} ${count === 1 ? one : many}`;

/**
 * What a check found, as the page shows it: one verdict line saying what was checked (the hash
 * chain of N records, M signed heads, K dice sessions and the dice recomputed), or how many
 * problems were found.
 * @param {Awaited<ReturnType<typeof checkTrail>>} result
 * @returns {{ok: boolean, verdict: string, checked: string[]}} `checked`: one line per kind of check
 */
export function summarize(result) {
  const checked = [];
  const worlds = result.worlds.length === 1 ? ` of world ${result.worlds[0]}` : result.worlds.length ? ` of ${result.worlds.length} worlds` : "";
  checked.push(result.chained
    ? `the hash chain${worlds}: ${plural(result.chained, "record")} recomputed and linked`
    : `no hash chain: the file's ${plural(result.records, "record")} carry no hashes`);
  checked.push(result.format === "trail"
    ? `${plural(result.heads.signed, "signed head")} of ${result.heads.count} checked against the chain${result.heads.keys.length ? ` (signed by key ${result.heads.keys.join(", ")}: compare with \`fate-bridge audit public-key\`)` : ""}`
    : "no signed heads: a --format jsonl export carries none (the whole-trail export W.trail.json does)");
  checked.push(result.sessions.length
    ? `${plural(result.sessions.length, "dice session")}: ${plural(result.verified, "die", "dice")} recomputed from the revealed seeds`
    : "no dice session in this trail: dice are recomputed only for rolls made inside a /dicesession");
  const ok = result.problems.length === 0;
  return { ok, verdict: ok ? `PASS: ${checked.join("; ")}.` : `FAIL: ${plural(result.problems.length, "problem")} (listed above)`, checked };
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
      for (const n of result.notes) line(`note: ${n}`, "note");
      const summary = summarize(result);
      if (!summary.ok) for (const c of summary.checked) line(`checked: ${c}`, "note");
      line(summary.verdict, summary.ok ? "verdict pass" : "verdict fail");
    } catch (error) {
      line(String(error.message ?? error), "fail");
    }
  });
}

if (typeof document !== "undefined" && document.getElementById("trail")) mountPage();
