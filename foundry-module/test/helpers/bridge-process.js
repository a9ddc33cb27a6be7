/**
 * A REAL bridge process for the end-to-end tests: a temporary directory holding its database,
 * the bridge CLI on that database (`world add --token-only`, ...), then `python -m bridge serve`
 * on a free local port, polled on `GET /healthz` until it answers. Its output is kept in `log`,
 * and `until` timeouts print it, so a broken bridge fails the test instead of hanging it.
 * `stop()` kills it and removes the directory; it is safe after a partial or failed start;
 * `pause()` / `resume()` stop it and start it again on the same port and database (an outage).
 * Python: $FATE_BRIDGE_PYTHON, else <repo>/.venv/bin/python.
 *
 * Usage (in `before`): `bridge = new BridgeProcess("fate-bridge-e2e-")`, then
 * `token = bridge.addWorld("e2e-world")`, then `port = await bridge.serve()`; in `after`:
 * `bridge?.stop()`.
 */
import assert from "node:assert/strict";
import { execFile, execFileSync, spawn } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

export const REPO = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
export const PYTHON = process.env.FATE_BRIDGE_PYTHON ?? path.join(REPO, ".venv/bin/python");
/** Bounds on waiting for the real process, so a broken bridge fails the test instead of hanging it. */
export const STARTUP_MS = 20_000;
export const STEP_MS = 10_000;
const POLL_MS = 25;

/** A port nothing listens on right now (the OS picks it). */
export function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const { port: found } = server.address();
      server.close(() => resolve(found));
    });
  });
}

export class BridgeProcess {
  /** Check for Python and make the temporary directory (named `tmpPrefix` + random) for the database. */
  constructor(tmpPrefix) {
    assert.ok(existsSync(PYTHON), `no Python at ${PYTHON}: set FATE_BRIDGE_PYTHON or create <repo>/.venv`);
    this.dir = mkdtempSync(path.join(tmpdir(), tmpPrefix));
    this.db = path.join(this.dir, "bridge.sqlite3");
    this.log = "";
    this.process = undefined;
    this.port = undefined;
  }

  /** Run `python -m bridge ...args --db <db>` and return its trimmed output. */
  cli(...args) {
    return execFileSync(PYTHON, ["-m", "bridge", ...args, "--db", this.db], { cwd: REPO, encoding: "utf8" }).trim();
  }

  /** Register `worldId` and return its token (`world add --token-only`). */
  addWorld(worldId) {
    return this.cli("world", "add", worldId, "--token-only");
  }

  /** `addWorld` without blocking this process meanwhile (other work, e.g. a browser starting, goes on); resolves with the token. */
  addWorldAsync(worldId) {
    return new Promise((resolve, reject) => {
      execFile(PYTHON, ["-m", "bridge", "world", "add", worldId, "--token-only", "--db", this.db], { cwd: REPO, encoding: "utf8" },
        (error, stdout) => (error ? reject(error) : resolve(stdout.trim())));
    });
  }

  /** Start `bridge serve` (with `extraArgs`) on a free port; resolve with the port once /healthz answers 200. */
  async serve(...extraArgs) {
    this.extraArgs = extraArgs;
    return this.#spawn(await freePort());
  }

  /** Kill the process (SIGTERM) and wait for it to exit; the database stays for `resume()`. */
  async pause() {
    const child = this.process;
    this.process = undefined;
    if (!child || child.exitCode !== null) return;
    await new Promise((resolve) => {
      child.once("exit", resolve);
      child.kill("SIGTERM");
    });
  }

  /** Start `bridge serve` again on the same port and database (after `pause()`); resolves with the port. */
  async resume() {
    return this.#spawn(this.port);
  }

  async #spawn(port) {
    const extraArgs = this.extraArgs ?? [];
    this.port = port;
    this.process = spawn(PYTHON, ["-m", "bridge", "serve", "--host", "127.0.0.1", "--port", String(port), "--db", this.db, ...extraArgs], { cwd: REPO });
    this.process.stdout.on("data", (chunk) => { this.log += chunk; });
    this.process.stderr.on("data", (chunk) => { this.log += chunk; });
    await this.until(async () => {
      try {
        return (await fetch(`http://127.0.0.1:${port}/healthz`)).status === 200;
      } catch {
        return false;
      }
    }, "GET /healthz", STARTUP_MS);
    return port;
  }

  /** Poll `check` until it returns a truthy value or `ms` pass; a timeout throws with the bridge log. */
  async until(check, what, ms = STEP_MS) {
    const end = Date.now() + ms;
    for (;;) {
      const value = await check();
      if (value) return value;
      if (Date.now() > end) throw new Error(`timed out waiting for ${what}\n--- bridge log ---\n${this.log}`);
      await new Promise((resolve) => setTimeout(resolve, POLL_MS));
    }
  }

  /** Kill the process (SIGTERM) and remove the temporary directory. */
  stop() {
    this.process?.kill("SIGTERM");
    if (this.dir) rmSync(this.dir, { recursive: true, force: true });
  }
}
