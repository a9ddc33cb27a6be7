"""The table's language: cards, notices and the overlay page follow the world's language.

- Every card kind of every ruleset, rendered in German (the four example sessions played with
  ``hello.client.language = "de"``, plus the card kinds they do not reach), shows no English
  text of the catalog: no msgid whose German differs appears in the card's visible text (the
  outside strings the requests carried, such as names and questions, taken out first).
- The German catalog is complete and current: every msgid has a German msgstr, and a fresh
  ``pybabel extract -F babel.cfg`` finds exactly the catalog's msgids (docs/translating.md).
- A language the bridge has no catalog for (or none) falls back to English, byte for byte.
- Through a real socket, a forwarder whose ``hello`` says ``de`` gets German cards while another
  world's English connection, interleaved, stays English.
- A German trail verifies: re-derivation ignores card text (bridge.audit.verdict).
"""

from __future__ import annotations

import asyncio
import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from collections.abc import Iterator

import jinja2
import pytest
from babel.messages.catalog import Catalog
from babel.messages.frontend import CommandLineInterface
from babel.messages.pofile import read_po

from bridge import i18n, replies
from bridge.errors import Joined, NotEligible, RateLimited, Text
from bridge.dice import ScriptedDice
from bridge.overlay_page import render_pages
from bridge.rulesets.pool import cards as pool_cards, rules as pool_rules
from bridge.session import Session, hash_token, new_token
from bridge.store import SQLiteStore

from tests.helpers import ROOT
from tests.sohl_messages import frame
from tests.test_server import (FATE_MS, archery_test_rolled, ask, connected, db, fate_spend, hello, open_store,
                               start_bridge)

__all__ = ["db", "open_store", "start_bridge"]  # fixtures used here

EXAMPLES = sorted((ROOT / "examples").glob("*.jsonl"))
# The rulesets' card templates; a ``*_report.html.j2`` is a ruleset's section of the audit report,
# whose German page tests/test_languages.py reads.
TEMPLATES = sorted(t for t in (ROOT / "bridge" / "rulesets").glob("*/templates/*.j2")
                   if not t.name.endswith("_report.html.j2"))
DICE_TEMPLATES = sorted((ROOT / "bridge" / "fairness" / "templates").glob("*.j2"))
DE_PO = ROOT / "bridge" / "locale" / "de" / "LC_MESSAGES" / "messages.po"
GM = {"user_id": "gmUser000000001", "user_is_gm": True}
# Card kinds the example sessions do not reach, played after them (same world, same state).
MORE = {
    "hmtw-session.jsonl": [
        {"type": "hmtw_deck_command", "v": 1, "event_id": "more-1", "command": "reshuffle", **GM},
        {"type": "hmtw_deck_command", "v": 1, "event_id": "more-2", "command": "round_end", **GM},
    ],
}


def de_catalog() -> Catalog:
    with DE_PO.open("rb") as po:
        return read_po(po, locale="de")


def translated_pairs(catalog: Catalog) -> Iterator[tuple[str, str]]:
    """(English, German) for every message form, plurals included."""
    for message in catalog:
        if not message.id:
            continue
        ids = message.id if isinstance(message.id, tuple) else (message.id,)
        strings = message.string if isinstance(message.string, tuple) else (message.string,)
        yield from zip(ids, strings)


class _Text(HTMLParser):
    """A card's visible text: its text nodes (never tags, classes or data attributes)."""

    def __init__(self) -> None:
        super().__init__()
        self.parts: list[str] = []

    def handle_data(self, data: str) -> None:
        self.parts.append(data)


def visible_text(card: dict[str, Any]) -> str:
    parser = _Text()
    parser.feed(card["html"])
    return " ".join([card["title"], *parser.parts])


def outside_strings(message: Any) -> Iterator[str]:
    """Every string a request carried (names, questions, labels...): not the bridge's text."""
    if isinstance(message, str):
        if len(message) >= 3:
            yield message
    elif isinstance(message, dict):
        for value in message.values():
            yield from outside_strings(value)
    elif isinstance(message, list):
        for value in message:
            yield from outside_strings(value)


def english_left(text: str, catalog: Catalog) -> list[str]:
    """The catalog's English msgids (whose German differs) found in ``text``: each literal piece
    between placeholders, as a whole word."""
    found = []
    for english, german in translated_pairs(catalog):
        if english == german:
            continue  # the same in both languages ("normal", "%(name)s: %(roll)s")
        for piece in re.split(r"%\(\w+\)s", english):
            words = piece.strip(" ,.:;()+-")
            if re.search(r"[A-Za-z]{2}", words) and re.search(rf"(?<!\w){re.escape(words)}(?!\w)", text):
                found.append(english)
    return found


def cards_in(reply: Any) -> Iterator[dict[str, Any]]:
    """Every chat card (``card``, ``notice``, nested) in a decoded reply."""
    if isinstance(reply, dict):
        if isinstance(reply.get("html"), str) and "title" in reply:
            yield reply
        for value in reply.values():
            yield from cards_in(value)
    elif isinstance(reply, list):
        for value in reply:
            yield from cards_in(value)


async def play(store: SQLiteStore, lines: list[dict[str, Any]], language: str | None,
               **options: Any) -> list[tuple[dict, dict]]:
    """``lines`` through a trusted Session (``options`` passed to it) after a hello in
    ``language``: (request, reply) pairs."""
    session = Session(store, ScriptedDice([]), trusted=True, default_world="w", **options)
    client = {"module_version": "0.1.0", "foundry_version": "13.351", "system_id": "sohl", "system_version": "0.9.0"}
    if language is not None:
        client["language"] = language
    welcome = await session.receive(frame({"type": "hello", "v": 1, "world_id": "w", "client": client}))
    assert json.loads(welcome.frames[0])["type"] == "welcome"
    pairs = []
    for message in lines:
        reply = await session.receive(frame({k: v for k, v in message.items() if k != "dice"}),
                                      ScriptedDice(message.get("dice", [])))
        pairs.append((message, json.loads(reply.frames[0])))
    return pairs


def example_lines(example: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in example.read_text().splitlines()] + MORE.get(example.name, [])


@pytest.fixture
def rendered(monkeypatch) -> set[str]:
    """The names of the templates rendered while the test runs (imports and includes too)."""
    names: set[str] = set()
    original = jinja2.Environment.get_template

    def get_template(self, name, *args, **kwargs):
        names.add(name if isinstance(name, str) else name.name)
        return original(self, name, *args, **kwargs)

    monkeypatch.setattr(jinja2.Environment, "get_template", get_template)
    return names


async def memory_store() -> SQLiteStore:
    store = await SQLiteStore.open(":memory:")
    await store.add_world("w", None)
    return store


class TestRefusalsNameNoCode:
    """Issue 37: a German refusal names what it refers to in German words; the codes stay in the
    reply's machine fields (``code``, sohl's ``reasons``)."""

    async def test_a_bound_obstacle_names_its_outcome_in_words(self):
        from tests.hmtw_messages import fate_test
        store = await memory_store()
        try:
            for language, word, code in (("de", "Fehlschlag", "failure"), ("en", "Failure", "failure")):
                obstacle = f"the gate ({language})"
                failed = {**fate_test(f"e1{language}", f"t1{language}", obstacle=obstacle), "dice": [2]}  # II of Swords + 2
                again = {**fate_test(f"e2{language}", f"t2{language}", obstacle=obstacle), "dice": [1]}
                (_, tested), (_, refused) = await play(store, [failed, again], language)
                assert tested["test"]["outcome"] == code and refused["code"] == "not_eligible", refused
                assert f"({word})" in refused["message"] and code not in refused["message"], refused["message"]
        finally:
            await store.close()

    async def test_withheld_fate_gives_its_reasons_in_words(self):
        from tests.sohl_messages import actor, fate_spend as spend, rolled
        store = await memory_store()
        try:
            shocked = rolled("r1", "m1", actor_part=actor(aural_shock=True))
            (_, graded), (_, refused) = await play(store, [shocked, spend("s1", "m1")], "de")
            assert graded["fate"]["reasons"] == ["aural_shock"]  # the code stays in the machine field
            assert refused["message"] == "Schicksal ist verwehrt: Auraschock", refused
        finally:
            await store.close()


class TestEveryCardInGerman:
    async def test_every_card_kind_of_every_ruleset_has_no_english_left(self, rendered):
        catalog = de_catalog()
        problems, shown = [], 0
        for example in EXAMPLES:
            store = await memory_store()
            try:
                pairs = await play(store, example_lines(example), "de")
            finally:
                await store.close()
            seen: set[str] = set()  # names come with earlier requests (an actor, then its Fate spend)
            for request, reply in pairs:
                seen.update(outside_strings(request))
                outside = sorted(seen, key=len, reverse=True)
                for card in cards_in(reply):
                    text = visible_text(card)
                    for string in outside:
                        text = text.replace(string, " ")
                    shown += 1
                    if left := english_left(text, catalog):
                        problems.append((example.name, request.get("event_id"), card["title"], left))
        assert shown > 30
        assert not problems, problems
        assert {t.name for t in TEMPLATES} <= rendered, {t.name for t in TEMPLATES} - rendered

    async def test_the_german_cards_say_it_in_german(self):
        """The check above cannot pass on untranslated cards: each ruleset's cards carry German
        words, and the rules' own terms (SoHL's level labels, ML) stay as they are."""
        expected = {"sohl": ["Schicksalsprobe:", "Schicksalspunkt:", "Erfolgsstufe:", "ML", "Knapper Fehlschlag"],
                    "hmtw": ["Schicksalsprobe: Münzen", "Gezogen:", "Summe:", "Der Narr"],
                    "mythic": ["Handlungsrang:", "Schwierigkeitsrang:", "Wurf:"],
                    "pool": ["Würfelpool:", "Ergebnis:", "Ausdauer", "Bestimmung"]}
        for example in EXAMPLES:
            ruleset = example.name.split("-")[0]
            store = await memory_store()
            try:
                text = " ".join(visible_text(card) for _, reply in await play(store, example_lines(example), "de")
                                for card in cards_in(reply))
            finally:
                await store.close()
            for words in expected[ruleset]:
                assert words in text, (ruleset, words)

    async def test_sohl_level_labels_stay_the_games_terms(self):
        store = await memory_store()
        try:
            pairs = await play(store, example_lines(ROOT / "examples" / "sohl-session.jsonl"), "de")
        finally:
            await store.close()
        text = " ".join(visible_text(c) for _, reply in pairs for c in cards_in(reply))
        assert re.search(r"\bMF \(Knapper Fehlschlag\)", text) and re.search(r"\bMS \(Knapper Erfolg\)", text)


# Issue 19's dice cards (bridge/fairness/templates): a dice session's commitment and reveal, and a
# GM override shown marked to the players (``override_mark`` everyone) and to the GMs.
DICE_LINES = [
    {"type": "dice_session_start", "v": 1, "event_id": "dice-1", **GM},
    {"type": "gm_override", "v": 1, "event_id": "dice-2", **GM, "target_event_id": "dice-1",
     "message_id": "chatMsg00000001", "result": "Exceptional Yes", "values": [3], "reason": "the story needs it"},
    {"type": "dice_session_end", "v": 1, "event_id": "dice-3", **GM},
]


async def dice_cards(language: str | None) -> list[tuple[dict, dict]]:
    """(request, card) for every card of :data:`DICE_LINES` played in ``language``."""
    store = await memory_store()
    try:
        pairs = await play(store, DICE_LINES, language, new_seed=lambda n: bytes(range(n)))
    finally:
        await store.close()
    return [(request, card) for request, reply in pairs for card in cards_in(reply)]


class TestDiceCardsInGerman:
    async def test_every_dice_card_has_no_english_left(self, rendered):
        catalog = de_catalog()
        cards = await dice_cards("de")
        assert len(cards) == 4  # commitment, the override's card and GM card, reveal
        for request, card in cards:
            text = visible_text(card)
            for string in sorted(outside_strings(request), key=len, reverse=True):
                text = text.replace(string, " ")
            assert english_left(text, catalog) == [], (request["event_id"], text)
        assert {t.name for t in DICE_TEMPLATES} <= rendered, {t.name for t in DICE_TEMPLATES} - rendered

    async def test_the_german_dice_cards_say_it_in_german_and_english_stays_english(self):
        german = " ".join(visible_text(card) for _, card in await dice_cards("de"))
        for words in ("Würfelsitzung begonnen", "Festlegung", "Würfelsitzung aufgedeckt", "Startwert",
                      "Von der SL überschrieben (gmUser000000001): the story needs it", "fate-bridge audit verify"):
            assert words in german, words
        english = " ".join(visible_text(card) for _, card in await dice_cards("fr"))
        assert "Dice session started" in english and "GM override by gmUser000000001" in english
        assert "Würfel" not in english

    async def test_a_dice_refusal_is_written_in_german(self):
        store = await memory_store()
        try:
            ((_, reply),) = await play(store, [{**DICE_LINES[0], "user_is_gm": False}], "de", new_seed=bytes)
        finally:
            await store.close()
        assert (reply["code"], reply["message"]) == ("forbidden", "nur eine SL darf eine Würfelsitzung beginnen")


class TestCatalog:
    def test_every_msgid_has_a_german_msgstr(self):
        catalog = de_catalog()
        untranslated = [english for english, german in translated_pairs(catalog) if not german]
        fuzzy = [m.id for m in catalog if m.id and m.fuzzy]
        assert len(catalog) > 250
        assert (untranslated, fuzzy) == ([], [])
        assert catalog.plural_expr == "(n != 1)"

    def test_the_catalog_holds_exactly_what_the_code_marks(self, tmp_path, monkeypatch):
        """``pybabel extract -F babel.cfg`` (docs/translating.md), run now, finds the German
        catalog's msgids and the committed template's: no string added without its German."""
        monkeypatch.chdir(ROOT)
        pot = tmp_path / "messages.pot"
        CommandLineInterface().run(["pybabel", "-q", "extract", "-F", "babel.cfg", "-o", str(pot), "."])
        with pot.open("rb") as fresh, (ROOT / "bridge" / "locale" / "messages.pot").open("rb") as committed:
            extracted, kept = read_po(fresh), read_po(committed)
        ids = {m.id for m in extracted if m.id}
        assert {m.id for m in de_catalog() if m.id} == ids
        assert {m.id for m in kept if m.id} == ids
        assert "Training: poor instruction or resources" in ids  # the rules' tables (bridge/i18n_extract.py)
        assert "act_next" not in ids and "The Fool" in ids

    def test_pool_words_cover_every_identifier_of_the_rules(self):
        assert set(pool_cards.KIND_NAMES) == set(pool_rules.CHARACTER_KINDS)
        assert set(pool_cards.SAVE_LABELS) == set(pool_rules.SAVES)
        assert set(pool_cards.ROLL_KIND_NAMES) == set(pool_rules.D20_ROLL_KINDS)
        assert set(pool_cards.MODE_NAMES) == {pool_rules.NORMAL, pool_rules.ADVANTAGE, pool_rules.DISADVANTAGE}


class TestFallback:
    @pytest.mark.parametrize("tag, language", [("de", "de"), ("de-DE", "de"), ("DE_at", "de"), ("en", "en"),
                                               ("fr", "en"), ("pt-BR", "en"), ("", "en"), (None, "en")])
    def test_a_tag_gives_its_catalog_or_english(self, tag, language):
        assert i18n.normalize(tag) == language

    @pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
    async def test_an_unknown_language_renders_english_byte_for_byte(self, example):
        replies = {}
        for language in (None, "fr", "de"):
            store = await memory_store()
            try:
                replies[language] = [reply for _, reply in await play(store, example_lines(example), language)]
            finally:
                await store.close()
        assert replies["fr"] == replies[None]
        assert replies["de"] != replies[None]  # the same decisions, other words
        def strip(replies: list) -> list[str]:
            return [json.dumps(r, sort_keys=True) for r in map(_without_text, replies)]
        assert strip(replies["de"]) == strip(replies[None])

    def test_outside_using_strings_are_english(self):
        with i18n.using("de"):
            assert i18n.gettext("Fate Point:") == "Schicksalspunkt:"
            assert i18n.ngettext("(%(num)s charge left)", "(%(num)s charges left)", 2) == "(%(num)s Ladungen übrig)"
        assert i18n.current() == "en" and i18n.gettext("Fate Point:") == "Fate Point:"


def _without_text(reply: Any) -> Any:
    """A reply without its cards' words (``html``, ``title``) and error wording."""
    if isinstance(reply, dict):
        return {k: _without_text(v) for k, v in reply.items() if k not in ("html", "title", "message")}
    if isinstance(reply, list):
        return [_without_text(v) for v in reply]
    return reply


class TestAudit:
    async def test_a_german_trail_verifies(self, tmp_path):
        """Card text is presentation: a trail rendered in German re-derives (in English) clean."""
        key = b"k" * 32
        store = await SQLiteStore.open(tmp_path / "b.sqlite3", audit_key=key)
        await store.add_world("w", None)
        for example in EXAMPLES:
            await play(store, example_lines(example), "de")
        (report,) = await store.verify("w", key)
        await store.close()
        assert report.records > 20 and report.ok, report.problems


class TestOverlayPage:
    def test_the_page_in_every_language(self):
        pages = render_pages()
        assert set(pages) == {"en", "de"}
        assert '<html lang="de">' in pages["de"].decode() and "Zuschauerschlüssel" in pages["de"].decode()
        assert "the bridge refused this viewer key" in pages["en"].decode()


WORLD_DE, WORLD_EN = "world-de", "world-en"


class TestThroughASocket:
    async def test_a_hello_in_german_gets_german_cards_and_english_stays_english(self, open_store, start_bridge):
        store = await open_store()
        tokens = {WORLD_DE: new_token(), WORLD_EN: new_token()}
        for world_id, token in tokens.items():
            await store.add_world(world_id, hash_token(token))
        server = await start_bridge(store, ScriptedDice([FATE_MS, FATE_MS]))
        german, english = await connected(server), await connected(server)
        try:
            greeting = hello(WORLD_DE, tokens[WORLD_DE])
            greeting["client"]["language"] = "de-DE"
            assert (await ask(german, greeting))["type"] == "welcome"
            assert (await ask(english, hello(WORLD_EN, tokens[WORLD_EN])))["type"] == "welcome"
            for ws in (german, english):  # interleaved: one language per connection
                assert (await ask(ws, archery_test_rolled("ev-1", "msgArchery0001")))["type"] == "test_graded"
            de_card = (await ask(german, fate_spend("ev-2", "msgArchery0001")))["card"]
            en_card = (await ask(english, fate_spend("ev-2", "msgArchery0001")))["card"]
        finally:
            await asyncio.gather(german.close(), english.close())
        de_text, en_text = visible_text(de_card), visible_text(en_card)
        assert "Schicksalsprobe:" in de_text and "34 gegen Schicksals-ML" in de_text
        for name in ("Basic Folk", "Archery", "Lucky Star", "Player One"):
            de_text = de_text.replace(name, " ")
        assert english_left(de_text, de_catalog()) == []
        assert "Fate Test:" in en_text and "Schicksal" not in en_text


class TestRefusals:
    @pytest.mark.parametrize("language, text", [
        ("de", "Nachricht never-graded wurde nie bewertet"),
        ("fr", "message never-graded was never graded"),
    ])
    async def test_a_refusal_is_written_in_the_worlds_language(self, language, text):
        store = await memory_store()
        try:
            ((_, reply),) = await play(store, [fate_spend("ev-1", "never-graded")], language)
        finally:
            await store.close()
        assert (reply["type"], reply["code"], reply["field"], reply["message"]) == ("error", "not_found", "message_id", text)

    def test_a_refusal_is_data_translated_where_its_frame_is_made(self):
        """Raised in no language: a msgid and its parameters (a Text or a Joined among them shown
        in the same language), translated by ``replies.error_reply``; ``message`` is English."""
        reasons = Joined((Text("no usable Aura"), Text("Aural Shock")))
        refusal = NotEligible(i18n.N_("Fate is withheld: %(reasons)s"), {"reasons": reasons}, field="message_id")
        assert refusal.message == str(refusal) == "Fate is withheld: no usable Aura, Aural Shock"
        german = replies.error_reply(refusal, "ev-1", "de")
        assert (german.code, german.ref, german.field) == ("not_eligible", "ev-1", "message_id")
        assert german.message == i18n.translations("de").gettext("Fate is withheld: %(reasons)s") % {
            "reasons": ", ".join(i18n.translations("de").gettext(r) for r in ("no usable Aura", "Aural Shock"))}
        assert german.message != refusal.message
        worded = replies.error_reply(RateLimited(Text("too many registrations just now: try again in {seconds} s",
                                                           {"seconds": 3}, braces=True)), None, "en")
        assert worded.message == "too many registrations just now: try again in 3 s"

    async def test_every_refusal_of_a_ruleset_in_german_keeps_its_code_and_field(self):
        """The hmtw example's refusals (a push by another player, a bound obstacle tested again)
        in German: the same codes and fields as in English, other words."""
        lines = example_lines(ROOT / "examples" / "hmtw-session.jsonl")
        errors = {}
        for language in ("en", "de"):
            store = await memory_store()
            try:
                errors[language] = [r for _, r in await play(store, lines, language) if r["type"] == "error"]
            finally:
                await store.close()
        assert len(errors["de"]) == 3
        assert [(e["code"], e["field"]) for e in errors["de"]] == [(e["code"], e["field"]) for e in errors["en"]]
        assert all(d["message"] != e["message"] for d, e in zip(errors["de"], errors["en"]))
        assert english_left(" ".join(e["message"] for e in errors["de"]), de_catalog()) == []


class TestFateChartDialog:
    async def test_the_named_questions_come_in_the_worlds_language_keys_and_ranks_stay(self):
        """The dialog's catalog (a read-only query): its words translated, what the module sends
        back (keys, ranks, odds) unchanged."""
        catalogs = {}
        for language in ("en", "de"):
            store = await memory_store()
            try:
                ((_, catalogs[language]),) = await play(
                    store, [{"type": "chart_catalog_query", "v": 1, "event_id": "q-1"}], language)
            finally:
                await store.close()
        en, de = catalogs["en"], catalogs["de"]
        assert (de["ranks"], de["odds"]) == (en["ranks"], en["odds"])
        assert [q["key"] for q in de["questions"]] == [q["key"] for q in en["questions"]]
        hit = next(q for q in de["questions"] if q["key"] == "hit")
        assert hit["question"] == "Trifft der Charakter?"
        assert hit["outcomes"]["no"] == "Der Angriff geht daneben."
        words = [text for q in de["questions"] for text in (
            q["question"], q["acting_guidance"], q["difficulty_guidance"], q["note"],
            *(m["label"] for m in q["modifiers"]), *q["outcomes"].values())]
        assert english_left(" | ".join(words), de_catalog()) == []


CARD_TEMPLATES = sorted((ROOT / "bridge").glob("**/templates/*.html.j2"))


@pytest.mark.parametrize("template", [t for t in CARD_TEMPLATES if t.name != "report.html.j2"],
                         ids=lambda t: str(t.relative_to(ROOT)))
def test_a_card_template_has_no_text_outside_gettext(template):
    """README: cards come in the world's language. A literal word in a template (outside
    ``{{ _("...") }}`` and ``{% trans %}...{% endtrans %}``) is never extracted, so the catalog tests above cannot see it and every
    German card shows it in English (the SoHL card's "Target:", the dice session cards)."""
    source = template.read_text()
    for pattern in (r"\{#.*?#\}", r"\{%-?\s*trans\b.*?\{%-?\s*endtrans\s*-?%\}", r"\{\{.*?\}\}", r"\{%.*?%\}", r"<[^>]*>", r"&\w+;"):
        source = re.sub(pattern, " ", source, flags=re.S)
    assert re.findall(r"[A-Za-z]{2,}", source) == []
