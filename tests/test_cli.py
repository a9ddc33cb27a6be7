"""The command line: world registration, schema, and ``resolve`` on the SoHL sample card."""

from __future__ import annotations

import html.parser
import json
import sqlite3
from pathlib import Path

import pytest

from bridge import cli
from bridge.cli import main
from bridge.errors import ConfigError
from bridge.session import hash_token, new_token
from bridge.config import MAX_WORLDS_IN_MEMORY

from .helpers import run_bridge as run
from .helpers import sample as fixture_sample

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "sohl-session.jsonl"


class TestWorld:
    def test_add_prints_the_token_once_and_stores_only_its_hash(self, tmp_path, capsys):
        db = tmp_path / "b.sqlite3"
        assert main(["world", "add", "my-world", "--db", str(db), "--token-only"]) == 0
        token = capsys.readouterr().out.strip()
        assert len(token) >= 40
        rows = sqlite3.connect(db).execute("SELECT world_id, token_hash FROM worlds").fetchall()
        assert rows[0][0] == "my-world" and rows[0][1] != token and token not in db.read_bytes().decode("latin-1")

    def test_add_twice_is_refused_with_a_hint(self, tmp_path, capsys):
        db = str(tmp_path / "b.sqlite3")
        assert main(["world", "add", "w", "--db", db]) == 0
        assert "Token (shown once" in capsys.readouterr().out
        assert main(["world", "add", "w", "--db", db]) == 2
        assert "registered already; `fate-bridge world rotate-token`" in capsys.readouterr().err

    def test_rotate_token_issues_a_new_token(self, tmp_path, capsys):
        db = str(tmp_path / "b.sqlite3")
        main(["world", "add", "w", "--db", db, "--token-only"])
        first = capsys.readouterr().out.strip()
        assert main(["world", "rotate-token", "w", "--db", db, "--token-only"]) == 0
        second = capsys.readouterr().out.strip()
        assert second != first and len(second) >= 40
        stored = sqlite3.connect(db).execute("SELECT token_hash FROM worlds").fetchone()[0]
        assert stored == hash_token(second)

    def test_rotate_or_remove_an_unknown_world(self, tmp_path, capsys):
        db = str(tmp_path / "b.sqlite3")
        assert main(["world", "add", "other", "--db", db, "--token-only"]) == 0
        assert main(["world", "rotate-token", "nope", "--db", db]) == 2
        assert "not registered" in capsys.readouterr().err
        assert main(["world", "remove", "nope", "--db", db]) == 2

    def test_remove_keeps_the_audit_trail(self, tmp_path, capsys):
        db = str(tmp_path / "b.sqlite3")
        main(["world", "add", "w", "--db", db, "--token-only"])
        conn = sqlite3.connect(db)
        conn.execute("INSERT INTO audit (world_id, seq, ts, type, outcome, summary, record, prev_hash, hash)"
                     " VALUES ('w', 1, 't', 'settings', 'settings', '{}', '{}', 'p', 'h')")
        conn.commit()
        assert main(["world", "remove", "w", "--db", db]) == 0
        assert "Fate state and audit trail stay" in capsys.readouterr().out
        assert main(["world", "list", "--db", db]) == 0
        assert capsys.readouterr().out == ""
        assert conn.execute("SELECT token_hash, removed_at IS NOT NULL FROM worlds").fetchone() == (None, 1)
        assert conn.execute("SELECT count(*) FROM audit").fetchone()[0] == 1

    @pytest.mark.parametrize("command", [["list"], ["remove", "w"], ["rotate-token", "w"], ["viewer-key", "w"]])
    def test_only_add_creates_a_database(self, command, tmp_path, capsys):
        """A mistyped --db used to leave an empty database behind and list nothing, silently."""
        db = tmp_path / "typo.sqlite3"
        assert main(["world", *command, "--db", str(db)]) == 2
        err = capsys.readouterr().err
        assert f"no database at {db}" in err and "same --db as `fate-bridge serve`" in err
        assert not db.exists()

    def test_list_says_when_no_world_is_registered(self, tmp_path, capsys):
        db = str(tmp_path / "b.sqlite3")
        main(["world", "add", "w", "--db", db, "--token-only"])
        main(["world", "remove", "w", "--db", db])
        capsys.readouterr()
        assert main(["world", "list", "--db", db]) == 0
        out, err = capsys.readouterr()
        assert out == "" and "No world is registered in" in err and "world add WORLD_ID" in err

    def test_list(self, tmp_path, capsys):
        db = str(tmp_path / "b.sqlite3")
        main(["world", "add", "beta", "--db", db, "--token-only"])
        main(["world", "add", "alpha", "--db", db, "--token-only"])
        capsys.readouterr()
        assert main(["world", "list", "--db", db]) == 0
        assert capsys.readouterr().out == "alpha\tfate_option=everyone\nbeta\tfate_option=everyone\n"

    def test_unusable_db_path_is_a_clear_error(self, tmp_path, capsys):
        not_a_db = tmp_path / "notes.txt"
        not_a_db.write_text("hello, this is not SQLite" * 100)
        assert main(["world", "list", "--db", str(not_a_db)]) == 2
        err = capsys.readouterr().err
        assert "is not a readable fate-bridge database" in err and "fate-bridge restore" in err


class TestSchemaCommand:
    def test_check_passes_on_the_repo(self, capsys):
        assert main(["schema", "--check", "--out", str(ROOT / "schemas")]) == 0

    def test_check_fails_on_an_empty_folder(self, tmp_path, capsys):
        assert main(["schema", "--check", "--out", str(tmp_path)]) == 1
        assert "run `fate-bridge schema`" in capsys.readouterr().err


class TestHelp:
    @pytest.mark.parametrize("command", [[], ["serve"], ["world", "add"], ["resolve"], ["schema"]])
    def test_help_teaches(self, command):
        result = run(*command, "--help")
        assert result.returncode == 0 and "usage: fate-bridge" in result.stdout


def replies(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


class TestResolveExample:
    """README's example: the recorded session made from the SoHL sample card."""

    def test_example_session(self):
        result = run("resolve", "--cards", stdin=EXAMPLE.read_text())
        assert result.returncode == 0, result.stderr
        out = replies(result.stdout)
        assert [r["type"] for r in out] == ["settings_applied", "test_graded", "fate_resolved", "error",
                                           "test_graded", "fate_resolved", "fate_resolved", "test_graded"]
        graded, spent, refused = out[1], out[2], out[3]
        assert (graded["level"], graded["label"], graded["fate"]["fate_ml"]) == (0, "MF", 77)
        assert (spent["outcome"], spent["label_before"], spent["label_after"]) == ("spent", "MF", "MS")
        assert spent["point"]["charges_after"] == 1
        assert refused["code"] == "already_fated"
        assert (out[5]["outcome"], out[6]["outcome"], out[6]["label_after"]) == ("choice", "spent", "CS+1")
        assert out[6]["point"]["charges_after"] == 0
        assert out[7]["fate"]["reasons"] == ["aura_governed", "no_points"]
        assert "Level: MF (Marginal Failure) → MS (Marginal Success)" in result.stderr
        assert "Fate Test: 34 vs Fate ML 77: MS (Marginal Success)" in result.stderr

    def test_bad_line_is_answered_and_the_rest_still_runs(self):
        lines = "this is not json\n" + EXAMPLE.read_text().splitlines()[1] + "\n"
        out = replies(run("resolve", stdin=lines).stdout)
        assert out[0]["code"] == "bad_message"
        assert out[1]["type"] == "test_graded"

    def test_without_dice_the_bridge_rolls_its_own(self):
        lines = EXAMPLE.read_text().splitlines()
        spend = json.loads(lines[2])
        del spend["dice"]
        out = replies(run("resolve", stdin="\n".join([lines[1], json.dumps(spend)]) + "\n").stdout)
        assert 1 <= out[1]["fate_roll"] <= 100
        assert out[1]["outcome"] in {"lost", "kept", "spent", "choice"}


class TestResolveCardsRefusals:
    """``resolve --cards`` prints every refusal (an ``error`` reply, any ruleset) as one line of
    text on stderr, in the order of the replies: ``[refused REF] CODE: message (field F)``."""

    @pytest.mark.parametrize(
        ("example", "lines"),
        [
            ("sohl", ["[refused ev-3] already_fated: this result has been fated already (S11) (field message_id)"]),
            ("mythic", [
                "[refused ev-7] forbidden: only a GM may change the Fate Chart settings (field user_id)",
                "[refused ev-9] bad_message: unknown rank 'godlike': use a Fate Chart rank",
            ]),
            ("pool", [
                "[refused ev-09] not_eligible: 'Bren' is a retainer: only player characters have Fate (P5, P12)"
                " (field roll_id)",
                "[refused ev-13] no_charges: 'Aldric' holds 0 Fate, 1 needed (Destiny is not Fate, P8) (field fate)",
            ]),
            ("hmtw", [
                "[refused ev-6] forbidden: only the player who drew may push fate (H6) (field user_id)",
                "[refused ev-8] not_eligible: 'the clockwork mechanism' is bound by fate after test tof-clockwork",
                "[refused ev-12] not_eligible: fate is pushed only after a failure; this test's outcome: "
                "Great success (H6) (field test_id)",
            ]),
        ],
    )
    def test_every_refusal_is_printed_as_text(self, example, lines):
        result = run("resolve", "--cards", stdin=(ROOT / "examples" / f"{example}-session.jsonl").read_text())
        assert result.returncode == 0, result.stderr
        printed = [line for line in result.stderr.splitlines() if line.startswith("[refused ")]
        errors = [r for r in replies(result.stdout) if r["type"] == "error"]
        assert len(printed) == len(errors) == len(lines)
        for line, expected, error in zip(printed, lines, errors):
            assert line.startswith(expected)
            assert line.endswith(f"(field {error['field']})") and error["message"] in line

    def test_a_refusal_without_ref_or_field(self):
        result = run("resolve", "--cards", stdin="this is not json\n")
        assert result.stderr.startswith("[refused -] bad_message: ")
        assert "(field" not in result.stderr


class _DataScope(html.parser.HTMLParser):
    """Collects the ``data-scope`` JSON of SoHL's Fate button (``button[data-action=fateTest]``)."""

    def __init__(self) -> None:
        super().__init__()
        self.scopes: list[dict] = []

    def handle_starttag(self, tag, attrs):
        attributes = dict(attrs)
        if tag == "button" and attributes.get("data-action") == "fateTest":
            self.scopes.append(json.loads(attributes["data-scope"]))


def sample(name: str) -> dict:
    """The SoHL sample ``name`` (tests/fixtures/samples/sohl/)."""
    return fixture_sample(f"sohl/{name}")


class TestResolveSampleCards:
    """``resolve`` on a test_rolled read from the SoHL sample chat card itself."""

    def sample_test_rolled(self) -> dict:
        card = sample("07-chatmessages-standard-test-and-fate.RECONSTRUCTED.json")["messages"][0]
        parser = _DataScope()
        parser.feed(card["content"])
        (scope,) = parser.scopes
        result = scope["priorTestResult"]
        modifier = result["masteryLevelModifier"]
        target = modifier["baseValue"] + sum(d["value"] for d in modifier["deltas"] if d["op"] == "add")
        skill = next(i for i in sample("02-being-basicfolk.actor.derived-trimmed.json")["items"] if i["type"] == "skill")
        lucky, blade = sample("03-mystery-fate.create-payloads.json")["payloads"]
        points = [
            {"point_id": "lucky", "name": lucky["name"], "skill_code": lucky["system"]["assocSkillCode"],
             "charges": lucky["system"]["charges"]["value"]},
            {"point_id": "blade", "name": blade["name"], "skill_code": blade["system"]["assocSkillCode"],
             "charges": None},
        ]
        return {
            "type": "test_rolled", "v": 1, "event_id": "e1", "ruleset": "sohl", "message_id": "sample07",
            "visibility": "public",
            "actor": {"actor_id": card["speaker"]["actor"], "name": card["speaker"]["alias"], "player_owned": True,
                      "owner_user_ids": [result["speaker"]["user"]], "aura": {"eml": 11 * 5, "disabled": False},
                      "aural_shock": False, "fate_points": points},
            "test": {"kind": "skill", "code": skill["system"]["shortcode"], "name": result["title"], "eml": target,
                     "roll": result["roll"]["rolls"][0], "level_mod": modifier["successLevelMod"],
                     "skill_base_formula": skill["system"]["skillBaseFormula"], "basic": False,
                     "reported_level": result["successLevel"]},
        }

    def test_sample_card_graded_and_fated(self):
        rolled = self.sample_test_rolled()
        assert (rolled["test"]["eml"], rolled["test"]["roll"]) == (55, 88)
        spend = {"type": "fate_spend", "v": 1, "event_id": "e2", "message_id": "sample07", "point_id": "lucky",
                 "user_id": "PLACEHOLDERusr01", "dice": [85]}
        out = replies(run("resolve", stdin=json.dumps(rolled) + "\n" + json.dumps(spend) + "\n").stdout)
        assert out[0]["level"] == 0 and out[0]["mismatch"] is None
        assert out[0]["fate"] == {"eligible": True, "reasons": [], "fate_ml": 77, "points": ["lucky"]}
        assert (out[1]["outcome"], out[1]["level_after"], out[1]["point"]["charges_after"]) == ("lost", 0, 1)

    def test_example_file_matches_the_sample_card(self):
        """The README's recorded session really is the sample card."""
        rolled = self.sample_test_rolled()
        example = json.loads(EXAMPLE.read_text().splitlines()[1])
        for key in ("code", "eml", "roll", "level_mod", "skill_base_formula", "reported_level"):
            assert example["test"][key] == rolled["test"][key], key
        assert example["actor"]["actor_id"] == rolled["actor"]["actor_id"]


class TestArgumentsAreChecked:
    """Bad arguments are refused by argparse with what to write instead (exit 2)."""

    @pytest.mark.parametrize(("args", "says"), [
        (["world", "add", ""], "is not a Foundry world id"),
        (["world", "add", "a b"], "is not a Foundry world id"),
        (["world", "viewer-key", "w", "--bridge-url", "localhost:8765"], "write it with its scheme"),
        (["audit", "list", "--since", "yesterday"], "is not a time: write 2026-12-07"),
        (["audit", "list", "--since", "2026-13-45"], "is not a time: write 2026-12-07"),
    ])
    def test_refused_with_a_hint(self, args, says, tmp_path):
        result = run(*args, "--db", str(tmp_path / "b.sqlite3"))
        assert result.returncode == 2 and says in result.stderr

    @pytest.mark.parametrize(("world_id", "says"), [
        ("../../etc/passwd", "it holds '.'"),
        ("a/b", "it holds '/'"),
        ("a\\b", "it holds '\\\\'"),
        ("<script>alert(1)</script>", "it holds '<'"),
        ("caf\u00e9", "it holds '\u00e9'"),
        ("x" * 129, "1 to 128 characters"),
        ("NUL", "names the operating system reserves"),
        ("com1", "names the operating system reserves"),
    ])
    def test_world_add_refuses_what_foundry_cannot_have(self, world_id, says, tmp_path, capsys):
        """Foundry's world ids are folder names under Data/worlds, checked by BasePackage.validateId
        (letters, digits, '-', '_'; no reserved device name): ``world add`` refuses the rest and
        says which character is wrong (issue 25); nothing is written."""
        db = tmp_path / "b.sqlite3"
        with pytest.raises(SystemExit) as usage:
            main(["world", "add", "--db", str(db), "--", world_id])
        err = capsys.readouterr().err
        assert usage.value.code == 2 and "is not a Foundry world id" in err and says in err, err
        assert "letters, digits, '-' and '_'" in err or "1 to 128" in err or "reserves" in err
        assert not db.exists()

    @pytest.mark.parametrize("world_id", ["my-world", "my_World-2", "W", "1979", "-dash", "consul", "x" * 128])
    def test_world_add_takes_every_id_foundry_can_have(self, world_id, tmp_path, capsys):
        db = tmp_path / "b.sqlite3"
        assert main(["world", "add", "--db", str(db), "--token-only", "--", world_id]) == 0
        capsys.readouterr()
        assert main(["world", "list", "--db", str(db)]) == 0
        assert capsys.readouterr().out == f"{world_id}\tfate_option=everyone\n"

    def test_an_id_starting_with_a_dash_is_shown_after_double_dash(self, tmp_path, capsys):
        """``world remove`` tells how to add the world again: for ``-dash`` the command needs ``--``
        (argparse takes ``-dash`` for an option), and a missing WORLD_ID says so."""
        db = tmp_path / "b.sqlite3"
        assert main(["world", "add", "--db", str(db), "--token-only", "--", "-dash"]) == 0
        assert main(["world", "remove", "--db", str(db), "--", "-dash"]) == 0
        out = capsys.readouterr().out
        assert f"world add --db {db} -- -dash` later resumes where it was" in out
        with pytest.raises(SystemExit):
            main(["world", "remove", "-dash", "--db", str(db)])
        assert ("required: WORLD_ID; a world id starting with '-' goes after `--`, e.g. "
                "`fate-bridge world remove -- -my-world`") in capsys.readouterr().err

    def test_a_world_registered_before_the_rule_can_still_be_removed(self, tmp_path, capsys):
        """Bridges before issue 25 registered any id without spaces: ``world remove`` still finds
        one Foundry cannot have, and does not suggest adding it again."""
        db = tmp_path / "b.sqlite3"
        assert main(["world", "add", "--db", str(db), "--token-only", "ok"]) == 0
        with sqlite3.connect(db) as conn:
            conn.execute("UPDATE worlds SET world_id = 'a/b'")
        conn.close()
        capsys.readouterr()
        assert main(["world", "remove", "--db", str(db), "a/b"]) == 0
        out = capsys.readouterr().out
        assert out.startswith("World 'a/b' removed") and "world add" not in out

    @pytest.mark.parametrize(("args", "says"), [
        # 99999 used to be bound as 99999 % 65536 = 34463: serve listened where nobody looks
        (["serve", "--port", "99999"], "is not a TCP port"),
        (["serve", "--port", "-1"], "is not a TCP port"),
        (["doctor", "--port", "70000"], "is not a TCP port"),
        # an Origin without its scheme never matches a browser's: every GM was refused (403)
        (["serve", "--origins", "foundry.example.org"], "never matches"),
        (["serve", "--origins", "https://foundry.example.org/"], "never matches"),
        (["serve", "--max-worlds-in-memory", "0"], "--max-worlds-in-memory: 0 must be above 0"),
    ])
    def test_serve_refuses_what_it_could_never_use(self, args, says, capsys):
        with pytest.raises(SystemExit) as exit_:
            cli._parser().parse_args(args)
        assert exit_.value.code == 2 and says in capsys.readouterr().err

    @pytest.mark.parametrize("command", [["doctor", "--url", "ws://127.0.0.1:9", "--world", "w"], ["status"]])
    def test_a_token_starting_with_a_dash_is_a_token(self, command, monkeypatch):
        """One token in 64 starts with '-' (token_urlsafe): `doctor --token TOKEN` and `status
        --token TOKEN`, as the README writes them, used to fail "expected one argument"."""
        token = "-" + new_token()[1:]
        seen = {}
        monkeypatch.setattr("bridge.ops_cli.run_status", lambda args: seen.setdefault("token", args.token) and 0)

        async def doctor(args):
            seen["token"] = args.token
            return 0

        monkeypatch.setattr("bridge.ops_cli.run_doctor", doctor)
        assert main([*command, "--token", token]) == 0
        assert seen["token"] == token

    async def test_serve_gives_the_store_its_memory_budget(self, monkeypatch, tmp_path):
        """Issue 27: `serve --max-worlds-in-memory N` reaches the store it opens."""
        class Opened:
            max_worlds = None

            @property
            def signing_key(self):  # read right after the store is opened
                raise ConfigError("stop before serving")

            async def close(self):
                pass

        opened = Opened()

        async def open_store(db, **kwargs):
            return opened

        monkeypatch.setattr("bridge.store.sqlite_file.open_store", open_store)  # the backend serve asks
        args = cli._parser().parse_args(["serve", "--max-worlds-in-memory", "50",
                                         "--audit-key", str(tmp_path / "audit.key")])
        with pytest.raises(ConfigError, match="stop before serving"):
            await cli._serve_held(args, tmp_path / "b.sqlite3", None)
        assert opened.max_worlds == 50
        assert cli._parser().parse_args(["serve"]).max_worlds_in_memory == MAX_WORLDS_IN_MEMORY

    def test_good_ports_and_origins_pass(self):
        args = cli._parser().parse_args(["serve", "--port", "0", "--origins", "https://foundry.example.org",
                                         "http://localhost:30000"])
        assert args.port == 0 and args.origins == ["https://foundry.example.org", "http://localhost:30000"]


class TestResolveIntoAFile:
    def test_its_audit_trail_is_signed_and_verifies(self, tmp_path):
        """Newcomer review: `resolve --db` signs checkpoints like serve, so verify passes."""
        db, key = tmp_path / "r.sqlite3", tmp_path / "audit.key"
        example = ROOT / "examples" / "pool-session.jsonl"
        result = run("resolve", "--db", str(db), "--audit-key", str(key), stdin=example.read_text())
        assert result.returncode == 0, result.stderr
        verified = run("audit", "verify", "--db", str(db), "--audit-key", str(key))
        assert verified.returncode == 0, verified.stdout
        assert "PASS offline" in verified.stdout and "signed up to record" in verified.stdout


def test_a_new_token_never_starts_with_a_dash(monkeypatch):
    """A token pasted after ``--token`` must not read as an option: a draw starting with ``-`` is
    drawn again."""
    draws = iter(["-starts-with-a-dash", "A-fine-token"])
    monkeypatch.setattr("bridge.session.secrets.token_urlsafe", lambda n: next(draws))
    assert new_token() == "A-fine-token"



def test_a_public_key_starting_with_a_dash_is_a_value():
    """``audit verify FILE --public-key KEY`` as the README writes it: a base64url key starts with
    ``-`` one time in 64, and argparse took it for an option (exit 2, "expected one argument")."""
    from bridge.cli import _parser, _tokens_as_values

    key = "-" + new_token()[1:]
    args = _parser().parse_args(_tokens_as_values(["audit", "verify", "w.trail.json", "--public-key", key]))
    assert args.public_key == key


def test_resolve_says_once_how_many_lines_reused_an_event_id(tmp_path):
    """A second run of the same file on the same --db (issue 25): every decision line's event_id
    was decided in the first, so its stored reply comes back and nothing is decided again (the
    contract's idempotency); stderr says so once, with the count. The first run says nothing."""
    db = tmp_path / "twice.sqlite3"
    decisions = sum('"event_id"' in line for line in EXAMPLE.read_text().splitlines())
    first = run("resolve", "--db", str(db), stdin=EXAMPLE.read_text())
    again = run("resolve", "--db", str(db), stdin=EXAMPLE.read_text())
    assert first.returncode == again.returncode == 0
    assert "note:" not in first.stderr and first.stderr == ""
    assert decisions == 7 and again.stderr.count("note:") == 1
    assert again.stderr == (f"note: {decisions} lines reused an event_id already decided in {db} (this run or an "
                            "earlier one): their stored replies were returned and nothing was decided again; give "
                            "new event_ids (or another --db) to decide again\n")
    assert [json.loads(line)["type"] for line in again.stdout.splitlines()] == \
           [json.loads(line)["type"] for line in first.stdout.splitlines()]


def test_a_reader_closing_the_pipe_early_stops_resolve_quietly():
    """``fate-bridge resolve < many | head -c 10``: no BrokenPipeError traceback, exit 1."""
    import subprocess
    import sys
    import tempfile

    lines = EXAMPLE.read_text() * 200  # well over a pipe's buffer of replies
    with tempfile.TemporaryFile() as given:
        given.write(lines.encode())
        given.seek(0)
        bridge = subprocess.Popen([sys.executable, "-m", "bridge", "resolve"], stdin=given,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        bridge.stdout.read(10)
        bridge.stdout.close()  # the reader goes away, as head does
        err = bridge.stderr.read()
        assert bridge.wait(timeout=120) == 1
    assert b"Traceback" not in err and b"BrokenPipeError" not in err


# What a command imports, by the modules loaded once it has run (a fresh interpreter each): not
# a timing, so deterministic; docs/performance.md has the CPU it comes to.
IMPORTED_AFTER = """
import sys
from bridge.cli import main
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(code, " ".join(sorted(sys.modules)))
"""
NEVER_FOR_THE_COMMAND_LINE = {"bridge.server", "bridge.report", "bridge.doctor", "bridge.json_schema", "bridge.http",
                              "bridge.status", "bridge.cluster", "websockets", "psycopg", "prometheus_client"}
# ...and for --version and --help, nothing of the store, the rulesets or their libraries either
NEVER_TO_PARSE = NEVER_FOR_THE_COMMAND_LINE | {
    "bridge.store", "bridge.registry", "bridge.rulesets", "bridge.wire", "bridge.i18n", "bridge.session",
    "jinja2", "babel", "cryptography", "structlog", "msgspec", "asyncio", "sqlite3", "zstandard"}


# ...and for the world commands, nothing of the store beyond the worlds table (bridge/store/admin.py)
NEVER_FOR_A_WORLD_COMMAND = NEVER_FOR_THE_COMMAND_LINE | {
    "bridge.store.sqlite", "bridge.store.writer", "bridge.store.audit_rows", "bridge.store.base",
    "bridge.store.blobs", "bridge.core", "bridge.audit", "bridge.record", "bridge.registry", "bridge.rulesets",
    "bridge.session", "bridge.i18n_templates", "jinja2", "babel", "cryptography", "structlog", "asyncio",
    "zstandard", "socket", "zipfile", "tempfile", "bridge.findings"}


def imported_by(*argv: str) -> set[str]:
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-c", IMPORTED_AFTER, *argv], capture_output=True, text=True,
                          cwd=ROOT, check=True, env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    code, modules = proc.stdout.splitlines()[-1].split(" ", 1)  # after what the command printed
    assert code == "0", proc.stdout + proc.stderr
    return set(modules.split())


class TestImports:
    """Issue 38: each command imports what it needs (the server, the report and the doctor were
    imported by every command: `--version` cost ~19x the CPU of `python -c pass`)."""

    @pytest.mark.parametrize("argv", [["--version"], ["--help"]])
    def test_version_and_help_import_neither_the_store_nor_any_library_of_the_bridge(self, argv):
        loaded = imported_by(*argv)
        assert "bridge.cli" in loaded
        assert {m for m in loaded if m.split(".")[0] in {n.split(".")[0] for n in NEVER_TO_PARSE}
                and any(m == n or m.startswith(n + ".") for n in NEVER_TO_PARSE)} == set()

    @pytest.mark.parametrize("argv", [["add", "w", "--token-only"], ["list"], ["rotate-token", "w", "--token-only"],
                                      ["remove", "w"], ["invite", "--code-only"], ["pending"]])
    def test_the_world_commands_import_the_worlds_table_not_the_store(self, tmp_path, argv):
        """The world commands open the database's worlds table (bridge/store/admin.py), not the
        store: no writer, audit chain, decision core, ruleset, event loop or template; and only
        ``list``, which reads worlds' settings, the wire messages and msgspec."""
        db = str(tmp_path / "b.sqlite3")
        if argv[0] != "add":
            imported_by("world", "add", "w", "--token-only", "--db", db)
        loaded = imported_by("world", *argv, "--db", db)
        assert {"bridge.store.admin", "bridge.store.sqlite_file", "sqlite3"} <= loaded
        never = NEVER_FOR_A_WORLD_COMMAND | ({"msgspec", "bridge.wire", "bridge.i18n", "bridge.store.codecs"}
                                             if argv[0] != "list" else set())
        assert {m for m in loaded if any(m == n or m.startswith(n + ".") for n in never)} == set()
