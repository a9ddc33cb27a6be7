"""Rulesets as plug-ins (issue 12): card text is presentation, a template change leaves every old
trail verifiable; a ruleset from outside ``bridge/`` plugs in through the public ``Ruleset`` alone,
through every path a decision takes (issue 38): decided, verified, in the audit report and in
``resolve --cards``."""

from __future__ import annotations

import asyncio
import dataclasses
import io
import json
import re
import sys

import jinja2
import pytest
import structlog
import websockets

from bridge import audit, core, i18n, registry, report, wire
from bridge.cards import CardTemplates
from bridge.cli import main
from bridge.ruleset import ReportPart, Ruleset
from bridge.dice import ScriptedDice
from bridge.rulesets import hmtw, mythic, pool, sohl
from bridge.session import hash_token, new_token
from bridge.store import AuditFilter, SQLiteStore

from . import plugin_ruleset
from .helpers import ROOT, replay

KEY = b"k" * 32
EXAMPLES = sorted((ROOT / "examples").glob("*-session.jsonl"))


def _changed_templates(monkeypatch, package, tmp_path) -> None:
    """Every template of ``package`` (a ruleset module) rewritten: a new header line and every
    word of text doubled in a wrapper, as a later version's restyled cards would be."""
    folder = tmp_path / package.__name__.rsplit(".", 1)[1]
    folder.mkdir()
    for template in (ROOT / "bridge" / "rulesets" / folder.name / "templates").glob("*.j2"):
        text = template.read_text()
        if "{% macro" not in text:
            text = '<div class="restyled">v2</div>\n' + text.replace("<div", '<div data-v="2"')
        (folder / template.name).write_text(text)
    restyled = CardTemplates(package.__name__)
    for language in i18n.languages():  # each language's environment reads the restyled copy
        restyled._environment(language).loader = jinja2.FileSystemLoader(folder)
    monkeypatch.setattr(package.cards, "render_card", restyled.render)


class TestCardTextIsPresentation:
    @pytest.mark.parametrize("example", EXAMPLES, ids=lambda p: p.name)
    async def test_old_trails_verify_after_every_template_changed(self, example, tmp_path, monkeypatch):
        store = await replay(example, tmp_path / "b.sqlite3", KEY)
        old_cards = [row.record for row in await store.audit_rows(AuditFilter(world_id="w"))]
        for package in (sohl, hmtw, mythic, pool):
            _changed_templates(monkeypatch, package, tmp_path)

        (report,) = await store.verify("w", KEY)
        await store.close()

        assert report.records == len(old_cards) > 3
        assert report.ok, report.problems

    async def test_the_mythic_card_really_changed(self, tmp_path, monkeypatch):
        """The test above cannot pass by accident: the restyled template renders other HTML, and
        a changed decision (another die) still fails re-derivation."""
        store = await replay(ROOT / "examples" / "mythic-session.jsonl", tmp_path / "b.sqlite3", KEY)
        rows = await store.audit_rows(AuditFilter(world_id="w"))
        await store.close()
        answered = next(r for r in rows if r.type == "chart_question" and r.summary.outcome != "bad_message")
        record = msgspec_decode(answered.record)
        recorded = json.loads(bytes(record.reply))
        _changed_templates(monkeypatch, mythic, tmp_path)
        message = registry.decode_client(bytes(record.message))
        rederived = core.rule(message, audit.ReplayState(record.world_id, record.reads),
                                    ScriptedDice(record.dice)).reply
        assert 'class="restyled"' in rederived.card.html and 'restyled' not in recorded["card"]["html"]
        assert audit.rederive(record) is None
        other_die = [d % 100 + 1 for d in record.dice]
        tampered = type(record)(**{**{f: getattr(record, f) for f in record.__struct_fields__}, "dice": other_die})
        assert audit.rederive(tampered) is not None


def msgspec_decode(record_bytes: bytes) -> audit.AuditRecord:
    import msgspec
    return msgspec.json.decode(record_bytes, type=audit.AuditRecord)


@pytest.fixture
def plugin():
    """The throwaway ruleset of ``tests/plugin_ruleset/`` installed for one test."""
    registry.register(plugin_ruleset.RULESET)
    yield plugin_ruleset
    registry.unregister(plugin_ruleset.RULESET.id)


class TestAThrowawayRulesetPlugsIn:
    def test_a_client_message_must_be_a_request(self):
        class Loose(wire.ClientMessage, tag="loose", kw_only=True):
            pass

        with pytest.raises(ValueError, match="Loose"):
            Ruleset(id="loose", client=(Loose,), bridge=(), handlers={Loose: None}, refused=None)

    def test_a_report_part_names_each_tally_and_section_once(self):
        twice = ReportPart(tallies=plugin_ruleset.REPORT.tallies * 2)
        with pytest.raises(ValueError, match="each tally needs its own id, got won, won"):
            dataclasses.replace(plugin_ruleset.RULESET, report=twice)

    def test_register_refuses_a_taken_id_or_tag(self, plugin):
        with pytest.raises(ValueError, match="clashes"):
            registry.register(plugin_ruleset.RULESET)
        assert [r.id for r in registry.installed()] == ["sohl", "hmtw", "mythic", "pool", "coin"]

    def test_unregistered_it_is_gone_from_the_union(self, plugin):
        assert registry.decode_client(json.dumps(plugin_ruleset.flip("e1")))
        registry.unregister("coin")
        with pytest.raises(Exception, match="unknown message type"):
            registry.decode_client(json.dumps(plugin_ruleset.flip("e1")))
        registry.register(plugin_ruleset.RULESET)

    async def test_over_a_real_socket_it_answers_records_and_shows_its_card(self, plugin, tmp_path):
        from bridge import server as bridge_server

        store = await SQLiteStore.open(tmp_path / "b.sqlite3", audit_key=KEY)
        token = new_token()
        await store.add_world("w", hash_token(token))
        viewer_key = await store.viewer_key("w", new_token())
        server = await bridge_server.start(store, "127.0.0.1", 0, dice=ScriptedDice([2]))
        port = server.sockets[0].getsockname()[1]
        try:
            async with asyncio.timeout(10), websockets.connect(f"ws://127.0.0.1:{port}") as gm, \
                    websockets.connect(f"ws://127.0.0.1:{port}") as overlay:
                await gm.send(json.dumps({"type": "hello", "v": 1, "world_id": "w", "token": token}))
                welcome = json.loads(await gm.recv())
                await overlay.send(json.dumps({"type": "hello", "v": 1, "world_id": "w", "viewer_key": viewer_key}))
                assert json.loads(await overlay.recv())["type"] == "welcome"
                assert welcome["rulesets"] == ["sohl", "hmtw", "mythic", "pool", "coin"]

                await gm.send(json.dumps(plugin_ruleset.flip("ev-1", call="heads")))
                reply = json.loads(await gm.recv())
                shown = json.loads(await overlay.recv())
        finally:
            server.close()
            await server.wait_closed()

        assert reply == {"type": "coin_flipped", "v": 1, "event_id": "ev-1", "face": "tails",
                         "won": False, "card": {**reply["card"], "ruleset": "coin"},
                         "rolls": [{"faces": 2, "value": 2, "source": "secret"}]}  # issue 19: the die it rolled
        assert "Ada called heads: tails" in reply["card"]["html"]
        assert shown["type"] == "overlay_card" and shown["ruleset"] == "coin"
        assert shown["key"] == "ev-1" and shown["card"]["html"] == reply["card"]["html"]
        (row,) = await store.audit_rows(AuditFilter(world_id="w"))
        assert (row.type, row.event_id, row.user_id) == ("coin_flip", "ev-1", "user-ada")
        assert (row.summary.ruleset, row.summary.outcome, row.summary.actor_name) == ("coin", "lost", "Ada")
        (report,) = await store.verify("w", KEY)
        await store.close()
        assert report.ok, report.problems


def _rows(db) -> list:
    """The audit rows of ``resolve``'s world in ``db``."""
    async def read():
        store = await SQLiteStore.open(db)
        try:
            return await store.audit_rows(AuditFilter())
        finally:
            await store.close()
    return asyncio.run(read())


class TestAFifthRulesetFromOutside:
    """The coin ruleset (tests/plugin_ruleset/: its folder, registered here) through every path of
    a decision, in-process as the commands run: ``resolve --cards`` decides and records, ``audit
    verify`` re-derives, the audit report shows its column and its section."""

    CALLS = [("heads", 1), ("heads", 2), ("tails", 2)]  # (call, d2): won, lost, won

    def resolve(self, monkeypatch, capsys, tmp_path) -> tuple[str, str]:
        """``fate-bridge resolve --cards --db`` of :data:`CALLS`: (stdout, stderr)."""
        lines = "".join(json.dumps({**plugin_ruleset.flip(f"ev-{n}", call), "dice": [die]}) + "\n"
                        for n, (call, die) in enumerate(self.CALLS))
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(lines.encode())))
        logging = structlog.get_config()  # resolve logs warnings only: the tests after it log decisions
        try:
            assert main(["resolve", "--cards", "--db", str(tmp_path / "b.sqlite3"),
                         "--audit-key", str(tmp_path / "audit.key")]) == 0
        finally:
            structlog.configure(**logging)
        return capsys.readouterr()

    def test_decided_shown_verified_and_reported(self, plugin, monkeypatch, capsys, tmp_path):
        out, err = self.resolve(monkeypatch, capsys, tmp_path)
        replies = [json.loads(line) for line in out.splitlines()]
        assert [(r["type"], r["face"], r["won"]) for r in replies] == [
            ("coin_flipped", "heads", True), ("coin_flipped", "tails", False), ("coin_flipped", "tails", True)]
        # resolve --cards: the ruleset's own line (its card_text), not its card's HTML as text
        assert [line for line in err.splitlines() if line.startswith("[")] == [
            "[coin ev-0] heads (won)", "[coin ev-1] tails (lost)", "[coin ev-2] tails (won)"]

        assert main(["audit", "verify", "--db", str(tmp_path / "b.sqlite3"),
                     "--audit-key", str(tmp_path / "audit.key")]) == 0
        assert re.search(r"PASS \S+: 3 records", capsys.readouterr().out)

        rows = _rows(tmp_path / "b.sqlite3")
        data = report.collect(rows)
        (tally,) = data.fate_by_actor.values()
        assert tally["coin.won"] == 2 and data.sessions[0].fate["coin.won"] == 2
        assert data.sections["coin.coins"] == {"heads": 1, "tails": 2}
        page = report.report_page(rows, world_id="w", since=None, generated="now")
        assert "<th>coin calls won</th></tr>" in page and re.search(r"<td>Ada</td>(<td>0</td>)+<td>2</td></tr>", page)
        assert "coin calls won: flips that came up as called." in page
        assert '<section id="coins">' in page and "heads: 1, tails: 2; p = 0.564" in page  # its section
        assert 'aria-label="Coin flips"' not in page and ">Coin flips</text>" in page  # outcomes, by its title

    def test_its_words_come_from_its_own_catalog(self, plugin, monkeypatch, capsys, tmp_path):
        """Its German is in its folder (tests/plugin_ruleset/locale/); a msgid the bridge
        translates too ("lost") keeps the bridge's words."""
        self.resolve(monkeypatch, capsys, tmp_path)
        rows = _rows(tmp_path / "b.sqlite3")
        flip = registry.decode_client(json.dumps(plugin_ruleset.flip("ev-9")))
        with i18n.using("de"):
            page = report.report_page(rows, world_id="w", since=None, generated="now")
            card = plugin_ruleset.RULESET.handlers[plugin_ruleset.CoinFlip](flip, None, ScriptedDice([2])).reply.card
        assert card.title == "Münzwurf" and "Ada sagte heads an: tails, verloren" in card.html
        assert ">Münzwürfe</text>" in page and "<th>gewonnene Ansagen</th>" in page
        assert "gewonnene Ansagen: Würfe, die wie angesagt fielen." in page
        assert "<h2>Münzseiten gegen eine faire Münze</h2>" in page
        assert ">gewonnen</text>" in page and ">verloren</text>" in page and ">weg</text>" not in page

    def test_a_ruleset_adding_nothing_still_has_its_decisions_reported(self, monkeypatch, capsys, tmp_path):
        bare = dataclasses.replace(plugin_ruleset.RULESET, report=ReportPart(), card_text=None)
        registry.register(bare)
        try:
            _, err = self.resolve(monkeypatch, capsys, tmp_path)
            page = report.report_page(_rows(tmp_path / "b.sqlite3"), world_id="w", since=None, generated="now")
        finally:
            registry.unregister(bare.id)
        assert err.startswith("[card Coin flip]\n  Coin flip\n  Ada called heads: heads, won\n")  # its card, as any reply's
        assert "3 audit records" in page and ">Coin flips</text>" in page and ">won</text>" in page
        assert "coin" not in re.sub(r"<svg.*?</svg>", "", page, flags=re.S).lower()  # no column, no section
