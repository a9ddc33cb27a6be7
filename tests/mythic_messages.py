"""Builders of mythic wire messages for tests: a player asks the Fate Chart (High against
Average unless told otherwise), a GM sets the world's Fate Chart options."""

from __future__ import annotations

from typing import Any

PLAYER = "playerUser00001"
GM = "gmUser000000001"
ACTOR_ID = "brakkaActor0001"


def question(event_id: str = "ev-q", acting: str = "High", difficulty: str = "Average", **extra: Any) -> dict:
    return {"type": "chart_question", "v": 1, "event_id": event_id, "acting_rank": acting,
            "difficulty_rank": difficulty, "user_id": PLAYER, **extra}


def named(key: str, event_id: str = "ev-named", acting: str = "High", difficulty: str = "Average",
          modifiers: list[dict] | None = None, **extra: Any) -> dict:
    return question(event_id, acting, difficulty, named=key, modifiers=modifiers or [], **extra)


def odds_question(odds: str, event_id: str = "ev-odds", **extra: Any) -> dict:
    return {"type": "chart_odds_question", "v": 1, "event_id": event_id, "odds": odds, "user_id": PLAYER,
            **extra}


def chart_settings(event_id: str = "ev-settings", user_id: str = GM, user_is_gm: bool = True,
                   **options: Any) -> dict:
    return {"type": "chart_settings", "v": 1, "event_id": event_id, "user_id": user_id,
            "user_is_gm": user_is_gm, **options}


def catalog_query(event_id: str = "ev-catalog") -> dict:
    return {"type": "chart_catalog_query", "v": 1, "event_id": event_id}
