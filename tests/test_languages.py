"""Issue 24: a table's audit trail verifies in every language the bridge ships.

Card text is presentation: the state rows hold the facts a decision decided (the sohl Fate Test's
roll, levels, charges), never a rendered card, and the audit verdict (``bridge.audit.verdict``)
drops card text and refusal wording. So every example session, resolved in every shipped language
(``hello.client.language``), passes ``fate-bridge audit verify`` on its database and a player's
``audit verify FILE --public-key KEY`` on its exported trail. A trail written before issue 24, whose
sohl Fate rows still hold the card rendered in German (``tests/fixtures/trails/``), verifies too
(and goes on verifying when served on), and an edit of one of its facts is still caught.

Every refusal text comes in the world's language: the rules' own (an unknown Fate Chart rank...,
raised with their English template: ``bridge.i18n.rule_text``), the dice's, a frame's that could
not be read, a hello's. The world's language is kept with the world, and ``audit report`` (and the
audit window's Report) writes its page in it, or in ``--lang``.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
import sqlite3
from html import unescape
from pathlib import Path

import pytest

from bridge import i18n, report
from bridge.cli import main
from bridge.config import load_key, load_signing_key
from bridge.dice import ScriptedDice
from bridge.heads import public_key_text
from bridge.rulesets.mythic import rules as mythic_rules
from bridge.session import Session, hash_token, new_token
from bridge.store import SQLiteStore
from bridge.store.blobs import unpack

from . import hmtw_messages, mythic_messages, pool_messages
from .helpers import FIXTURES, ROOT, decompress
from .sohl_messages import actor, fate_spend as sohl_fate_spend, frame, rolled
from .test_i18n import de_catalog, english_left, example_lines, memory_store, outside_strings, play
from .test_report import play as play_report

EXAMPLES = sorted((ROOT / "examples").glob("*-session.jsonl"))
OLD_TRAIL = FIXTURES / "trails" / "sohl-before-issue-24.sqlite3"
OLD_TRAIL_KEY = b"k" * 32  # the HMAC checkpoint key the fixture was written with (its README)
CLIENT = {"module_version": "0.1.0", "foundry_version": "13.351", "system_id": "sohl", "system_version": "0.9.0"}


async def _resolve(db: Path, audit_key: bytes, signing_key, example: Path, language: str) -> list[dict]:
    """``example`` through a trusted Session (as ``fate-bridge resolve``) whose hello says
    ``language``, into world ``w`` of ``db``, signed like ``serve``; returns the replies."""
    store = await SQLiteStore.open(db, audit_key=audit_key, signing_key=signing_key)
    try:
        await store.add_world("w", None)
        session = Session(store, ScriptedDice([]), trusted=True, default_world="w")
        await session.receive(frame({"type": "hello", "v": 1, "world_id": "w",
                                     "client": {**CLIENT, "language": language}}))
        replies = []
        for line in example.read_text().splitlines():
            message = json.loads(line)
            reply = await session.receive(frame({k: v for k, v in message.items() if k != "dice"}),
                                          ScriptedDice(message.get("dice", [])))
            replies.append(json.loads(reply.frames[0]))
    finally:
        await store.close()
    return replies


def _values(db: Path, kind: str) -> list[str]:
    """The stored values of every state row of ``kind`` in ``db``, as text."""
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute("SELECT value FROM records WHERE kind = ?", (kind,)).fetchall()
    finally:
        conn.close()
    return [unpack(value).decode() for (value,) in rows]


def test_the_bridge_ships_english_and_german():
    assert i18n.languages() == ("de", "en")


@pytest.mark.parametrize("language", i18n.languages())
@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
def test_every_example_in_every_language_resolves_and_verifies(example, language, tmp_path, capsys):
    """The issue's report: a world whose hello says ``de`` failed ``audit verify`` ("the state was
    edited between decisions") after any SoHL Fate result. Now the database and the exported
    trail (checked as a player would, with the public key only) pass in each language."""
    db, audit_key_path, signing_key_path = tmp_path / "b.sqlite3", tmp_path / "audit.key", tmp_path / "receipt.key"
    signing_key = load_signing_key(signing_key_path, create=True)
    replies = asyncio.run(_resolve(db, load_key(audit_key_path, create=True), signing_key, example, language))
    cards = [r["card"]["title"] for r in replies if isinstance(r.get("card"), dict)]
    assert cards, "the example shows cards"  # so the language below has something to change
    if example.name.startswith("sohl"):
        assert ("Archery Test: Schicksal" if language == "de" else "Archery Test: Fate") in cards
        fate_rows = _values(db, "sohl.fate")
        assert len(fate_rows) == 2 and all('"html"' not in v and '"title"' not in v for v in fate_rows), fate_rows
    keys = ["--db", str(db), "--audit-key", str(audit_key_path), "--signing-key", str(signing_key_path)]
    assert main(["audit", "verify", *keys]) == 0
    out = capsys.readouterr().out
    assert f"PASS w: {len(replies)} records" in out, out
    trail = tmp_path / "w.trail.json"
    assert main(["audit", "export", "--world", "w", "--db", str(db), "--out", str(trail)]) == 0
    capsys.readouterr()
    assert main(["audit", "verify", str(trail), "--public-key", public_key_text(signing_key.public_key())]) == 0
    assert f"PASS w: {len(replies)} records" in capsys.readouterr().out


@pytest.fixture
def old_trail(tmp_path) -> Path:
    """A copy of the trail written before issue 24 (worlds ``old-de`` and ``old-en``)."""
    db = tmp_path / "old.sqlite3"
    shutil.copy(OLD_TRAIL, db)
    return db


async def _verify(db: Path) -> dict[str, object]:
    store = await SQLiteStore.open(db, audit_key=OLD_TRAIL_KEY)
    try:
        return {report.world_id: report for report in await store.verify(None, OLD_TRAIL_KEY)}
    finally:
        await store.close()


def test_a_trail_written_before_the_fix_still_verifies(old_trail):
    """Its sohl Fate rows (and the reads recorded of them) hold the whole reply with the card as
    rendered then, in German for ``old-de``: compared by their facts, they are what the chain
    derives."""
    german = [v for v in _values(old_trail, "sohl.fate") if "Schicksalsprobe" in v]
    assert len(german) == 2 and all('"reply"' in v for v in german)  # the fixture is what it claims
    reports = asyncio.run(_verify(old_trail))
    assert sorted(reports) == ["old-de", "old-en"]
    for world in reports.values():
        assert world.records == 8 and world.ok, world.problems


def test_an_edited_fact_of_an_old_row_is_still_caught(old_trail):
    """Comparing by facts forgives only what the record no longer has: the Fate roll changed in
    an old row (rendered card and all left as they were) fails verification, naming the row."""
    decompress(old_trail)
    conn = sqlite3.connect(old_trail)
    (value,) = conn.execute("SELECT value FROM records WHERE world_id = 'old-de' AND kind = 'sohl.fate' "
                            "AND key = 'msgArchery0002'").fetchone()
    edited = json.loads(value)
    assert edited["fate_roll"] == 45
    edited["fate_roll"] = 5
    conn.execute("UPDATE records SET value = ? WHERE world_id = 'old-de' AND kind = 'sohl.fate' "
                 "AND key = 'msgArchery0002'", (json.dumps(edited).encode(),))
    conn.commit()
    conn.close()
    reports = asyncio.run(_verify(old_trail))
    assert reports["old-en"].ok
    problems = [p.detail for p in reports["old-de"].problems]
    assert any("records('sohl.fate', 'msgArchery0002')" in p for p in problems), problems


def test_an_old_trail_goes_on_under_this_bridge_and_still_verifies(old_trail):
    """The world written before issue 24 served on: its old Fate row is read (a second spend on
    the fated result is refused, S11) and a new test is fated (another actor: Basic Folk's Lucky
    Star is spent); the whole trail verifies."""
    async def run() -> list[dict]:
        store = await SQLiteStore.open(old_trail, audit_key=OLD_TRAIL_KEY)
        try:
            session = Session(store, ScriptedDice([]), trusted=True, default_world="old-de")
            await session.receive(frame({"type": "hello", "v": 1, "world_id": "old-de",
                                         "client": {**CLIENT, "language": "de"}}))
            replies = []
            for message, dice in ((sohl_fate_spend("again-1", "msgArchery0001"), [50]),
                                  (rolled("new-1", "msgNew000000001", actor_part=actor(actor_id="newActor00000001")), []),
                                  (sohl_fate_spend("new-2", "msgNew000000001"), [34])):
                replies.append(json.loads((await session.receive(frame(message), ScriptedDice(dice))).frames[0]))
            return replies
        finally:
            await store.close()

    again, graded, spent = asyncio.run(run())
    assert (again["type"], again["code"]) == ("error", "already_fated")
    assert graded["type"] == "test_graded" and spent["type"] == "fate_resolved"
    assert spent["card"]["title"].endswith(": Schicksal")
    reports = asyncio.run(_verify(old_trail))
    assert reports["old-de"].records == 11 and reports["old-de"].ok, reports["old-de"].problems


# --- every refusal in the world's language -------------------------------------------------------


# What a refusal names as the player must write it, in English in every language (the parser
# reads it, as the chat commands' words: docs/translating.md): the Fate Chart's ranks and odds.
WRITTEN_FORMS = sorted({*mythic_rules.RANKS, *mythic_rules.ODDS, "Superhuman", "Miniscule"}, key=len, reverse=True)


def german_words_only(message: str, requests: list[dict]) -> list[str]:
    """The catalog's English texts left in a German refusal once the names, keys and ids its
    requests carried and the written forms the parser reads are taken out."""
    for string in [*sorted({s for r in requests for s in outside_strings(r)}, key=len, reverse=True), *WRITTEN_FORMS]:
        message = message.replace(string, " ")
    return english_left(message, de_catalog())

# (the requests played first, the refused request, its code and field, the German text it starts with):
# the rules' own refusals (rules.py cannot translate: bridge.i18n.rule_text) and the dice's.
REFUSED_IN_GERMAN = {
    "mythic unknown rank": (
        [], mythic_messages.question(acting="godlike"), "bad_message", "acting_rank",
        "unbekannter Rang 'godlike': Nimm einen Rang der Schicksalstabelle (Miniscule 2+, Miniscule, Weak,"),
    "mythic rank beyond": (
        [], mythic_messages.question(difficulty="High 2+"), "bad_message", "difficulty_rank",
        "unbekannter Rang 'High 2+': Nur Superhuman und Miniscule nehmen N+, ab 2+"),
    "mythic unknown odds": (
        [], mythic_messages.odds_question("probably"), "bad_message", "odds",
        "unbekannte Chancen 'probably': Nimm eine von Impossible, "),
    "mythic modifier": (
        [], mythic_messages.named("hit", modifiers=[{"key": "unused"}]), "bad_message", "modifiers[0].key",
        "'hit' hat keinen Modifikator 'unused': Ihre Modifikatoren sind "),
    "mythic modifier twice": (
        [], mythic_messages.named("act_next", modifiers=[{"key": "adrenaline"}, {"key": "adrenaline"}]),
        "bad_message", "modifiers[1].key", "'adrenaline' ist zweimal genommen: Nimm ihn einmal, mit times"),
    "mythic modifier times": (
        [], mythic_messages.named("hurt", modifiers=[{"key": "weak_spot", "times": 3}]), "bad_message",
        "modifiers[0].times", "'weak_spot' wird 1..2-mal genommen, nicht 3-mal"),
    "pool stat table": (
        [], pool_messages.configure(stat_table=[{"min_score": 10, "die": 5, "modifier": 0}]), "bad_message",
        "config.stat_table", "Zeile 0: Würfel 5 ist weder 0 noch +/- einer von (4, 6, 8, 10, 12)"),
    "pool DC table": (
        [], pool_messages.configure(dc_by_effect_tier=[10, 12, 11, 16, 18]), "bad_message", "config.dc_by_effect_tier",
        "Wirkungsrang 3: SG 11 liegt unter 12 von Rang 2"),
    "pool level without Destiny": (
        [pool_messages.configure(), pool_messages.character()],
        pool_messages.gm("pool_level_gained", "ev-level", character_id=pool_messages.ALDRIC), "not_eligible",
        "character_id", "ein Stufenaufstieg kostet mindestens 1 Bestimmung, 0 vorhanden"),
    "pool d20s of a roll": (
        [pool_messages.configure(), pool_messages.character(), pool_messages.gm("pool_session_start", "ev-start")],
        pool_messages.reroll(roll=pool_messages.chat_roll(mode="advantage", d20s=[12])), "bad_message", "roll.d20s",
        "ein Wurf (advantage) hat 2 d20, nicht 1"),
    "hmtw blank obstacle": (
        [], hmtw_messages.fate_test(obstacle="   "), "bad_message", "obstacle", "ein Hindernis braucht einen Namen"),
}


@pytest.mark.parametrize("case", sorted(REFUSED_IN_GERMAN))
async def test_a_rules_refusal_is_written_in_the_worlds_language(case):
    """Issue 24: the refusals the rules themselves make (an unknown Fate Chart rank...) come in
    German for a German world, in English otherwise, with the same code and field."""
    before, request, code, field, german = REFUSED_IN_GERMAN[case]
    replies = {}
    for language in ("de", "en"):
        store = await memory_store()
        try:
            pairs = await play(store, [*before, request], language)
        finally:
            await store.close()
        assert all(reply["type"] != "error" for _, reply in pairs[:-1]), pairs
        replies[language] = pairs[-1][1]
    de, en = replies["de"], replies["en"]
    assert (de["type"], de["code"], de["field"]) == (en["type"], en["code"], en["field"]) == ("error", code, field)
    assert de["message"].startswith(german), de["message"]
    assert de["message"] != en["message"] and german_words_only(de["message"], [*before, request]) == []


def test_the_english_of_a_rules_refusal_is_its_template_filled():
    with pytest.raises(mythic_rules.Refused) as caught:
        mythic_rules.parse_rank("godlike")
    error = caught.value
    assert error.template == mythic_rules.REFUSALS["unknown_rank"] and error.values["text"] == "godlike"
    assert str(error).startswith("unknown rank 'godlike': use a Fate Chart rank (Miniscule 2+, Miniscule, Weak,")
    german = i18n.translations("de").gettext
    assert i18n.rule_text(error).shown(i18n.translations("en").gettext) == str(error)
    assert i18n.rule_text(error).shown(german).startswith("unbekannter Rang 'godlike'")
    assert i18n.rule_text(ValueError("plain")).shown(german) == "plain"  # no template: as it is


@pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
async def test_every_refusal_of_the_examples_is_in_german(example):
    """Each example's refusals (the Fate Chart's unknown rank among them) in a German world:
    German words only (names and ids the requests carried aside), the codes and fields as in
    English."""
    errors = {}
    for language in ("en", "de"):
        store = await memory_store()
        try:
            errors[language] = [(r, reply) for r, reply in await play(store, example_lines(example), language)
                                if reply["type"] == "error"]
        finally:
            await store.close()
    assert errors["de"], "every example shows a refusal"
    assert [(e["code"], e["field"]) for _, e in errors["de"]] == [(e["code"], e["field"]) for _, e in errors["en"]]
    for (request, de), (_, en) in zip(errors["de"], errors["en"]):
        assert de["message"] != en["message"]
        assert german_words_only(de["message"], [request]) == [], de["message"]


# --- the audit report in the world's language ----------------------------------------------------


async def _hello(db: Path, language: str | None, *, reporter=None) -> tuple[SQLiteStore, Session]:
    """An open store on ``db`` and a trusted session on world ``w`` after a hello in ``language``."""
    store = await SQLiteStore.open(db)
    session = Session(store, ScriptedDice([]), trusted=True, default_world="w", reporter=reporter)
    client = dict(CLIENT) if language is None else {**CLIENT, "language": language}
    reply = await session.receive(frame({"type": "hello", "v": 1, "world_id": "w", "client": client}))
    assert json.loads(reply.frames[0])["type"] == "welcome"
    return store, session


def _page_text(html: str) -> str:
    """The words of a report page a reader sees (not its CSS or its charts' drawing)."""
    html = re.sub(r"<(style|svg)\b.*?</\1>", " ", html, flags=re.S)
    return unescape(re.sub(r"<[^>]+>", " ", html))


def test_a_hello_keeps_the_worlds_language(tmp_path):
    """The world's language is the one its forwarder's last hello set (normalized), kept with the
    world for what is made without a connection; None before any hello."""
    db = tmp_path / "b.sqlite3"

    async def run() -> list[str | None]:
        seen = []
        store = await SQLiteStore.open(db)
        await store.add_world("w", None)
        seen.append((await store.world("w")).language)
        await store.close()
        for language in ("de-DE", None, "de_AT"):
            store, _ = await _hello(db, language)
            seen.append((await store.world("w")).language)
            await store.close()
        return seen

    assert asyncio.run(run()) == [None, "de", "en", "de"]


def test_audit_report_comes_in_the_worlds_language_or_lang(tmp_path, capsys):
    db, out = tmp_path / "b.sqlite3", tmp_path / "report.html"
    asyncio.run(play_report(db, [20, 40, 60, 80, 99]))
    assert main(["audit", "report", "--db", str(db), "--world", "w", "--out", str(out)]) == 0
    assert '<html lang="en">' in out.read_text() and "Fate audit report: w" in out.read_text()  # no hello yet

    async def german_hello() -> None:
        store, _ = await _hello(db, "de")
        await store.close()

    asyncio.run(german_hello())
    assert main(["audit", "report", "--db", str(db), "--world", "w", "--out", str(out)]) == 0
    german = out.read_text()
    assert '<html lang="de">' in german and "<title>Schicksals-Prüfbericht: w</title>" in german
    text = _page_text(german)
    for words in ("Würfe der Schicksalsproben gegen einen fairen d100", "Chi-Quadrat-Anpassungstest:",
                  "Je Akteur", "Gezogene Tarotkarten", "Der Narr", "Pool-Register im Verlauf", "ausgegeben"):
        assert words in text, words
    # The charts' own labels (bridge/charts.py draws them as SVG text), the outcomes chart's
    # included (issue 37): its bars and panels are named in words; the codes stay in the trail.
    svg_text = unescape(" ".join(re.findall(r"<text\b[^>]*>(.*?)</text>", german, flags=re.S)))
    for words in ("fairer d100", "Schicksalsentscheidungen", "Spielerstapel (57 Karten)", "SL-Stapel (21 große Arkana)",
                  "Nummer des Audit-Eintrags (zeitliche Reihenfolge)", "Stäbe", "Würfe", "Fehlschlag",
                  "Großer Fehlschlag", "nicht zulässig", "Würfelpool", "Mythic-Schicksalstabelle", "Außergewöhnliches Ja"):
        assert words in svg_text, words
    codes = {"failure", "great_failure", "not_eligible", "forbidden", "exceptional_yes", "passed", "gm_draw",
             "session_start", "chart_settings", "spent", "pool", "mythic", "hmtw", "sohl"}
    assert codes.isdisjoint(re.findall(r"[a-z_]+", svg_text)), sorted(codes & set(re.findall(r"[a-z_]+", svg_text)))
    for english in ("fair d100", "Fate decisions", "player deck", "GM deck", "audit record number"):
        assert english not in svg_text, english
    # nothing of the catalog left in English (names the trail holds, rule ids and error codes aside)
    for outside in ("Basic Folk", "Aldric", "Bren", "Silán Storysoul", "Patches", "Brakka", "His Majesty the Worm"):
        text = text.replace(outside, " ")
    catalog = de_catalog()
    for same in ("from %(start)s to %(end)s UTC", "Pool:"):
        catalog.delete(same)  # words German shares ("UTC", "Pool"): no sign of English left
    assert english_left(text, catalog) == [], english_left(text, catalog)
    assert main(["audit", "report", "--db", str(db), "--world", "w", "--lang", "en", "--out", str(out)]) == 0
    assert '<html lang="en">' in out.read_text() and "Fate audit report: w" in out.read_text()
    capsys.readouterr()


async def test_the_audit_windows_report_comes_in_the_worlds_language(tmp_path):
    """The GM's Report button (``audit_report``): the page in the language of the asking
    connection's hello."""
    db = tmp_path / "b.sqlite3"
    await play_report(db, [50, 51])
    for language, title in (("de", "Schicksals-Prüfbericht: w"), ("fr", "Fate audit report: w")):
        store, session = await _hello(db, language, reporter=report.draw)
        try:
            reply = json.loads((await session.receive(frame({"type": "audit_report", "v": 1, "query_id": "q"}))).frames[0])
        finally:
            await store.close()
        assert reply["type"] == "audit_report_page" and f"<title>{title}</title>" in reply["html"]


def test_the_session_refuses_a_report_in_the_worlds_language(tmp_path):
    async def run() -> dict:
        store, session = await _hello(tmp_path / "b.sqlite3", "de")  # resolve's session: no reporter
        try:
            return json.loads((await session.receive(frame({"type": "audit_report", "v": 1, "query_id": "q"}))).frames[0])
        finally:
            await store.close()

    refused = asyncio.run(run())
    assert (refused["code"], refused["message"]) == (
        "not_found", "diese Bridge erstellt hier keine Berichte: Nimm `fate-bridge audit report`")


@pytest.mark.parametrize(("frame_bytes", "code", "field", "german"), [
    (b'{"type": "no_such_message", "v": 1}', "unknown_message", "type", "unbekannter Nachrichtentyp 'no_such_message'"),
    (b"not json", "bad_message", None, "Frame ist kein JSON-Objekt: "),
    (b'{"type": "ping", "v": 1, "event_id": "' + b"a" * 70_000 + b'"}', "bad_message", None,
     "Frame von 70040 Bytes liegt über der Grenze von 65536 Bytes"),
    (b'{"type": "ping", "v": 1, "event_id": ' + b"[" * 20 + b"]" * 20 + b"}", "bad_message", "event_id",
     "Objekte und Arrays mehr als 16 tief verschachtelt in `event_id`"),
])
def test_a_frame_refused_before_its_decision_is_in_the_worlds_language(tmp_path, frame_bytes, code, field, german):
    """After a German hello, a frame the bridge cannot read is refused in German too (the
    wording msgspec gives a malformed JSON frame stays msgspec's own)."""
    async def run() -> dict:
        store, session = await _hello(tmp_path / "b.sqlite3", "de")
        try:
            return json.loads((await session.receive(frame_bytes)).frames[0])
        finally:
            await store.close()

    refused = asyncio.run(run())
    assert (refused["code"], refused["field"]) == (code, field)
    assert refused["message"].startswith(german), refused["message"]


def test_a_refused_hello_and_a_second_hello_are_in_the_language_asked(tmp_path):
    """A hello with a wrong token is refused in the language it asked for (nothing else is known
    of the table yet); a second hello on an open connection, in the connection's."""
    async def run() -> tuple[dict, dict]:
        store = await SQLiteStore.open(tmp_path / "b.sqlite3")
        try:
            token = new_token()
            await store.add_world("w", hash_token(token))
            stranger = Session(store, ScriptedDice([]))
            refused = await stranger.receive(frame({"type": "hello", "v": 1, "world_id": "w", "token": "wrong",
                                                    "client": {**CLIENT, "language": "de"}}))
            assert refused.close_code == 4001
            session = Session(store, ScriptedDice([]))  # a socket's: hello once
            greeting = {"type": "hello", "v": 1, "world_id": "w", "token": token, "client": {**CLIENT, "language": "de"}}
            assert json.loads((await session.receive(frame(greeting))).frames[0])["type"] == "welcome"
            again = await session.receive(frame(greeting))
            return json.loads(refused.frames[0]), json.loads(again.frames[0])
        finally:
            await store.close()

    refused, again = asyncio.run(run())
    assert (refused["code"], refused["field"]) == ("unauthorized", "token")
    assert refused["message"].startswith("unbekannte Welt oder falscher Token: Registriere die Welt")
    assert (again["code"], again["message"]) == ("bad_message", "hello wurde auf dieser Verbindung schon gesendet")
