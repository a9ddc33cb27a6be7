"""An exported trail is read as records, not bytes (issue 36): ``fate-bridge audit verify FILE``
and the bridge's /verify page hash one canonical form of each record (bridge/record.py
``canonical_json``, verify.js ``canonicalText``), so a file re-indented or re-encoded by an editor
or ``jq .`` verifies as exported, every content edit still fails, and the two give the same verdict
on every file.

The trail is a real one: the pool example session (16 records, a signed head at 16) and two more checks, one with a label outside
ASCII and one whose chance to pass (1.19e-6) the page once wrote otherwise than the bridge."""

from __future__ import annotations

import asyncio
import codecs
import json
import math
import random
import shutil
import struct
import subprocess
from pathlib import Path

import msgspec
import pytest

from bridge import audit
from bridge.cli import main
from bridge.config import load_key, load_signing_key
from bridge.dice import ScriptedDice
from bridge.heads import public_key_text
from bridge.record import FLOAT_FIELDS, canonical_json

from .helpers import ROOT, replay
from .sohl_messages import frame

PAGE_JS = ROOT / "bridge" / "fairness" / "page" / "verify.js"
NODE = pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed (the module's tests need it too)")
LABEL = "Die Seemauer erklimmen – Ærø 🌊"


def pool_check(event_id: str, label: str, needed: int) -> dict:
    """Bren (level 1, Tier 1: one die) checks ``label`` needing ``needed`` successes."""
    return {"type": "pool_check", "v": 1, "event_id": event_id, "character_id": "actorBren0000001",
            "user_id": "playerUser00001", "user_name": "Jörg Spieler", "label": label, "stat_modifier": 0,
            "task_tier": 1, "successes_needed": needed}


async def _build(folder: Path) -> None:
    store = await replay(ROOT / "examples" / "pool-session.jsonl", folder / "bridge.sqlite3",
                         load_key(folder / "audit.key", create=True),
                         load_signing_key(folder / "receipt.key", create=True))
    from bridge.session import Session

    session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
    for event_id, label, needed, dice in (("ev-x1", LABEL, 2, [5]), ("ev-x2", "Fly", 8, [2])):
        await session.receive(frame(pool_check(event_id, label, needed)), ScriptedDice(dice))
    await store.close()  # a clean stop signs the head of the last record


@pytest.fixture(scope="module")
def exported(tmp_path_factory) -> tuple[Path, str]:
    """(the exported trail file of world ``w``, the public key it is signed by)."""
    folder = tmp_path_factory.mktemp("trail-file")
    asyncio.run(_build(folder))
    out = folder / "w.trail.json"
    assert main(["audit", "export", "--world", "w", "--db", str(folder / "bridge.sqlite3"), "--out", str(out)]) == 0
    public = public_key_text(load_signing_key(folder / "receipt.key", create=False).public_key())
    return out, public


def cli_verdict(file: Path, public: str) -> bool:
    """``fate-bridge audit verify FILE --public-key KEY`` passed."""
    code = main(["audit", "verify", str(file), "--public-key", public])
    assert code in (0, 1)
    return code == 0


def page_verdicts(files: list[Path]) -> list[dict]:
    """The /verify page's checkTrail and summarize (WebCrypto, as in a browser) run by one Node
    process on each file: ``{"ok", "problems"}``, or ``{"error"}`` when the page refuses the file."""
    script = (f"import {{ checkTrail, summarize }} from {json.dumps(PAGE_JS.as_uri())};\n"
              "import { readFileSync } from 'node:fs';\n"
              f"const out = [];\nfor (const file of {json.dumps([str(f) for f in files])}) {{\n"
              "  try { const result = await checkTrail(readFileSync(file, 'utf8'));\n"
              "    out.push({ ok: summarize(result).ok, problems: result.problems.map((p) => p.detail) });\n"
              "  } catch (error) { out.push({ error: error.message }); }\n}\n"
              "console.log(JSON.stringify(out));")
    done = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def reversed_keys(value):
    """``value`` with the keys of every object in reverse order (an editor that sorts otherwise)."""
    if isinstance(value, dict):
        return {k: reversed_keys(value[k]) for k in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(v) for v in value]
    return value


def like_jq_16(value, indent: str = "") -> str:
    """``value`` as jq 1.6 prints it: two-space indent, keys as they were, UTF-8, every number as a
    double with 17 significant digits (``1.0`` -> ``1``, ``1.19e-06`` -> ``1.1907483615302546e-06``)."""
    inner = indent + "  "
    if isinstance(value, dict):
        if not value:
            return "{}"
        items = [f"{inner}{json.dumps(k, ensure_ascii=False)}: {like_jq_16(v, inner)}" for k, v in value.items()]
        return "{\n" + ",\n".join(items) + "\n" + indent + "}"
    if isinstance(value, list):
        if not value:
            return "[]"
        return "[\n" + ",\n".join(inner + like_jq_16(v, inner) for v in value) + "\n" + indent + "]"
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    return f"{value:.17g}"


def record_of(trail: dict, seq: int) -> dict:
    return next(r["record"] for r in trail["records"] if r["seq"] == seq)


def pool_seq(trail: dict, label: str) -> int:
    return next(r["seq"] for r in trail["records"] if r["record"]["message"].get("label") == label)


# --- the canonical form ------------------------------------------------------------------------


def test_each_exported_record_reads_back_as_the_bytes_the_chain_hashed(exported):
    """canonical_json of a record the bridge wrote is those bytes (so an untouched file verifies),
    and of the same record re-indented, re-ordered, escaped or printed by jq: the same bytes."""
    file, _ = exported
    data = file.read_bytes()
    records = [bytes(r.record) for r in msgspec.json.decode(data, type=_Rows).records]
    assert len(records) == 18
    for record in records:
        assert canonical_json(record) == record
        value = json.loads(record)
        for other in (json.dumps(value, indent=2), json.dumps(reversed_keys(value), ensure_ascii=False, indent="\t"),
                      like_jq_16(value)):
            assert canonical_json(other.encode()) == record
    chances = [json.loads(r)["reply"]["pass_chance"] for r in records if b'"pass_chance"' in r]
    assert b'"pass_chance":1.1907483615302546e-6' in records[-1]  # the exponent form msgspec writes
    assert len(chances) == 4 and all(isinstance(c, float) for c in chances)
    assert LABEL.encode() in records[-2]  # UTF-8, not escaped


class _Row(msgspec.Struct):
    record: msgspec.Raw


class _Rows(msgspec.Struct):
    records: list[_Row]


def test_numbers_are_read_by_value_and_a_float_field_stays_a_float():
    assert canonical_json(b'{"b": 3.0, "a": [1e2, -0, -0.0, 12345678901234567890, 0.5]}') == (
        b'{"a":[100,0,0,12345678901234567890,0.5],"b":3}')
    assert canonical_json(b'{"pass_chance": 1}') == b'{"pass_chance":1.0}'
    assert canonical_json(b'{"pass_chance": 1.19074836153025460e-06}') == b'{"pass_chance":1.1907483615302546e-6}'
    assert canonical_json(b'{"name": "\\u00c6r\\u00f8 \\ud83c\\udf0a"}') == '{"name":"Ærø 🌊"}'.encode()
    with pytest.raises(ValueError, match="pass_chance 1000"):
        canonical_json(b'{"pass_chance": 1' + b"0" * 400 + b"}")
    for no_record in (b'{"chance": 1e400}', b'{"name": "\\ud800"}'):  # beyond a float; a lone surrogate
        with pytest.raises(msgspec.DecodeError):
            canonical_json(no_record)


def _struct_fields(root: type) -> dict[str, set[str]]:
    """Field name -> the kinds of the type it has, over every msgspec Struct reachable from the
    record's own modules (wire, rulesets, fairness, record, state): ``float`` or ``other``."""
    import importlib
    import pkgutil

    import bridge

    for module in pkgutil.walk_packages(bridge.__path__, "bridge."):
        if module.name.startswith(("bridge.wire", "bridge.rulesets", "bridge.fairness")) or module.name in (
                "bridge.record", "bridge.state", "bridge.heads"):
            importlib.import_module(module.name)
    kinds: dict[str, set[str]] = {}
    seen, todo = set(), [root]
    while todo:
        cls = todo.pop()
        todo.extend(cls.__subclasses__())
        if cls in seen or not cls.__module__.startswith(("bridge.wire", "bridge.rulesets", "bridge.fairness",
                                                         "bridge.record", "bridge.state", "bridge.heads")):
            seen.add(cls)
            continue
        seen.add(cls)
        for field in msgspec.structs.fields(cls):
            kind = "float" if _holds_float(msgspec.inspect.type_info(field.type)) else "other"
            kinds.setdefault(field.encode_name, set()).add(kind)
    return kinds


def _holds_float(info) -> bool:
    if isinstance(info, msgspec.inspect.FloatType):
        return True
    if isinstance(info, msgspec.inspect.UnionType):
        return any(_holds_float(t) for t in info.types)
    if isinstance(info, (msgspec.inspect.ListType, msgspec.inspect.SetType, msgspec.inspect.FrozenSetType,
                         msgspec.inspect.VarTupleType)):
        return _holds_float(info.item_type)
    return False


def test_float_fields_are_every_float_field_of_the_record_types_and_no_other():
    """FLOAT_FIELDS (Python and the page's) names each float-typed field of the types a record
    holds, and no field of another type has one of those names (the rule reads keys, not types)."""
    kinds = _struct_fields(msgspec.Struct)
    floats = {name for name, found in kinds.items() if "float" in found}
    assert floats == FLOAT_FIELDS == {"pass_chance"}
    assert all(kinds[name] == {"float"} for name in floats)
    assert 'export const FLOAT_FIELDS = new Set(["pass_chance"]);' in PAGE_JS.read_text()


@NODE
def test_the_page_writes_a_float_as_the_bridge_does():
    """verify.js floatText against msgspec over the layouts' edges and random doubles."""
    rng = random.Random(36)
    values = [0.0, -0.0, 1.0, -2.5, 1e-5, 1.25e-5, 1e-6, 1.1907483615302546e-06, 1e15, 1234567890123456.0,
              1e16, 1.25e16, 5e-324, 1.7976931348623157e308, 0.1, 1 / 3]
    values += [rng.uniform(-1, 1) * 10 ** rng.randint(-30, 30) for _ in range(400)]
    values += [struct_double(rng) for _ in range(200)]
    script = (f"import {{ floatText }} from {json.dumps(PAGE_JS.as_uri())};\n"
              f"console.log(JSON.stringify({json.dumps([repr(v) for v in values])}.map((v) => floatText(Number(v)))));")
    done = subprocess.run(["node", "--input-type=module", "-e", script], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == [msgspec.json.encode(v).decode() for v in values]


def struct_double(rng: random.Random) -> float:
    """A random finite double from its bits (every exponent)."""
    while True:
        double = struct.unpack("<d", rng.getrandbits(64).to_bytes(8, "little"))[0]
        if math.isfinite(double):
            return double


# --- the command line and the page, on the same files -----------------------------------------


def _variants(file: Path, tmp_path: Path) -> tuple[list[Path], list[Path]]:
    """(files with the exported content, files with a record's content edited), each written."""
    data = file.read_bytes()
    trail = json.loads(data)
    fifth = bytes(msgspec.json.decode(data, type=_Rows).records[4].record)
    unusual, label = pool_seq(trail, "Fly"), pool_seq(trail, LABEL)
    written: dict[str, bytes] = {}

    def edited(name: str, change) -> None:
        copy = json.loads(data)
        change(copy)
        written[name] = json.dumps(copy, indent=2).encode()

    same = {
        "exported": data,
        "indented-escaped": json.dumps(trail, indent=2).encode(),  # \\u escapes
        "keys-reversed-utf8": json.dumps(reversed_keys(trail), ensure_ascii=False, indent="\t").encode(),
        "like-jq-1.6": like_jq_16(trail).encode(),
        "windows-editor": codecs.BOM_UTF8 + json.dumps(trail, indent=4, ensure_ascii=False).replace("\n", "\r\n").encode(),
        # a repeated key: the last one is the record's, as both readers take it
        "repeated-key-overridden": data.replace(fifth, b'{"dice":[99],' + fifth[1:]),
    }
    for name, content in same.items():
        written[name] = content
    if shutil.which("jq"):  # the real tool the issue names, when the machine has it
        done = subprocess.run(["jq", "."], input=data, capture_output=True, timeout=60)
        assert done.returncode == 0
        written["jq"] = done.stdout
        same["jq"] = done.stdout
    edited("die", lambda t: record_of(t, 5)["dice"].__setitem__(0, record_of(t, 5)["dice"][0] % 6 + 1))
    edited("pass-chance", lambda t: record_of(t, unusual)["reply"].__setitem__("pass_chance", 1.2e-6))
    edited("label-text", lambda t: record_of(t, label)["message"].__setitem__("label", LABEL.replace("Æ", "AE")))
    edited("field-added", lambda t: record_of(t, 3).__setitem__("note", "harmless"))
    edited("field-removed", lambda t: record_of(t, 3).pop("draws"))
    edited("ok-flipped", lambda t: record_of(t, unusual).__setitem__("ok", False))
    edited("float-for-int", lambda t: record_of(t, 5)["dice"].__setitem__(0, record_of(t, 5)["dice"][0] + 0.5))
    written["repeated-key-last"] = data.replace(fifth, fifth[:-1] + b',"dice":[99]}')

    def rechained(t: dict) -> None:  # an edit with every later hash recomputed (the heads cannot be)
        record_of(t, 5)["user_id"] = "gmUser000000001"
        prev = audit.GENESIS_HASH
        for row in t["records"]:
            row["prev_hash"] = prev
            row["hash"] = prev = audit.chain_hash(prev, canonical_json(json.dumps(row["record"]).encode()))
    edited("rechained", rechained)
    paths = {}
    for name, content in written.items():
        paths[name] = tmp_path / f"{name}.trail.json"
        paths[name].write_bytes(content)
    return [paths[n] for n in same], [paths[n] for n in written if n not in same]


@NODE
def test_the_command_line_and_the_page_give_the_same_verdict_on_every_file(exported, tmp_path, capsys):
    """Re-indented, re-ordered, escaped, printed by jq, saved by a Windows editor: PASS on both.
    Any record's content edited (a die, a float, a string's letters, a field added or removed, a
    verdict flipped, a repeated key that wins, a rechained edit): FAIL on both."""
    file, public = exported
    same, tampered = _variants(file, tmp_path)
    pages = page_verdicts(same + tampered)
    for path, page in zip(same, pages):
        assert cli_verdict(path, public), (path.name, capsys.readouterr().out)
        assert page == {"ok": True, "problems": []}, path.name
    for path, page in zip(tampered, pages[len(same):]):
        assert not cli_verdict(path, public), path.name
        out = capsys.readouterr().out
        assert "FAIL w: 18 records" in out, (path.name, out)
        assert page.get("ok") is False and page["problems"], (path.name, page)
    assert len(tampered) == 9
