"""The wire contract: decoding, error fields, tags and the contract's names."""

from __future__ import annotations

import inspect
import typing

import msgspec
import pytest

from bridge import wire
from bridge.errors import BadMessage, UnknownMessage
from bridge import registry
from bridge.rulesets.sohl import rules as sohl_rules, wire as sohl_wire

from .sohl_messages import fate_choice, fate_spend, frame, rolled


class TestDecodeClient:
    @pytest.mark.parametrize(
        ("message", "cls"),
        [
            ({"type": "ping", "v": 1}, wire.Ping),
            ({"type": "ping"}, wire.Ping),
            ({"type": "hello", "v": 1, "world_id": "w", "token": "t",
              "client": {"module_version": "0.1.0", "foundry_version": "14.359", "system_id": "sohl",
                         "system_version": "0.8.2"}}, wire.Hello),
            ({"type": "settings", "v": 1, "fate_option": "pc_only"}, sohl_wire.Settings),
            (rolled(), sohl_wire.TestRolled),
            (fate_spend(), sohl_wire.FateSpend),
            (fate_choice("keep"), sohl_wire.FateChoice),
        ],
    )
    def test_every_client_message_decodes(self, message, cls):
        decoded = registry.decode_client(frame(message))
        assert type(decoded) is cls and decoded.v == 1

    @pytest.mark.parametrize(
        ("raw", "field", "text"),
        [
            (b"not json", None, "not a JSON object"),
            (b"[1, 2]", None, "Expected `object`, got `array`"),
            (b'{"v": 1}', "type", "missing required field `type`"),
            (b'{"type": 5}', "type", "Expected `str`"),
            (b'{"type": "ping", "v": 2}', "v", "Invalid enum value 2"),
            (b'{"type": "ping", "extra": 1}', "extra", "unknown field `extra`"),
            (frame({**fate_spend(), "user_id": None}), "user_id", "Expected `str`, got `null`"),
            (frame({k: v for k, v in fate_spend().items() if k != "point_id"}), "point_id", "missing required field"),
            (frame(rolled(test={"kind": "skill"})), "test.code", "missing required field `code`"),
            (frame({**rolled(), "ruleset": "dnd5e"}), "ruleset", "Invalid enum value 'dnd5e'"),
            (frame({**rolled(), "visibility": "everyone"}), "visibility", "Invalid enum value"),
            (frame({**fate_choice("maybe")}), "choice", "Invalid enum value 'maybe'"),
        ],
    )
    def test_bad_frames_name_the_field(self, raw, field, text):
        with pytest.raises(BadMessage) as caught:
            registry.decode_client(raw)
        assert caught.value.code == "bad_message"
        assert caught.value.field == field
        assert text in caught.value.message

    def test_nested_field_paths(self):
        message = rolled()
        message["actor"]["fate_points"][1]["charges"] = "lots"
        message["test"]["roll"] = 101
        with pytest.raises(BadMessage) as caught:
            registry.decode_client(frame(message))
        assert caught.value.field in {"actor.fate_points[1].charges", "test.roll"}

    def test_roll_out_of_range(self):
        message = rolled()
        message["test"]["roll"] = 0
        with pytest.raises(BadMessage) as caught:
            registry.decode_client(frame(message))
        assert caught.value.field == "test.roll" and ">= 1" in caught.value.message

    def test_unknown_type_is_unknown_message(self):
        with pytest.raises(UnknownMessage) as caught:
            registry.decode_client(b'{"type": "steal_fate", "v": 1}')
        assert (caught.value.code, caught.value.field) == ("unknown_message", "type")
        assert "steal_fate" in caught.value.message

    def test_a_bridge_message_sent_by_a_client_is_unknown(self):
        with pytest.raises(UnknownMessage):
            registry.decode_client(b'{"type": "fate_resolved", "v": 1}')

    def test_oversized_strings_are_refused(self):
        with pytest.raises(BadMessage) as caught:
            registry.decode_client(frame(fate_spend(event_id="e" * 129)))
        assert caught.value.field == "event_id"


class TestErrorField:
    @pytest.mark.parametrize(
        ("text", "field"),
        [
            ("Expected `int`, got `str` - at `$.test.eml`", "test.eml"),
            ("Expected `int | null`, got `str` - at `$.actor.fate_points[1].charges`", "actor.fate_points[1].charges"),
            ("Object missing required field `roll` - at `$.test`", "test.roll"),
            ("Object contains unknown field `x` - at `$.actor`", "actor.x"),
            ("Object missing required field `type`", "type"),
            ("Expected `object`, got `array`", None),
        ],
    )
    def test_paths(self, text, field):
        assert wire.error_field(text) == field


class TestContractNames:
    """Every name of wire contract v1 (the protocol's first version, ``docs/protocol.md``) is kept."""

    def test_message_tags(self):
        protocol = registry.protocol()
        tags = {cls.__struct_config__.tag for cls in protocol.client_types + protocol.bridge_types}
        assert {"hello", "welcome", "error", "ping", "pong", "test_rolled", "test_graded", "fate_spend",
                "fate_resolved", "fate_choice", "settings"} <= tags

    def test_world_settings_offer_the_s12_options_of_sohls_rules(self):
        """The shared ``WorldSettings`` (welcome carries it; the wire imports no ruleset) offers
        exactly S12's options, defaulting to sohl's default (DECISIONS.md S12)."""
        assert typing.get_args(wire.FateOption) == sohl_rules.FATE_OPTIONS == ("everyone", "pc_only", "off")
        assert wire.WorldSettings().fate_option == sohl_rules.DEFAULT_FATE_OPTION == "everyone"
        assert sohl_wire.Settings.__annotations__["fate_option"] in ("FateOption", wire.FateOption)

    @pytest.mark.parametrize(
        ("cls", "fields"),
        [
            (wire.Hello, {"world_id", "token", "viewer_key", "client"}),
            (wire.Welcome, {"world_id", "bridge_version", "rulesets", "settings"}),
            (wire.Error, {"code", "message", "ref", "field"}),
            (sohl_wire.TestRolled, {"event_id", "ruleset", "message_id", "actor", "test", "visibility"}),
            (sohl_wire.SohlActor, {"actor_id", "name", "player_owned", "owner_user_ids", "aura", "aural_shock", "fate_points"}),
            (sohl_wire.FatePoint, {"point_id", "name", "skill_code", "charges"}),
            (sohl_wire.SohlTest, {"kind", "code", "name", "eml", "roll", "level_mod", "basis", "basic"}),
            (sohl_wire.TestGraded, {"event_id", "message_id", "level", "label", "success", "critical", "fate"}),
            (sohl_wire.FateOffer, {"eligible", "reasons", "fate_ml", "points"}),
            (sohl_wire.FateSpend, {"event_id", "message_id", "point_id", "user_id"}),
            (sohl_wire.FateResolved, {"event_id", "message_id", "fate_roll", "fate_level", "outcome", "level_before",
                                 "level_after", "point", "card", "effects"}),
            (sohl_wire.PointAfter, {"point_id", "charges_after"}),
            (sohl_wire.FateChoice, {"event_id", "message_id", "choice", "user_id"}),
            (wire.Card, {"title", "html"}),
            (sohl_wire.UpdateItem, {"actor_id", "item_id", "path", "value"}),
        ],
    )
    def test_fields(self, cls, fields):
        assert fields <= set(cls.__struct_fields__)

    def test_error_codes(self):
        assert set(wire.ErrorCode.__args__) == {
            "bad_message", "unknown_message", "unauthorized", "forbidden", "not_eligible", "already_fated",
            "no_charges", "not_found", "rate_limited", "unavailable", "internal"}

    def test_every_class_is_kw_only_and_frozen(self):
        classes = [c for c in vars(wire).values() if isinstance(c, type) and issubclass(c, msgspec.Struct)]
        assert len(classes) > 20
        for cls in classes:
            params = inspect.signature(cls).parameters.values()
            assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in params), cls
            assert cls.__struct_config__.frozen, cls

    def test_bridge_messages_carry_v_1(self):
        assert wire.encode(wire.Pong()) == b'{"type":"pong","v":1}'


class TestBounds:
    """Numbers stay in ranges that JavaScript and cards hold exactly (newcomer review)."""

    @pytest.mark.parametrize(("path", "value", "field"), [
        (("test", "eml"), 2**70, "test.eml"),
        (("test", "level_mod"), 21, "test.level_mod"),
        (("actor", "aura", "eml"), 10**9, "actor.aura.eml"),
    ])
    def test_sohl_numbers(self, path, value, field):
        message = rolled()
        target = message
        for key in path[:-1]:
            target = target[key]
        target[path[-1]] = value
        with pytest.raises(BadMessage) as caught:
            registry.decode_client(frame(message))
        assert caught.value.field == field

    def test_audit_query_cursor_and_times(self):
        """A time longer than any is refused as it decodes; one that is not a time, by the
        session (bridge/times.py: tests/test_times.py)."""
        for extra, field in (({"before_seq": 2**63}, "before_seq"), ({"since": "2026-12-07T04:17" + "0" * 25}, "since")):
            with pytest.raises(BadMessage) as caught:
                registry.decode_client(frame({"type": "audit_query", "v": 1, "query_id": "q", **extra}))
            assert caught.value.field == field
