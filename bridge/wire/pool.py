"""pool: dice-pool checks, Fate and Destiny (seed 004; DECISIONS.md P1-P13)."""

from __future__ import annotations

CLIENT: tuple[type, ...] = ()
BRIDGE: tuple[type, ...] = ()
