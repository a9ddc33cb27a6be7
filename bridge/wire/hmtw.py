"""hmtw: tests of fate with tarot decks (His Majesty the Worm; DECISIONS.md H1-H10)."""

from __future__ import annotations

CLIENT: tuple[type, ...] = ()
BRIDGE: tuple[type, ...] = ()
