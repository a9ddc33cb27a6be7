"""``fate-bridge``: the command line. Run ``fate-bridge --help`` (or ``COMMAND --help``).

Exit codes:

- 0: success.
- 1: ``schema --check`` found stale files.
- 2: usage or configuration error. The message says what was wrong and how to fix it.
- 130: stopped by Ctrl+C (bridge/__main__.py).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import shlex
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn
from urllib.parse import urlencode, urljoin, urlsplit, urlunsplit

from . import __version__
from .config import (LOG_FORMATS, MAX_WORLDS_IN_MEMORY, database, db_label, default_audit_key, default_db,
                     default_signing_key, load_key, load_signing_key, source_db)
from .errors import ConfigError, StorageUnavailable
from .limits import LOOPBACK, RATE_BURST_SECONDS, RATE_PER_SECOND, Limits
from .release import PUBLIC_URL_ENV, REPOSITORY, release_manifest_url, release_tag, repository_name

if TYPE_CHECKING:
    import ssl
    from collections.abc import Callable, Coroutine

    from .store import WorldAdmin

# Each command imports what it needs when it runs (in its function below): parsing the command
# line, `--version` and `--help` import none of the server, the store, the rulesets or their
# libraries (tests/test_cli.py, TestImports; docs/performance.md, "The command line").

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8765
RESOLVE_WORLD = "offline"  # the world of ``resolve`` lines sent without ``hello``


STOPPED_EPILOG = (  # the README's "Beside a running bridge" says the same
    "Every command works beside a running serve (the world commands hand their change to it)\n"
    "except audit new-key, audit repair, restore and resolve --db, which need it stopped and\n"
    "are refused, naming it, while it runs (on PostgreSQL: every serve process of the database).")


def this_command() -> str:
    """How the user started us, for commands we print.

    ``.venv/bin/fate-bridge`` as typed, or ``python -m bridge``."""
    invoked = sys.argv[0] if sys.argv else ""
    if Path(invoked).name == "fate-bridge":
        return invoked if os.sep in invoked else "fate-bridge"
    return f"{Path(sys.executable).name} -m bridge"


def audit_time(text: str) -> str:
    """argparse type of ``--since``/``--until``: a time, as the trail writes its records' times.

    So they compare as instants. The time is read by :mod:`bridge.times`: ISO 8601, UTC unless a
    zone is given."""
    from . import times

    try:
        return times.trail_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def world_id(text: str) -> str:
    """argparse type of a WORLD_ID to look up (``world remove``, ``rotate-token``, ``--world``).

    It is 1..128 printable characters without spaces. That was ``world add``'s older rule. So a
    world registered under an id Foundry cannot have can still be removed."""
    if not 1 <= len(text) <= 128 or any(c.isspace() or not c.isprintable() for c in text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Foundry world id: use game.world.id, the world's folder name "
            "under Data/worlds (1 to 128 characters, no spaces)")
    return text


# Foundry's own rule for package ids, worlds' included (BaseWorld extends BasePackage): common/
# packages/base-package.mjs, BasePackage.validateId (v12, v13): ^[A-Za-z0-9-_]+$, and none of the
# names Windows reserves. A world id is the folder name under Data/worlds.
FOUNDRY_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")
RESERVED_ID = re.compile(r"(con|prn|aux|nul|com[0-9]|lpt[0-9])", re.IGNORECASE)


def new_world_id(text: str) -> str:
    """argparse type of ``world add``'s WORLD_ID: an id Foundry can have, at most 128 characters.

    It matches :data:`FOUNDRY_ID`, not :data:`RESERVED_ID`. Refuses path separators, ``..``, spaces
    and markup, saying which character is wrong."""
    world_id(text)
    if RESERVED_ID.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Foundry world id: Foundry refuses names the operating system reserves "
            "(con, prn, aux, nul, com1, lpt1...); use game.world.id, the world's folder name under Data/worlds")
    if not FOUNDRY_ID.fullmatch(text):
        bad = next(c for c in text if not FOUNDRY_ID.fullmatch(c))
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a Foundry world id: it holds {bad!r}, and Foundry's ids (the world's folder "
            "name under Data/worlds) have only letters, digits, '-' and '_'; use game.world.id")
    return text


def world_id_arg(text: str) -> str:
    """``text`` as a command line takes it back, quoted for the shell when it needs it.

    An id starting with ``-`` becomes ``-- -dash``; else it would be an option."""
    return ("-- " if text.startswith("-") else "") + shlex.quote(text)


DEFAULT_INVITE_EXPIRY = 7 * 24 * 3600  # seconds: a code handed out today is used this week
_DURATION = re.compile(r"(\d{1,6})([mhd])")
_UNIT_SECONDS = {"m": 60, "h": 3600, "d": 86400}


def duration(text: str) -> int | None:
    """argparse type of ``world invite --expires``: ``30m``, ``12h``, ``7d`` as seconds, or
    ``never`` (None)."""
    if text == "never":
        return None
    match = _DURATION.fullmatch(text.strip())
    if match is None or int(match.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration: write 30m, 12h, 7d or never")
    return int(match.group(1)) * _UNIT_SECONDS[match.group(2)]


def _count(text: str) -> int:
    """argparse type of ``--max-uses``: 0 or more."""
    if not text.isdigit():
        raise argparse.ArgumentTypeError(f"{text!r} is not a count: give 0 (any number) or more")
    return int(text)


def database_arg(text: str) -> Path | str:
    """argparse type of ``--db``: :func:`bridge.config.database`, refusing a folder.

    For a folder SQLite would say "unable to open", which reads as a permission problem."""
    from .startup import folder_given

    db = database(text)
    if isinstance(db, Path) and (problem := folder_given(db)):
        raise argparse.ArgumentTypeError(problem)
    return db


def tcp_port(text: str) -> int:
    """argparse type of ``--port``: 0 (any free port) to 65535. The socket layer would take a
    larger number modulo 65536 and listen where nobody looks."""
    try:
        port = int(text)
    except ValueError:
        port = -1
    if not 0 <= port <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port: give 1 to 65535 (0 picks a free one)")
    return port


def origin(text: str) -> str:
    """argparse type of ``serve --origins``: a page origin as browsers send it (``scheme://host[:port]``).

    It is checked as ``doctor`` checks it. Any other text would never match, and every browser would
    be refused."""
    from .doctor import check_origins

    (finding,) = check_origins([text])
    if finding.level == "fail":
        raise argparse.ArgumentTypeError(f"{finding.what}; {finding.fix}")
    return text


def bridge_url(text: str) -> str:
    """argparse type of ``--bridge-url``: an http(s):// or ws(s):// address with a host."""
    parts = urlsplit(text)
    if parts.scheme not in ("http", "https", "ws", "wss") or not parts.netloc:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a bridge address: write it with its scheme, e.g. http://127.0.0.1:8765 "
            "or https://foundry.example.org/fate-bridge/")
    return text


def github_repository(text: str) -> str:
    """argparse type of ``release --repository``: :func:`bridge.release.repository_name`."""
    try:
        return repository_name(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


class _WorldParser(argparse.ArgumentParser):
    """The parser of a ``world`` command.

    argparse reads a WORLD_ID starting with ``-`` as an option. So its "required: WORLD_ID" or
    "unrecognized arguments: -..." says to put it after ``--``."""

    def error(self, message: str) -> NoReturn:
        if message.endswith("required: WORLD_ID") or "unrecognized arguments: -" in message:
            message += (f"; a world id starting with '-' goes after `--`, e.g. `{self.prog} -- -my-world`")
        super().error(message)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="fate-bridge",
        description=(
            "Resolve the Fate rules of tabletop RPGs for Foundry VTT. Typical start:\n"
            "  fate-bridge world add MY_WORLD_ID    # once; prints the token for the module\n"
            "  fate-bridge serve                    # then set the module's bridge URL and token"
        ),
        epilog=STOPPED_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"fate-bridge {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    def add_db(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--db",
            type=database_arg,
            default=None,
            help="SQLite database file, or a PostgreSQL URL (postgresql://USER@HOST:PORT/DB, for "
            f"many bridge processes: docs/deploy.md) (default: $FATE_BRIDGE_DB or {default_db()})",
        )

    def add_key(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "--audit-key",
            type=Path,
            default=None,
            help="key signing the audit checkpoints, kept outside the database (default: "
            f"$FATE_BRIDGE_AUDIT_KEY or {default_audit_key()}; created by serve's first start, and "
            "never replaced: serve refuses one that did not sign the trail's checkpoints)",
        )

    def add_signing_key(p: argparse.ArgumentParser, made: str) -> None:
        p.add_argument(
            "--signing-key",
            type=Path,
            default=None,
            help="Ed25519 key signing the receipts chat messages keep, outside the database "
            f"(default: $FATE_BRIDGE_SIGNING_KEY or receipt.key beside the audit key; {made})",
        )

    def add_period(p: argparse.ArgumentParser, example: str) -> None:
        p.add_argument("--since", type=audit_time, help=f"from this time on (ISO 8601, UTC unless a zone is "
                       f"given, e.g. {example})")
        p.add_argument("--until", type=audit_time, help="before this time (as --since)")

    serve = commands.add_parser(
        "serve",
        help="run the bridge (WebSocket server for the Foundry module)",
        description="Run the bridge. The GM's Foundry module connects to ws://HOST:PORT; "
        "GET /healthz answers 'ok'. Stop with Ctrl-C or SIGTERM.",
    )
    serve.add_argument("--host", default=DEFAULT_HOST,
                       help=f"address to listen on (default {DEFAULT_HOST}: this machine only)")
    serve.add_argument("--port", type=tcp_port, default=DEFAULT_PORT,
                       help=f"TCP port (default {DEFAULT_PORT}; 0 picks a free one)")
    add_db(serve)
    add_key(serve)
    add_signing_key(serve, "created by serve if missing")
    serve.add_argument("--log-format", choices=LOG_FORMATS, default="console",
                       help="log lines as readable text (console, default) or JSON")
    serve.add_argument(
        "--origins",
        nargs="+",
        type=origin,
        metavar="ORIGIN",
        help="accept browsers only from these pages' origins, e.g. https://foundry.example.org "
        "or http://localhost:30000 (default: any origin; the token is still required)",
    )
    serve.add_argument(
        "--rate-limit",
        type=float,
        default=RATE_PER_SECOND,
        metavar="PER_SECOND",
        help=f"frames a world may send per second on average, whichever connection they come on "
        f"(reconnecting does not refill it), bursts of {RATE_BURST_SECONDS:g} s worth; each overlay "
        f"page has as much again (default {RATE_PER_SECOND:g}; 0 = no limit, for benchmarks and "
        "trusted setups)",
    )
    serve.add_argument("--reuse-port", action="store_true",
                       help="share --port with other fate-bridge processes on this machine "
                       "(SO_REUSEPORT; needs a postgresql:// --db, see docs/deploy.md)")
    serve.add_argument("--max-worlds-in-memory", type=_positive(int), default=MAX_WORLDS_IN_MEMORY, metavar="N",
                       help="worlds held in memory at most; beyond it, the least recently used idle "
                       "world leaves memory and is loaded again from the database on its next "
                       f"decision (default {MAX_WORLDS_IN_MEMORY}; see docs/performance.md)")
    _limit_flags(serve)
    serve.add_argument("--tls-cert", type=Path, help="PEM certificate chain: serve wss:// (with --tls-key)")
    serve.add_argument("--tls-key", type=Path, help="PEM private key of --tls-cert")
    serve.add_argument(
        "--public-url", type=bridge_url, default=os.environ.get(PUBLIC_URL_ENV) or None, metavar="URL",
        help="the address others reach the bridge at, e.g. https://foundry.example.org/fate-bridge/ "
        f"behind a proxy; the module manifest at /module/module.json points there (default: "
        f"${PUBLIC_URL_ENV}, else the address each request came to)")

    world = commands.add_parser("world", help="register and list Foundry worlds",
                                description="Manage the Foundry worlds this bridge serves.")
    world_commands = world.add_subparsers(dest="world_command", metavar="WORLD_COMMAND",
                                          required=True, parser_class=_WorldParser)
    add = world_commands.add_parser(
        "add",
        help="register a world and print its token (shown once)",
        description="Register WORLD_ID (the Foundry world's id: game.world.id, the folder name "
        "under Data/worlds) and print a new token. Paste the token into the module's settings "
        "on the GM's browser. Only its hash is stored: it cannot be shown again.",
    )
    add.add_argument("world_id", metavar="WORLD_ID", type=new_world_id)
    add.add_argument("--token-only", action="store_true",
                     help="print only the token (for scripts)")
    add_db(add)
    rotate = world_commands.add_parser(
        "rotate-token",
        help="give a world a new token (the old one stops working)",
        description="Issue a new token for WORLD_ID and print it once. The old token stops "
        "working at once: a running bridge closes the links it opened within a second (4001, "
        "saying so; the module asks for the new token). Safe while serve runs. Paste the "
        "new token into the module settings on the GM's browser.",
    )
    rotate.add_argument("world_id", metavar="WORLD_ID", type=world_id)
    rotate.add_argument("--token-only", action="store_true", help="print only the token")
    add_db(rotate)
    remove = world_commands.add_parser(
        "remove",
        help="unregister a world (its state and audit trail are kept)",
        description="Unregister WORLD_ID: its token and overlay viewer key stop working at once "
        "(a running bridge closes its links and overlays within a second, 4001, saying so; safe "
        "while serve runs). Its Fate state and audit trail "
        "are kept: adding the world again resumes where it was, so nothing can be fated twice.",
    )
    remove.add_argument("world_id", metavar="WORLD_ID", type=world_id)
    add_db(remove)
    world_list = world_commands.add_parser(
        "list", help="list registered worlds and their settings",
        description="Print each registered world id and its world option (fate_option, S12).")
    add_db(world_list)
    viewer = world_commands.add_parser(
        "viewer-key",
        help="print the world's read-only overlay viewer key and overlay URL",
        description="Print WORLD_ID's overlay viewer key (made on first use) and the URL of the "
        "stream overlay page for OBS. The key only lets a page watch the world's public results; "
        "it is stored in clear text so the GM's module can show the URL too. --rotate issues a "
        "new key: a running bridge closes the overlays open with the old one within a second "
        "(safe while serve runs).",
    )
    viewer.add_argument("world_id", metavar="WORLD_ID", type=world_id)
    viewer.add_argument("--rotate", action="store_true", help="replace the key with a new one")
    viewer.add_argument("--key-only", action="store_true", help="print only the key (for scripts)")
    viewer.add_argument("--bridge-url", type=bridge_url,
                        default=os.environ.get(PUBLIC_URL_ENV) or f"http://{DEFAULT_HOST}:{DEFAULT_PORT}",
                        help="the bridge's address as OBS reaches it, for the printed URL (default: "
                        f"${PUBLIC_URL_ENV}, as serve's --public-url, else http://{DEFAULT_HOST}:{DEFAULT_PORT})")
    add_db(viewer)

    invite = world_commands.add_parser(
        "invite",
        help="let GMs register their own worlds: make, list or revoke invite codes",
        description="Make an invite code (printed once; only its hash is stored), list the codes "
        "(`invite list`) or revoke one (`invite revoke ID`). A GM enters the bridge's address and the "
        "code in the Foundry module's settings; the module registers the world (game.world.id) and "
        "keeps its token. A code registers new world ids only: never one this bridge knows, and it "
        "never replaces a token (docs/security.md, Invite codes).",
        epilog="Examples: fate-bridge world invite --max-uses 5 --expires 2d; "
        "fate-bridge world invite --approve (each registration waits for `world pending approve`); "
        "fate-bridge world invite revoke ID")
    invite.add_argument("action", nargs="?", choices=("list", "revoke"), help="list the codes, or revoke one")
    invite.add_argument("invite_id", nargs="?", metavar="ID", help="with revoke: the code's ID (its part before the dot)")
    invite.add_argument("--max-uses", type=_count, default=1, metavar="N",
                        help="worlds the code may register (default 1; 0: any number until it expires)")
    invite.add_argument("--expires", type=duration, default=DEFAULT_INVITE_EXPIRY, metavar="TIME",
                        help="how long the code works: 30m, 12h, 7d, or never (default 7d)")
    invite.add_argument("--approve", action="store_true",
                        help="each registration with this code waits until you approve it (`world pending`)")
    invite.add_argument("--code-only", action="store_true", help="print only the code (for scripts)")
    add_db(invite)
    pending = world_commands.add_parser(
        "pending",
        help="list registration requests waiting for you; approve or deny one",
        description="List the registrations made with an approval code (`world invite --approve`), "
        "or approve / deny the one of WORLD_ID. An approved world is registered at once; its token "
        "goes to the browser that asked (and to no other) when it asks again, within a minute.",
        epilog="Examples: fate-bridge world pending; fate-bridge world pending approve my-world")
    pending.add_argument("action", nargs="?", choices=("approve", "deny"), help="decide a request")
    pending.add_argument("world_id", nargs="?", metavar="WORLD_ID", type=world_id, help="the request's world id")
    add_db(pending)

    sch = commands.add_parser(
        "schema",
        help="write the JSON Schema of the wire messages",
        description="Write schemas/*.schema.json, generated from the message classes in bridge/wire/.",
    )
    sch.add_argument("--out", type=Path, default=Path("schemas"), help="folder (default schemas/)")
    sch.add_argument("--check", action="store_true",
                     help="write nothing; exit 1 if the files are missing or stale")

    aud = commands.add_parser(
        "audit",
        help="read and verify the audit trail of fated results",
        description="Every decision (graded test, Fate Test, choice, refusal) is kept in a "
        "hash chain per world with signed checkpoints. List, show and export it, or verify "
        "that nothing was edited, dropped or reordered and that every outcome follows from "
        "its recorded inputs and dice.",
    )
    aud_commands = aud.add_subparsers(dest="audit_command", metavar="AUDIT_COMMAND", required=True)

    def add_filters(p: argparse.ArgumentParser) -> None:
        add_db(p)
        p.add_argument("--world", help="only this world id")
        p.add_argument("--actor", help="only this actor id")
        p.add_argument("--ruleset", help="only this ruleset (e.g. sohl)")
        p.add_argument("--outcome", help="only this outcome: lost, kept, spent, choice, graded, "
                       "settings, or an error code such as already_fated")
        add_period(p, "2026-11-29, 2026-11-29T20:00 or 2026-11-29T21:00+01:00")

    listing = aud_commands.add_parser(
        "list", help="a table of audit records, newest first",
        description="Print audit records as a table, newest first: ID (for `audit show`), time, world, "
        "sequence number, message type, actor, test, level before -> after, Fate Test roll, point, "
        "outcome and the Foundry user who asked. Filters combine.")
    add_filters(listing)
    listing.add_argument("--limit", type=int, default=50, help="at most this many (default 50; 0 = all)")
    show = aud_commands.add_parser(
        "show", help="one record in full, with its chain links",
        description="Print one audit record as JSON: its inputs (message, the state it read), the "
        "bridge's dice, the reply, and its chain links (prev_hash, hash).")
    show.add_argument("id", type=int, metavar="ID", help="the ID column of `audit list`")
    add_db(show)
    export = aud_commands.add_parser(
        "export", help="export a world's whole trail (to verify anywhere), or records as JSON Lines or CSV",
        description="With --world alone: write that world's whole trail (every record, its signed "
        "heads and the public key) as one file that `fate-bridge audit verify FILE --public-key KEY` "
        "checks on any machine, with no database. Otherwise write audit records, oldest first: JSON "
        "Lines with every record in full, or CSV with the summary columns (for a spreadsheet).",
        epilog="Example: fate-bridge audit export --world my-world --out my-world.trail.json")
    add_filters(export)
    export.add_argument("--format", choices=("trail", "jsonl", "csv"), default=None,
                        help="trail: the world's whole trail (default with --world alone); jsonl: one "
                        "full record per line (default otherwise); csv: the summary columns")
    export.add_argument("--out", type=Path, default=None, help="file to write (default stdout)")
    verify = aud_commands.add_parser(
        "verify",
        help="check the chain, the checkpoints and every decision; exit 0 pass, 1 fail",
        description="Re-check every world's hash chain (links, hashes, missing sequence numbers), the "
        "signed heads (Ed25519: the public key is enough) and older HMAC checkpoints (the audit "
        "key), re-run every recorded decision from its recorded inputs and dice through the same "
        "rules code, and derive each world's state from its chain: every stored row that differs "
        "is named with the record that wrote it. The worlds come from the registry and the signed "
        "heads, not only from the rows that survive. Read-only: the database is never created or "
        "changed; a missing, empty or truncated one fails. Prints PASS or FAIL per world with the "
        "first bad record; exit 0 when all pass, 1 otherwise. Shows progress on a terminal.",
    )
    verify.add_argument("file", nargs="?", type=Path, metavar="FILE",
                        help="an exported trail (`audit export --world W`) to check instead of a database")
    add_db(verify)
    add_key(verify)
    add_signing_key(verify, "the one serve used; needed with --receipts")
    verify.add_argument("--public-key", metavar="KEY",
                        help="the Ed25519 public key the trail must be signed by (as `audit public-key` "
                        "prints it); default: the signing key's, when there is one")
    verify.add_argument("--world", help="only this world id")
    verify.add_argument(
        "--receipts", type=Path, metavar="FILE",
        help="instead, check the receipts exported by the GM's audit window (\"Export receipts\": "
        "JSON {world_id, receipts: [...]}) against this database: each is ok, missing (its record "
        "was deleted) or changed (its record was rewritten, or the receipt is not signed by this "
        "bridge's key); names each missing or changed record, exit 1 if any")

    public = aud_commands.add_parser(
        "public-key", help="print the public key that checks receipts and exported trails",
        description="Print the bridge's Ed25519 public key (base64url of its 32 bytes) and its key "
        "id. Give it to players: with it, anyone can check a receipt or an exported trail "
        "(`audit verify FILE --public-key KEY`); it cannot sign anything.")
    add_key(public)
    add_signing_key(public, "the one serve uses")
    public.add_argument("--key-only", action="store_true", help="print only the key (the key id goes to stderr)")
    new_key = aud_commands.add_parser(
        "new-key", help="start signing with a new key (recorded in every world's chain; stop serve first)",
        description="Make a new signing key and write a key change record (the old and new public "
        "keys) into every world's chain, signed by the new key; the old key file is kept beside it "
        "as receipt.key.KEYID.old. serve refuses a trail signed by another key than its own, so this "
        "is the only way to change it: use it when the key was lost or leaked. Stop serve first (on "
        "PostgreSQL, every serve process of the database): beside a running one it is refused, "
        "naming it. Then start serve with the new key (docs/security.md, \"Keys\").")
    add_db(new_key)
    add_key(new_key)
    add_signing_key(new_key, "replaced")
    repair = aud_commands.add_parser(
        "repair", help="rebuild a world's state from its audit chain (stop serve first)",
        description="Rebuild WORLD's state (charges spent, fated results, pending choices, decks, "
        "ledgers, stored replies, settings) from what its chain's records produce, and seal it "
        "in a new signed head, after `audit verify` named state rows that differ. The bridge "
        "refuses to serve a world whose state does not match until it is repaired. Nothing is "
        "written when the chain itself fails (restore the database from a backup instead). Stop "
        "serve first (on PostgreSQL, every serve process of the database): beside a running one "
        "it is refused, naming it.")
    add_db(repair)
    add_key(repair)
    add_signing_key(repair, "the one serve uses")
    repair.add_argument("--world", required=True, type=world_id, help="the world id (game.world.id)")

    report = aud_commands.add_parser(
        "report",
        help="an HTML page of a world's Fate: dice fairness, Fate per actor and session, outcomes",
        description="Write one self-contained HTML page (charts inline, no script, opens in any "
        "browser) from a world's audit trail: the bridge's d100 rolls against a fair die (histogram "
        "and chi-square test), Fate spent and kept per actor and per session (a session: no gap of "
        "more than 4 hours), outcomes per ruleset, tarot cards drawn against their expected "
        "frequency, the pool ledger over time. Needs nothing beyond fate-bridge itself. "
        "The GM's audit window downloads the same page.",
        epilog="Example: fate-bridge audit report --world my-world --since 2026-11-01 --out report.html",
    )
    add_db(report)
    report.add_argument("--world", required=True, type=world_id, help="the world id (game.world.id)")
    add_period(report, "2026-11-29")
    report.add_argument("--out", type=Path, default=Path("report.html"), help="file to write (default report.html)")
    report.add_argument("--lang", metavar="LANG", default=None,
                        help="the page's language (en, de, de-DE...; default: the world's, from its "
                        "module's last hello; English when unknown)")

    move = commands.add_parser(
        "migrate",
        help="copy worlds, state and audit trails to another database (e.g. SQLite to PostgreSQL)",
        description="Copy every world, its Fate state, its event replies, its audit trail and "
        "signed checkpoints from one database into another, empty one, row for row: `audit "
        "verify` passes on the copy as on the original. Stop `fate-bridge serve` first.",
        epilog="Example: fate-bridge migrate --from sqlite:~/.local/share/fate-bridge/bridge.sqlite3 "
        "--to postgresql://fate@db.example.org/fate",
    )
    move.add_argument("--from", dest="source", required=True, type=source_db, metavar="DB",
                      help="sqlite:PATH (or a file path) or a postgresql:// URL")
    move.add_argument("--to", dest="target", required=True, type=source_db, metavar="DB",
                      help="an empty database: a postgresql:// URL, or sqlite:PATH")

    resolve = commands.add_parser(
        "resolve",
        help="run decisions off-line: client messages as JSON lines in, replies out",
        description="Read client messages (JSON, one per line) on stdin and write the bridge's "
        "replies (JSON lines) on stdout, through the same code the server runs, with an "
        "in-memory store. A line may carry \"dice\": [n, ...], the values the bridge's own "
        "rolls take in order (d100 values for sohl). Lines without hello are one world "
        f"({RESOLVE_WORLD!r}) with default settings; a settings line changes them.",
        epilog="Example: fate-bridge resolve --cards < examples/sohl-session.jsonl",
    )
    resolve.add_argument("--cards", action="store_true",
                         help="also print each chat card as text on stderr")
    resolve.add_argument("--db", type=database_arg, default=None,
                         help="keep state in this SQLite file instead of memory (its audit trail is "
                         "signed with the audit key, as serve does, so `audit verify` checks it)")
    add_key(resolve)
    _add_operator_commands(commands, add_db, add_key, add_signing_key)
    return parser


def _add_tls_ca(p: argparse.ArgumentParser, scheme: str) -> None:
    """``--tls-ca PEM``: trust a private CA when connecting over ``scheme`` (wss://, https://)."""
    p.add_argument("--tls-ca", type=Path, metavar="PEM", help=f"trust this CA for {scheme} (a private CA)")


def _add_operator_commands(commands, add_db, add_key, add_signing_key) -> None:
    """The parsers of ``doctor``, ``status``, ``backup``, ``restore`` and ``release`` (run by
    :mod:`bridge.ops_cli`)."""
    doc = commands.add_parser(
        "doctor",
        help="find why a table does not connect, and say how to fix it",
        description="Check this machine's bridge files: the database (folder writable, schema, "
        "integrity), the audit key (present, owner-only, signed the stored checkpoints), the "
        "receipt signing key (present, owner-only, signed the trail's heads), the "
        "registered worlds, the worlds serve holds in memory at most, the port, --origins and the TLS files. With --url it then connects "
        "as the Foundry module would (with --world and --token: also sends hello) and explains "
        "what fails: nothing listening, a certificate for another name, ws:// from an https:// "
        "Foundry page, an Origin not allowed, an unknown world or a wrong token. Every problem "
        "comes with its fix. Exit 0 when nothing failed, 1 otherwise.",
        epilog="Example: fate-bridge doctor --url wss://foundry.example.org/fate-bridge/ "
        "--foundry-url https://foundry.example.org --world my-world --token TOKEN. "
        "When a GM's browser holds the world's link, the token is checked through /status and "
        "no hello is sent (a hello would take the link from the GM).",
    )
    add_db(doc)
    add_key(doc)
    add_signing_key(doc, "the one serve uses")
    doc.add_argument("--host", default=DEFAULT_HOST, help=f"the --host serve uses (default {DEFAULT_HOST})")
    doc.add_argument("--port", type=tcp_port, default=DEFAULT_PORT, help=f"the --port serve uses (default {DEFAULT_PORT})")
    doc.add_argument("--origins", nargs="+", metavar="ORIGIN", help="the --origins serve uses")
    doc.add_argument("--tls-cert", type=Path, help="the --tls-cert serve uses")
    doc.add_argument("--tls-key", type=Path, help="the --tls-key serve uses")
    doc.add_argument("--max-worlds-in-memory", type=_positive(int), default=MAX_WORLDS_IN_MEMORY, metavar="N",
                     help=f"the --max-worlds-in-memory serve uses (default {MAX_WORLDS_IN_MEMORY})")
    doc.add_argument("--url", help="the bridge URL set in the module, e.g. ws://192.168.1.20:8765: "
                     "connect to it as the module would (the port check is then skipped)")
    doc.add_argument("--foundry-url", type=bridge_url, metavar="URL",
                     help="the address players open Foundry at, e.g. https://foundry.example.org: "
                     "its origin is sent as the browser would, and https:// with a ws:// --url is caught")
    doc.add_argument("--world", type=world_id, metavar="WORLD_ID", help="with --url: send hello for this world")
    doc.add_argument("--token", help="with --world: the world's token, as pasted in the module")
    _add_tls_ca(doc, "wss://")

    stat = commands.add_parser(
        "status",
        help="which worlds are connected, their GM, recent decisions, overlay viewers",
        description="Ask the running bridge (GET /status) which worlds are connected, which GM "
        "holds each link (name, Foundry and module version) and since when, how many decisions "
        "each made in the last hour and the last one, and how many overlay viewers watch. The "
        "bridge answers this machine; from elsewhere give the world's --token (that world only).",
    )
    stat.add_argument("--url", type=bridge_url, default=f"http://{DEFAULT_HOST}:{DEFAULT_PORT}",
                      help=f"the bridge's address (default http://{DEFAULT_HOST}:{DEFAULT_PORT})")
    stat.add_argument("--token", help="a world's token: needed when asking from another machine")
    _add_tls_ca(stat, "https://")

    back = commands.add_parser(
        "backup",
        help="copy the database safely, even while serve runs",
        description="Write a consistent copy of the database to PATH with SQLite's online backup "
        "(every decision committed before it, none half-written), safe while serve runs. The "
        "keys (audit.key and receipt.key) are kept apart from the database: copy them once, somewhere else.",
        epilog="Example (nightly, from cron): fate-bridge backup ~/backups/fate-$(date +%F).sqlite3",
    )
    back.add_argument("path", type=Path, metavar="PATH", help="the backup file to write")
    back.add_argument("--overwrite", action="store_true", help="replace PATH if it exists")
    add_db(back)
    rest = commands.add_parser(
        "restore",
        help="put a backup in the database's place (stop serve first)",
        description="Check that PATH is an intact fate-bridge database, keep the current database "
        "beside itself as DB.before-restore-TIME, and put PATH in its place. Stop serve first; "
        "then run `fate-bridge audit verify` with the same audit key.",
    )
    rest.add_argument("path", type=Path, metavar="PATH", help="a file written by `fate-bridge backup`")
    add_db(rest)

    rel = commands.add_parser(
        "release",
        help="write the Foundry module's manifest and zip for a release",
        description="Write module.json and fate-bridge.zip (the module's runtime files only: "
        "scripts, styles, lang, README, LICENSE) into --out, for the GitHub release of this "
        "version (.github/workflows/release.yml runs it on each tag vX.Y.Z): the manifest's "
        "manifest is the newest release's module.json "
        f"({release_manifest_url('OWNER/REPO')}), its download this "
        "version's zip. With --public-url they point at that address's /module/ instead "
        "(where serve offers them). The bridge itself builds with `python -m build`.",
    )
    rel.add_argument("--out", type=Path, default=Path("dist"), help="folder to write (default dist/)")
    rel.add_argument("--repository", type=github_repository, default=REPOSITORY, metavar="OWNER/REPO",
                     help=f"the GitHub repository the release is published in (default {REPOSITORY})")
    rel.add_argument("--tag", metavar="TAG",
                     help=f"refuse unless TAG is this version's tag, {release_tag()} (the workflow passes "
                     "the tag it runs for)")
    rel.add_argument("--public-url", type=bridge_url, metavar="URL",
                     help="the address the bridge will be reached at, e.g. https://foundry.example.org/fate-bridge/")


_LIMIT_FLAGS = (  # (flag, Limits field, type, help); docs/security.md says what each protects
    ("--max-connections", "connections_total", int,
     "open connections in total, all addresses together; a host serving many tables raises it"),
    ("--max-connections-per-address", "connections_per_address", int,
     "open connections from one IP address (a GM's browser, its overlay pages, reloads); behind a "
     "reverse proxy every client has the proxy's address: raise it to the total"),
    ("--max-pending-hellos", "pending_hello", int,
     "connections in total that have not completed hello yet; past it the oldest is dropped for "
     "the new one (and each is closed after 10 s anyway)"),
    ("--connect-rate", "connect_rate", float,
     "new connections per second from one IP address, on average"),
    ("--connect-burst", "connect_burst", int,
     "new connections from one IP address at once (every overlay page reconnecting after a restart)"),
    ("--free-failed-hellos", "free_failed_hellos", int,
     "failed hellos (unknown world, wrong token) for one world from one IP address before that "
     "world is locked out for the address for 1 s, then 2 s, 4 s ... for each further failure "
     "(the whole address alike past 4 times as many for all worlds together)"),
    ("--max-hello-delay", "max_hello_delay", float,
     "the longest such lockout, in seconds: how long a correct token from a flooding address waits "
     "once the flood stops"),
    ("--failed-hello-rate", "failed_hello_rate", float,
     "failed hellos per second, all addresses together, past which addresses that never completed "
     "a hello are asked to retry later (a distributed token-guessing flood)"),
    ("--new-address-rate", "new_address_rate", float,
     "new connections per second, all IP addresses that never completed a hello together (a flood "
     "from many addresses); past it they get a 503 before their handshake, while addresses that "
     "did (the GMs, their overlay pages) are not counted"),
    ("--new-address-burst", "new_address_burst", int,
     "new connections at once from such addresses (every table reconnecting after a restart)"),
)


def _limit_flags(serve: argparse.ArgumentParser) -> None:
    """The connection and hello limits of ``serve`` (one flag per :class:`Limits` field)."""
    defaults = Limits()
    group = serve.add_argument_group("connection limits (see docs/security.md)")
    for flag, name, kind, text in _LIMIT_FLAGS:
        group.add_argument(flag, dest=name, type=_positive(kind), default=getattr(defaults, name),
                           metavar="N", help=f"{text} (default {getattr(defaults, name):g})")
    group.add_argument("--trusted-address", dest="trusted_addresses", action="append", type=_ip_address,
                       default=[], metavar="IP",
                       help="an address counted as a GM's (it skips the new-address and failed-hello "
                       "budgets): a load balancer's or a monitor's health checks, which never say hello, "
                       "must pass a flood; one address each, not a range: repeat for several (always "
                       f"trusted: the loopback addresses {' and '.join(defaults.trusted_addresses)}, so a "
                       "reverse proxy or a health check on this machine)")


def serve_limits(args: argparse.Namespace) -> Limits:
    """The :class:`Limits` of ``serve``'s parsed flags: one field a flag, and the loopback
    addresses trusted always, with each ``--trusted-address`` after them."""
    return Limits(**{name: getattr(args, name) for _, name, _, _ in _LIMIT_FLAGS},
                  trusted_addresses=(*LOOPBACK, *args.trusted_addresses))


def _ip_address(text: str) -> str:
    """An argparse type: an IP address, written as the bridge sees peers (``::1``, not ``[::1]``)."""
    import ipaddress
    try:
        return str(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an IP address (e.g. 10.0.0.5 or fd00::5)") from None


def _positive(kind: type[int] | type[float]) -> Callable[[str], int | float]:
    """An argparse type: a number of ``kind`` above 0, else a message saying so."""
    def parse(text: str) -> int | float:
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not {'a whole number' if kind is int else 'a number'}") from None
        if value <= 0:
            raise argparse.ArgumentTypeError(f"{text} must be above 0")
        return value
    return parse


_TOKEN_SHAPE = re.compile(r"[A-Za-z0-9_-]{43}")  # 32 bytes in base64url: a token, a public key
_KEY_FLAGS = ("--token", "--public-key")  # flags whose value has that shape


def _tokens_as_values(argv: list[str]) -> list[str]:
    """``--token TOKEN`` as ``--token=TOKEN`` when the value has a token's shape; ``--public-key
    KEY`` alike.

    One token in 64 starts with ``-``, and argparse would take it for an option ("expected one
    argument"). Tokens made since are never drawn so; old ones and public keys may."""
    out = list(argv)
    for i in range(len(out) - 2, -1, -1):
        if out[i] in _KEY_FLAGS and out[i + 1].startswith("-") and _TOKEN_SHAPE.fullmatch(out[i + 1]):
            out[i:i + 2] = [f"{out[i]}={out[i + 1]}"]
    return out


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``fate-bridge``; returns the exit code."""
    args = _parser().parse_args(_tokens_as_values(sys.argv[1:] if argv is None else argv))
    try:
        if args.command == "serve":
            from . import logs

            logs.configure(args.log_format)
            return _run(_serve(args))
        if args.command == "world":
            return _world(args)
        if args.command == "schema":
            return _schema(args)
        if args.command == "migrate":
            return _run(_migrate(args))
        if args.command == "resolve":
            from . import logs

            logs.configure("console", level="warning")
            return _run(_resolve(args))
        if args.command == "audit":
            from .audit_cli import run_audit

            return _run(run_audit(args))
        from . import ops_cli

        if args.command == "doctor":
            return _run(ops_cli.run_doctor(args))
        return {"status": ops_cli.run_status, "backup": ops_cli.run_backup,
                "restore": ops_cli.run_restore, "release": ops_cli.run_release}[args.command](args)
    except (ConfigError, StorageUnavailable) as exc:
        print(f"fate-bridge: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # the reader of our output went away (``fate-bridge audit list | head``): stop quietly,
        # as other command-line tools do (Python's docs, "Note on SIGPIPE")
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


def _run(coro: Coroutine[Any, Any, int]) -> int:
    """Run ``coro`` on uvloop when the ``fast`` extra installed it, else on asyncio's loop.

    This is outside the ``except``: a missing uvloop is no context of what the command raises."""
    import asyncio

    try:
        import uvloop
    except ImportError:
        run = asyncio.run
    else:
        run = uvloop.run
    return run(coro)


async def _serve(args: argparse.Namespace) -> int:
    from .server import tls_context
    from .store import backend_of

    if (args.tls_cert is None) != (args.tls_key is None):
        raise ConfigError("--tls-cert and --tls-key go together: give both, or neither for ws://")
    tls = tls_context(args.tls_cert, args.tls_key) if args.tls_cert else None
    db = args.db or default_db()
    backend = backend_of(db)
    if args.reuse_port and not backend.SHARED:
        raise ConfigError("--reuse-port shares the port between processes, which needs a shared "
                          "postgresql:// --db (processes on one SQLite file would each take the "
                          "same world); see docs/deploy.md")
    with backend.holding(db, "serve"):  # one serving process per SQLite file (a second one's state would go stale)
        return await _serve_held(args, db, tls)


async def _serve_held(args: argparse.Namespace, db: Path | str, tls: ssl.SSLContext | None) -> int:
    """``serve`` once the database is ours (see :func:`_serve`)."""
    from .audit_cli import check_keys, make_missing_keys
    from .server import Drain, serve_until, start, stop_on_signals
    from .startup import bridge_address, listen_problem, reach_lines
    from .store import backend_of, open_store

    key_path = args.audit_key or default_audit_key()
    signing_path = args.signing_key or default_signing_key(key_path)
    audit_key, signing_key = load_key(key_path, create=False), load_signing_key(signing_path, create=False)
    check_keys(db, audit_key, key_path, signing_key, signing_path)  # never replaced silently; refused: nothing written
    store = await open_store(db, audit_key=audit_key, signing_key=signing_key, max_worlds=args.max_worlds_in_memory)
    try:
        make_missing_keys(store, key_path, signing_path)  # a trail nobody signed yet: the first start
    except ConfigError:
        await store.close()
        raise
    cluster = None
    stop, drain = stop_on_signals(), Drain()
    try:
        if backend_of(db).SHARED:  # the other processes of the database are told what this one does
            from .cluster import Cluster
            cluster = await Cluster.open(str(db))
        rate = None if args.rate_limit <= 0 else (args.rate_limit, int(args.rate_limit * RATE_BURST_SECONDS))
        limits = serve_limits(args)
        server = await start(store, args.host, args.port, origins=args.origins, tls=tls, rate=rate,
                             public_url=args.public_url, limits=limits, cluster=cluster,
                             reuse_port=args.reuse_port, drain=drain)
    except (OSError, ConfigError) as exc:
        if cluster is not None:
            await cluster.close()
        await store.close()
        if isinstance(exc, ConfigError):
            raise
        raise ConfigError(listen_problem(args.host, args.port, exc)) from None
    port = server.sockets[0].getsockname()[1] if server.sockets else args.port
    worlds = await store.worlds()
    scheme = "wss" if tls else "ws"
    print(f"fate-bridge {__version__} listening on {scheme}://{args.host}:{port} (database: {db_label(db)}, "
          f"audit key: {key_path})", file=sys.stderr)
    print("\n".join(reach_lines(args.host, port, tls is not None, args.public_url)), file=sys.stderr)
    if not worlds:
        print(
            "No world is registered yet. In another terminal run:\n"
            f"  {this_command()} world add YOUR_WORLD_ID --db {db_label(db)}\n"
            "then install the Foundry module (the manifest URL above), enable it in your world, "
            f"and in its settings set the bridge URL to {bridge_address(args.host, port, tls is not None)} and paste "
            "the token.",
            file=sys.stderr,
        )
    else:
        print("Worlds: " + ", ".join(w.world_id for w in worlds), file=sys.stderr)
    for problem in store.invalid_worlds.values():  # one line each; the other worlds are served
        print(problem, file=sys.stderr)
    await serve_until(stop, server, drain, store, cluster)
    return 0


def _world(args: argparse.Namespace) -> int:
    """The ``world`` commands, on the database's :class:`~bridge.store.base.WorldAdmin`, not its store.

    No event loop, no audit chain. They run beside a running serve, which reads what they write."""
    from .credentials import hash_token, new_token
    from .store.backends import backend_of

    db = args.db or default_db()
    backend = backend_of(db)
    makes = args.world_command == "add" or (args.world_command == "invite" and args.action is None)
    if not makes and not backend.exists(db):
        # only `add` and `invite` make a database: a mistyped --db must not leave an empty one behind
        raise ConfigError(f"no database at {db}: pass the same --db as `fate-bridge serve`, or "
                          "register a world first with `fate-bridge world add WORLD_ID`")
    admin = backend.open_world_admin(db)
    try:
        if args.world_command in ("add", "rotate-token"):
            token = new_token()
            if args.world_command == "add":
                admin.add_world(args.world_id, hash_token(token))
                done = f"World {args.world_id!r} registered in {db_label(db)}."
            else:
                admin.set_token(args.world_id, hash_token(token))
                done = f"World {args.world_id!r} has a new token; the old one no longer works."
            if args.token_only:
                print(token)
            else:
                print(f"{done}\nToken (shown once; paste it into the fate-bridge module settings "
                      f"as GM):\n  {token}")
        elif args.world_command == "viewer-key":
            key = admin.viewer_key(args.world_id, new_token(), rotate=args.rotate)
            if args.key_only:
                print(key)
            else:
                print(f"Overlay viewer key of {args.world_id!r}{' (new)' if args.rotate else ''}:\n"
                      f"  {key}\nOverlay URL (an OBS browser source, 1920x1080):\n"
                      f"  {overlay_url(args.bridge_url, args.world_id, key)}")
        elif args.world_command == "invite":
            _invite(admin, args, db)
        elif args.world_command == "pending":
            _pending(admin, args)
        elif args.world_command == "remove":
            admin.remove_world(args.world_id)
            db_flag = f"--db {shlex.quote(db_label(db))} " if args.db else ""
            again = (f": `{this_command()} world add {db_flag}{world_id_arg(args.world_id)}` later resumes where it was "
                     "(a result fated before stays fated)") if FOUNDRY_ID.fullmatch(args.world_id) else ""
            print(f"World {args.world_id!r} removed: its token and viewer key no longer work. Its "
                  f"Fate state and audit trail stay in {db_label(db)}{again}.")
        else:
            worlds = admin.worlds()
            for world in worlds:
                print(f"{world.world_id}\tfate_option={world.settings.fate_option}")
            for problem in admin.invalid_worlds.values():
                print(problem, file=sys.stderr)
            if not worlds:
                print(f"No world is registered in {db}: `fate-bridge world add WORLD_ID` registers one.",
                      file=sys.stderr)
        return 0
    finally:
        admin.close()


def _invite(admin: WorldAdmin, args: argparse.Namespace, db: Path | str) -> None:
    """``world invite``: make a code and print it once, or ``list`` / ``revoke ID``."""
    from datetime import UTC, datetime, timedelta

    from .credentials import hash_token, new_invite_code
    from .store.world_values import Invite
    from .store.schema import utc_now, utc_text

    if args.action == "revoke":
        if not args.invite_id:
            raise ConfigError("`world invite revoke` needs the code's ID (see `fate-bridge world invite list`)")
        admin.revoke_invite(args.invite_id.split(".")[0])
        print(f"Invite code {args.invite_id.split('.')[0]!r} revoked: it registers no world from now on "
              "(worlds registered with it keep their tokens).")
    elif args.action == "list":
        now = utc_now()
        invites = admin.invites()
        for invite in invites:
            state = ("revoked" if invite.revoked_at else "expired" if invite.expires_at and invite.expires_at <= now
                     else "used up" if invite.max_uses is not None and invite.uses >= invite.max_uses else "active")
            print(f"{invite.invite_id}\t{state}\tuses {invite.uses}/{invite.max_uses or 'any'}"
                  f"\texpires {invite.expires_at or 'never'}{chr(9) + 'approval' if invite.approval else ''}")
        if not invites:
            print("No invite code yet: `fate-bridge world invite` makes one.", file=sys.stderr)
    else:
        if args.invite_id:
            raise ConfigError(f"unexpected {args.invite_id!r}: `world invite` takes list, revoke ID or nothing")
        code = new_invite_code()
        expires = None if args.expires is None else utc_text(datetime.now(UTC) + timedelta(seconds=args.expires))
        admin.add_invite(Invite(code.invite_id, hash_token(code.secret), args.max_uses or None, expires,
                                      args.approve))
        if args.code_only:
            print(code.text)
            return
        uses = "any number of worlds" if not args.max_uses else f"{args.max_uses} world{'s' * (args.max_uses > 1)}"
        print(f"Invite code (shown once; registers {uses}, {'until ' + expires if expires else 'never expires'}"
              f"{', each after your approval: `fate-bridge world pending`' if args.approve else ''}):\n"
              f"  {code.text}\nThe GM enters it with this bridge's address in Foundry: Game Settings > "
              "Configure Settings > Fate Bridge > Invite code. Revoke it with "
              f"`fate-bridge world invite revoke {code.invite_id}{' --db ' + shlex.quote(db_label(db)) if args.db else ''}`.")


def _pending(admin: WorldAdmin, args: argparse.Namespace) -> None:
    """``world pending``: list the registration requests, or ``approve`` / ``deny WORLD_ID``."""
    if args.action is not None:
        if args.world_id is None:
            raise ConfigError(f"`world pending {args.action}` needs the request's WORLD_ID (see `fate-bridge world pending`)")
        admin.decide_registration(args.world_id, args.action == "approve")
        print(f"World {args.world_id!r} approved: registered; its token goes to the browser that asked when it "
              "asks again (within a minute)." if args.action == "approve" else
              f"Registration of {args.world_id!r} denied: the browser that asked is told so.")
        return
    requests = admin.registration_requests()
    for request in requests:
        print(f"{request.world_id}\t{request.state}\tfrom {request.address}\tat {request.requested_at}"
              f"\tcode {request.invite_id}")
    if not requests:
        print("No registration request: codes made with `fate-bridge world invite --approve` make them.",
              file=sys.stderr)


async def _migrate(args: argparse.Namespace) -> int:
    from .migrate import migrate

    counts = await migrate(args.source, args.target)
    print(f"Copied {db_label(args.source)} to {db_label(args.target)}: "
          + ", ".join(f"{n} {table}" for table, n in counts.items())
          + ". Check it with: fate-bridge audit verify --db " + db_label(args.target))
    return 0


def overlay_url(bridge_url: str, world_id: str, key: str) -> str:
    """The overlay page's URL for a bridge address.

    ``ws``/``wss`` become ``http``/``https``. A path such as a proxy's ``/fate-bridge/`` is kept."""
    from .session import OVERLAY_PATH

    parts = urlsplit(bridge_url)
    scheme = {"ws": "http", "wss": "https"}.get(parts.scheme, parts.scheme)
    base = urlunsplit((scheme, parts.netloc, parts.path.rstrip("/") + "/", "", ""))
    return urljoin(base, OVERLAY_PATH) + "?" + urlencode({"world": world_id, "key": key})


def _schema(args: argparse.Namespace) -> int:
    from . import json_schema as schema

    if args.check:
        stale = schema.stale_files(args.out)
        if stale:
            print(f"stale or missing in {args.out}: {', '.join(stale)}; run `fate-bridge schema`",
                  file=sys.stderr)
            return 1
        print(f"{args.out}: up to date")
        return 0
    for name in schema.write(args.out):
        print(args.out / name)
    return 0


def _split_dice(line: bytes) -> tuple[bytes, list[int] | None]:
    """A resolve line without its ``dice`` key, and the dice.

    The dice are None when absent or unreadable. An unreadable, oversized or too deeply nested line
    goes to the session as is, and is answered ``bad_message``."""
    import msgspec

    from .errors import BadMessage
    from .wire.guard import check

    try:
        check(line)
        obj = _line_decoder().decode(line)
    except (BadMessage, msgspec.DecodeError, msgspec.ValidationError):
        return line, None
    if "dice" not in obj:
        return line, None
    dice = obj.pop("dice")
    if not isinstance(dice, list) or not all(type(d) is int for d in dice):
        return line, None  # the session refuses the unknown "dice" field by name
    return msgspec.json.encode(obj), dice


@functools.cache
def _line_decoder() -> Any:
    """A resolve line as a JSON object (msgspec's decoder, made once)."""
    import msgspec

    return msgspec.json.Decoder(dict)


async def _resolve(args: argparse.Namespace) -> int:
    from .store import backend_of

    db = args.db or ":memory:"
    with backend_of(db).holding(db, "resolve"):  # its decisions, like serve's, need the file alone
        return await _resolve_held(args)


async def _resolve_held(args: argparse.Namespace) -> int:
    """``resolve`` once its database is its own (see :func:`_resolve`)."""
    from .dice import ScriptedDice, SecretDice
    from .replies import card_text
    from .session import Session
    from .store import open_store

    key = load_key(args.audit_key or default_audit_key(), create=True) if args.db else None
    store = await open_store(args.db or ":memory:", audit_key=key)
    session = Session(store, SecretDice(), trusted=True, default_world=RESOLVE_WORLD)
    replayed = 0
    try:
        if await store.world(RESOLVE_WORLD) is None:
            await store.add_world(RESOLVE_WORLD, None)
        for line in sys.stdin.buffer:  # bytes: a line that is not UTF-8 is answered, not fatal
            if not line.strip():
                continue
            frame, dice = _split_dice(line)
            reply = await session.receive(frame, None if dice is None else ScriptedDice(dice))
            replayed += reply.replayed
            for out in reply.frames:
                sys.stdout.write(out.decode() + "\n")
                if args.cards:
                    text = card_text(out)
                    if text:
                        sys.stderr.write(text + "\n")
            sys.stdout.flush()
    finally:
        await store.close()
    if replayed:  # the contract's idempotency (docs/protocol.md), silent until now
        where = f"in {db_label(args.db)} (this run or an earlier one)" if args.db else "earlier in this input"
        print(f"note: {replayed} line{'s' if replayed != 1 else ''} reused an event_id already decided "
              f"{where}: {'their' if replayed != 1 else 'its'} stored "
              f"repl{'ies were' if replayed != 1 else 'y was'} returned and nothing was decided again; "
              f"give new event_ids{' (or another --db)' if args.db else ''} to decide again", file=sys.stderr)
    return 0
