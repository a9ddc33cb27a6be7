"""Where the bridge's own dice come from: injected into every rule, never drawn by a rule itself.

``Dice`` is the one interface: ``roll(faces) -> int`` in ``1..faces``. Production uses
:class:`SecretDice` (the ``secrets`` CSPRNG); tests and ``fate-bridge resolve`` use
:class:`ScriptedDice` with the values a line's ``"dice"`` gives.
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable
from typing import Protocol


class Dice(Protocol):
    """A source of die rolls. ``roll(faces)`` returns an int in ``1..faces``."""

    def roll(self, faces: int) -> int: ...


class SecretDice:
    """Dice from the operating system's cryptographic RNG (``secrets.randbelow``)."""

    def roll(self, faces: int) -> int:
        """One die of ``faces`` sides, uniform in ``1..faces``."""
        return secrets.randbelow(faces) + 1


class DiceExhausted(LookupError):
    """A :class:`ScriptedDice` was asked for more rolls than it was given."""


class ScriptedDice:
    """Dice that return the given values in order (for tests and ``resolve``).

    Raises :class:`DiceExhausted` when the script runs out, and ``ValueError`` when a scripted
    value does not fit the die asked for (e.g. 0 or 101 for a d100).
    """

    def __init__(self, values: Iterable[int]) -> None:
        self._values = list(values)
        self._next = 0

    def roll(self, faces: int) -> int:
        """The next scripted value, checked to lie in ``1..faces``."""
        if self._next >= len(self._values):
            raise DiceExhausted(f"no scripted die left for a d{faces} (given {len(self._values)})")
        value = self._values[self._next]
        if not 1 <= value <= faces:
            raise ValueError(f"scripted die {value} does not fit a d{faces} (1..{faces})")
        self._next += 1
        return value

    @property
    def used(self) -> int:
        """How many scripted values have been taken."""
        return self._next
