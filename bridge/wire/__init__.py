"""Every wire message between the Foundry module and the bridge: the protocol is this package.

The names are wire contract v1's; ``tests/test_wire.py`` pins them. ``docs/protocol.md``
explains the flow. ``schemas/`` holds the JSON Schema generated from these classes.

This package holds the shared messages: ``control``, ``audit_window``, ``overlay``, each listing its
``CLIENT`` and ``BRIDGE`` classes. Each ruleset's own messages live in
``bridge/rulesets/<id>/wire.py``. They join the union through its
:class:`~bridge.ruleset.Ruleset` (``client``, ``bridge``). This package is beneath the rulesets
and knows none of them. The union of every message and its decoder
(:func:`bridge.registry.decode_client`) are assembled above them, in :mod:`bridge.registry`.

Framing: one JSON object per text frame, tagged by ``"type"``, always with ``"v": 1``. Client
messages refuse unknown fields (``forbid_unknown_fields``); bridge messages are only encoded.
Every class is ``kw_only`` and ``frozen``.

Decoding goes through :func:`bridge.registry.decode_client`. :func:`error_field` names the
offending field of a msgspec error.
"""

from __future__ import annotations

import re

import msgspec

from ..errors import BadMessage
from . import guard
from .audit_window import *  # noqa: F403
from .base import *  # noqa: F403
from .overlay import *  # noqa: F403
from .control import *  # noqa: F403

_encoder = msgspec.json.Encoder()
_probe = msgspec.json.Decoder(dict)

# msgspec puts the path at the end of its messages: "Expected `int`, got `str` - at `$.test.eml`".
_PATH = re.compile(r" - at `\$((?:\.[^.\[`]+|\[\d+\])*)`$")


def error_field(error_text: str) -> str | None:
    """The offending field of a msgspec error message as a dotted path.

    ``"Expected `int`, got `str` - at `$.test.eml`"`` -> ``"test.eml"``;
    ``"... - at `$.actor.fate_points[1].charges`"`` -> ``"actor.fate_points[1].charges"``;
    ``"Object missing required field `roll` - at `$.test`"`` -> ``"test.roll"``;
    ``"Object contains unknown field `x` - at `$.actor`"`` -> ``"actor.x"``; no path -> None
    (or the named field at top level).
    """
    path: str | None = None
    match = _PATH.search(error_text)
    if match:
        path = match.group(1).lstrip(".")
        error_text = error_text[: match.start()]
    named = re.match(r"Object (?:missing required|contains unknown) field `([^`]+)`", error_text)
    if named:
        return f"{path}.{named.group(1)}" if path else named.group(1)
    return path or None


def encode(message: msgspec.Struct) -> bytes:
    """Encode one message (or a part of one, such as a receipt) as JSON (UTF-8 bytes)."""
    return _encoder.encode(message)


def ref_of(frame: bytes | str) -> str | None:
    """Best-effort ``event_id`` (or ``query_id``) of a frame that failed to decode, for ``error.ref``.

    None when the frame is not an object, carries neither as a string, or is too big or deep to
    read safely.
    """
    try:
        guard.check(frame)
        obj = _probe.decode(frame)
    except (BadMessage, msgspec.DecodeError, msgspec.ValidationError):
        return None
    value = obj.get("event_id") or obj.get("query_id")
    return value if isinstance(value, str) and len(value) <= 128 else None

