"""mythic: the Fate Chart (Mythic; DECISIONS.md M1-M7)."""

from __future__ import annotations

CLIENT: tuple[type, ...] = ()
BRIDGE: tuple[type, ...] = ()
