"""Builders of hmtw wire messages for tests, shaped like the hmtw samples (Silán Storysoul:
Swords 4, Pentacles 2, Cups 3; a second adventurer, Patches, for group tests), and the scripted
die that draws a named card."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from bridge.rulesets.hmtw import rules as hmtw

PLAYER = "RECONplayer00001"
PLAYER_TWO = "RECONplayer00002"
GM = "RECONgmUser00001"
STRANGER = "otherPlayer0001"
SILAN = "RECONhmtwActor01"
PATCHES = "RECONhmtwActor02"


def actor(actor_id: str = SILAN, name: str = "Silán Storysoul", owners: Iterable[str] = (PLAYER, GM)) -> dict:
    return {"actor_id": actor_id, "name": name, "owner_user_ids": list(owners)}


def fate_test(event_id: str = "ev-test", test_id: str = "tof1", *, attribute: str = "pentacles",
                 score: int = 2, **extra: Any) -> dict:
    return {"type": "hmtw_test", "v": 1, "event_id": event_id, "test_id": test_id, "actor": actor(),
            "attribute": attribute, "score": score, "user_id": PLAYER, "user_name": "Player One", **extra}


def member(actor_part: dict, score: int, user_id: str, **extra: Any) -> dict:
    return {"actor": actor_part, "score": score, "user_id": user_id, **extra}


def group_test(event_id: str = "ev-group", test_id: str = "grp1", *, attribute: str = "cups",
               members: list[dict] | None = None, **extra: Any) -> dict:
    members = members or [member(actor(), 3, PLAYER),
                          member(actor(PATCHES, "Patches", (PLAYER_TWO, GM)), 1, PLAYER_TWO)]
    return {"type": "hmtw_group_test", "v": 1, "event_id": event_id, "test_id": test_id,
            "attribute": attribute, "members": members, "user_id": GM, "user_is_gm": True, **extra}


def push(event_id: str = "ev-push", test_id: str = "tof1", user_id: str = PLAYER, **extra: Any) -> dict:
    return {"type": "hmtw_push", "v": 1, "event_id": event_id, "test_id": test_id, "user_id": user_id, **extra}


def challenge(event_id: str = "ev-act", action_id: str = "act1", *, attribute: str = "swords", score: int = 4,
              **extra: Any) -> dict:
    return {"type": "hmtw_challenge_action", "v": 1, "event_id": event_id, "action_id": action_id,
            "actor": actor(), "attribute": attribute, "score": score, "user_id": PLAYER, **extra}


def deck_command(command: str, event_id: str = "ev-deck", user_is_gm: bool = True, **extra: Any) -> dict:
    return {"type": "hmtw_deck_command", "v": 1, "event_id": event_id, "command": command,
            "user_id": GM if user_is_gm else PLAYER, "user_is_gm": user_is_gm, **extra}


def gm_draw(event_id: str = "ev-gm", user_is_gm: bool = True) -> dict:
    return {"type": "hmtw_gm_draw", "v": 1, "event_id": event_id, "user_id": GM if user_is_gm else PLAYER,
            "user_is_gm": user_is_gm}


def clear(obstacle: str, event_id: str = "ev-clear", user_is_gm: bool = True) -> dict:
    return {"type": "hmtw_clear_obstacle", "v": 1, "event_id": event_id, "obstacle": obstacle,
            "user_id": GM if user_is_gm else PLAYER, "user_is_gm": user_is_gm}


def frame(message: dict) -> bytes:
    return json.dumps(message).encode()


class Table:
    """Follows a world's player deck as the bridge keeps it, to script the die that draws a named
    card: ``table.pick("wands-12")`` is the die value (1..n) that draws the Knight of Wands from
    the cards still undrawn, in deck order; it is then taken out. ``reshuffle(on_table)`` puts
    every card back but those still on the table (H14), as the bridge does after the Fool or an
    empty deck."""

    def __init__(self, deck: tuple[str, ...] = hmtw.PLAYER_DECK) -> None:
        self.deck = deck
        self.undrawn = list(deck)

    def pick(self, code: str) -> int:
        index = self.undrawn.index(code)
        del self.undrawn[index]
        return index + 1

    def picks(self, *codes: str) -> list[int]:
        return [self.pick(code) for code in codes]

    def reshuffle(self, on_table: Iterable[str] = ()) -> None:
        self.undrawn = [code for code in self.deck if code not in set(on_table)]
