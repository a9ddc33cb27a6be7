"""Builders of sohl wire messages for tests, shaped like the SoHL samples (Basic Folk's Archery
Test: EML 55, roll 88; Aura EML 55 -> Fate ML 77; Lucky Star general 2 charges; Blade of Destiny
specific to melee, unlimited)."""

from __future__ import annotations

import json
from typing import Any

PLAYER = "PLACEHOLDERusr01"
GM = "gmUser000000001"
STRANGER = "otherPlayer0001"
ACTOR_ID = "d1cddnpaqRl0a0Q8"
LUCKY_STAR = "luckystar1item0"
BLADE = "bladedestinyitm"


def point(point_id: str, name: str, skill_code: str | None = None, charges: int | None = None) -> dict:
    return {"point_id": point_id, "name": name, "skill_code": skill_code, "charges": charges}


def actor(**overrides: Any) -> dict:
    base = {
        "actor_id": ACTOR_ID,
        "name": "Basic Folk",
        "player_owned": True,
        "owner_user_ids": [PLAYER, GM],
        "aura": {"eml": 55, "disabled": False},
        "aural_shock": False,
        "fate_points": [point(LUCKY_STAR, "Lucky Star", None, 2), point(BLADE, "Blade of Destiny", "melee", None)],
    }
    base.update(overrides)
    return base


def sohl_test(**overrides: Any) -> dict:
    base = {
        "kind": "skill",
        "code": "archery",
        "name": "Archery Test",
        "eml": 55,
        "roll": 88,
        "level_mod": 0,
        "basis": [],
        "skill_base_formula": "sb(attr.per, attr.dex)",
        "basic": False,
        "reported_level": 0,
        "item_id": "PLACEHOLDERarc01",
    }
    base.update(overrides)
    return base


def rolled(event_id: str = "ev-roll", message_id: str = "msg1", *, actor_part: dict | None = None,
                test: dict | None = None, **extra: Any) -> dict:
    return {"type": "test_rolled", "v": 1, "event_id": event_id, "ruleset": "sohl", "message_id": message_id,
            "actor": actor_part or actor(), "test": test or sohl_test(), "visibility": "public", **extra}


def fate_spend(event_id: str = "ev-spend", message_id: str = "msg1", point_id: str = LUCKY_STAR,
               user_id: str = PLAYER, **extra: Any) -> dict:
    return {"type": "fate_spend", "v": 1, "event_id": event_id, "message_id": message_id,
            "point_id": point_id, "user_id": user_id, **extra}


def fate_choice(choice: str, event_id: str = "ev-choice", message_id: str = "msg1", user_id: str = PLAYER,
                **extra: Any) -> dict:
    return {"type": "fate_choice", "v": 1, "event_id": event_id, "message_id": message_id,
            "choice": choice, "user_id": user_id, **extra}


def frame(message: dict) -> bytes:
    return json.dumps(message).encode()
