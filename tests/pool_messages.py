"""Builders of pool wire messages for tests: a party of one player character (Aldric, level 3 so
Tier 2, stamina 4, owned by PLAYER), one retainer (Bren) and a world stat table for the tests
(the seed gives none, P11; these rows are test data, not rules)."""

from __future__ import annotations

import json
from typing import Any

PLAYER = "playerUser00001"
GM = "gmUser000000001"
STRANGER = "otherPlayer0001"
ALDRIC = "actorAldric00001"
BREN = "actorBren0000001"

STAT_TABLE = [
    {"min_score": 3, "die": -6, "modifier": -2},
    {"min_score": 8, "die": -4, "modifier": -1},
    {"min_score": 10, "die": 0, "modifier": 0},
    {"min_score": 12, "die": 4, "modifier": 1},
    {"min_score": 14, "die": 6, "modifier": 2},
    {"min_score": 16, "die": 8, "modifier": 3},
]
CONFIG = {"task_tier_names": ["Hard", "Daunting", "Heroic"], "dc_by_effect_tier": [10, 12, 14, 16, 18],
          "stat_table": STAT_TABLE, "narrative_consequences": False}


def gm(type_: str, event_id: str, **fields: Any) -> dict:
    return {"type": type_, "v": 1, "event_id": event_id, "user_id": GM, "user_is_gm": True, **fields}


def configure(event_id: str = "ev-config", **overrides: Any) -> dict:
    return gm("pool_configure", event_id, config={**CONFIG, **overrides})


def character(event_id: str = "ev-aldric", character_id: str = ALDRIC, name: str = "Aldric", kind: str = "pc",
              level: int = 3, stamina: int = 4, owners: list[str] | None = None) -> dict:
    return gm("pool_character", event_id, character_id=character_id, name=name, kind=kind, level=level,
              stamina=stamina, owner_user_ids=[PLAYER] if owners is None else owners)


def retainer(event_id: str = "ev-bren", **overrides: Any) -> dict:
    return character(event_id, **{"character_id": BREN, "name": "Bren", "kind": "retainer", "level": 1,
                                  "stamina": 2, **overrides})


def check(event_id: str = "ev-check", character_id: str = ALDRIC, user_id: str = PLAYER, **fields: Any) -> dict:
    base = {"stat_modifier": 2, "task_tier": 2}
    return {"type": "pool_check", "v": 1, "event_id": event_id, "character_id": character_id,
            "user_id": user_id, **base, **fields}


def save(event_id: str = "ev-save", character_id: str = ALDRIC, user_id: str = PLAYER, **fields: Any) -> dict:
    base = {"save": "heart", "stat_score": 14, "fate_score": 12, "dc": 14}
    return {"type": "pool_save", "v": 1, "event_id": event_id, "character_id": character_id,
            "user_id": user_id, **base, **fields}


def chat_roll(character_id: str = ALDRIC, kind: str = "attack", mode: str = "normal", d20s: list[int] | None = None,
              total: int = 17, **fields: Any) -> dict:
    return {"character_id": character_id, "kind": kind, "mode": mode, "d20s": d20s or [12], "total": total, **fields}


def reroll(event_id: str = "ev-reroll", roll_id: str = "chatMsgAttack001", user_id: str = PLAYER,
           roll: dict | None = None, **fields: Any) -> dict:
    message = {"type": "pool_reroll", "v": 1, "event_id": event_id, "roll_id": roll_id, "user_id": user_id,
               **fields}
    if roll is not None:
        message["roll"] = roll
    return message


def frame(message: dict) -> bytes:
    return json.dumps(message).encode()
