"""Chat cards: autoescaped templates, both labels, the Fate Test, the point, who asked."""

from __future__ import annotations

import pytest

from bridge.cards import card_text
from bridge.rulesets.sohl.cards import SohlFateCardData, sohl_fate_card
from bridge import wire

HOSTILE = "<img src=x onerror=alert(1)>"


def data(**overrides) -> SohlFateCardData:
    base = dict(message_id="m1", actor_id="a1", actor_name="Basic Folk", test_name="Archery Test", basic=False,
                level_before=1, level_after=3, fate_roll=45, fate_ml=77, fate_level=2, outcome="spent", gain=2,
                point_name="Lucky Star", charges_after=0, user_name="Player One")
    base.update(overrides)
    return SohlFateCardData(**base)


class TestEscaping:
    @pytest.mark.parametrize("field", ["actor_name", "test_name", "point_name", "user_name", "message_id"])
    def test_hostile_strings_show_as_text(self, field):
        card = sohl_fate_card(data(**{field: HOSTILE}))
        assert "<img" not in card.html
        assert "&lt;img src=x onerror=alert(1)&gt;" in card.html

    def test_quotes_cannot_break_out_of_attributes(self):
        card = sohl_fate_card(data(message_id='x" onclick="alert(1)'))
        assert 'onclick="alert' not in card.html
        assert 'data-fate-bridge-message-id="x&#34; onclick=&#34;alert(1)"' in card.html

    def test_title_and_speaker_are_plain_fields(self):
        card = sohl_fate_card(data(actor_name=HOSTILE))
        assert card.speaker_alias == HOSTILE  # plain data: the module sets it as text, never as HTML
        assert card.ruleset == "sohl"


class TestContent:
    def test_spent_critical_choice(self):
        text = card_text(wire.encode(resolved(sohl_fate_card(data()))))
        assert "Level: MS (Marginal Success) → CS+1 (Critical Success +1)" in text
        assert "Fate Test: 45 vs Fate ML 77: CS (Critical Success)" in text
        assert "Fate Point: Lucky Star: spent, +2 (0 charges left)" in text
        assert "Basic Folk, asked by Player One" in text

    def test_pending_choice_has_both_buttons(self):
        card = sohl_fate_card(data(outcome="choice", level_after=None, gain=None, charges_after=2))
        assert card.html.count("data-fate-bridge-choice=") == 2
        assert "Spend for +2" in card.html and "Keep for +1" in card.html

    def test_basic_test_reads_success_and_failure(self):
        card = sohl_fate_card(data(basic=True, level_before=0, level_after=1, gain=1, outcome="spent"))
        text = card_text(wire.encode(resolved(card)))
        assert "Level: Failure (Failure) → Success (Success)" in text

    def test_unlimited_point(self):
        card = sohl_fate_card(data(outcome="lost", level_after=1, gain=0, charges_after=None))
        assert "Lucky Star: lost, no gain (unlimited)" in card_text(wire.encode(resolved(card)))

    def test_one_charge_is_singular(self):
        assert "(1 charge left)" in sohl_fate_card(data(charges_after=1)).html


def resolved(card: wire.Card) -> wire.FateResolved:
    return wire.FateResolved(event_id="e", message_id="m1", fate_roll=45, fate_ml=77, fate_level=2,
                             fate_label="CS", outcome="spent", gain=2, level_before=1, label_before="MS",
                             level_after=3, label_after="CS+1",
                             point=wire.PointAfter(point_id="p", name="Lucky Star", charges_after=0),
                             card=card, effects=[])


class TestIssue13:
    def test_the_target_the_test_was_rolled_against(self):
        text = card_text(wire.encode(resolved(sohl_fate_card(data(target=135)))))
        assert "Target: 135" in text
        assert "Target:" not in card_text(wire.encode(resolved(sohl_fate_card(data()))))

    def test_a_critical_success_kept_reads_as_a_gain(self):
        card = sohl_fate_card(data(outcome="kept", level_before=0, level_after=1, gain=1, charges_after=2))
        text = card_text(wire.encode(resolved(card)))
        assert "Lucky Star: kept, gain +1 (2 charges left)" in text
        assert "no gain" not in text

    def test_a_marginal_failure_keeps_without_gain(self):
        card = sohl_fate_card(data(outcome="kept", level_before=0, level_after=0, gain=0, charges_after=2))
        assert "Lucky Star: kept, no gain (2 charges left)" in card_text(wire.encode(resolved(card)))
