"""Every wire message between the Foundry module and the bridge: the protocol is this package.

The names follow ``shared/contract.md`` (wire contract v1); ``docs/protocol.md`` explains the flow
and ``schemas/`` holds the JSON Schema generated from these classes; one module per ruleset (``sohl``,
``hmtw``, ``mythic``, ``pool``) plus ``session``, ``audit`` and ``overlay``, each listing its ``CLIENT`` and
``BRIDGE`` message classes (``fate-bridge schema``).

Framing: one JSON object per text frame, tagged by ``"type"``, always with ``"v": 1``. Client
messages refuse unknown fields (``forbid_unknown_fields``); bridge messages are only encoded.
Every class is ``kw_only`` and ``frozen``.

Decoding goes through :func:`decode_client`, which turns every msgspec error into
:class:`~bridge.errors.BadMessage` or :class:`~bridge.errors.UnknownMessage` with the offending
field named (``error.field``), so one place maps decode failures to the contract.
"""

from __future__ import annotations

import re
from typing import Union

import msgspec

from ..errors import BadMessage, Refusal, UnknownMessage
from . import audit, frames, hmtw, mythic, overlay, pool, session, sohl
from .audit import *  # noqa: F403
from .base import *  # noqa: F403
from .base import BridgeMessage, ClientMessage
from .hmtw import *  # noqa: F403
from .mythic import *  # noqa: F403
from .overlay import *  # noqa: F403
from .pool import *  # noqa: F403
from .session import *  # noqa: F403
from .sohl import *  # noqa: F403

_MODULES = (session, audit, overlay, sohl, hmtw, mythic, pool)
CLIENT_TYPES: tuple[type[ClientMessage], ...] = tuple(c for m in _MODULES for c in m.CLIENT)
BRIDGE_TYPES: tuple[type[BridgeMessage], ...] = tuple(c for m in _MODULES for c in m.BRIDGE)
ClientMessages = Union[CLIENT_TYPES]  # type: ignore[valid-type]
BridgeMessages = Union[BRIDGE_TYPES]  # type: ignore[valid-type]

_decoder = msgspec.json.Decoder(ClientMessages)
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


def _tag_of(error_text: str) -> str:
    """The rejected tag quoted in ``"Invalid value 'nope' - at `$.type`"``."""
    match = re.match(r"Invalid value (.*) - at `\$\.type`$", error_text)
    return match.group(1) if match else "?"


def decode_client(frame: bytes | str) -> ClientMessages:
    """Decode one client frame into its message class.

    Raises :class:`BadMessage` (not JSON, not an object, missing/invalid ``type`` or a field that
    fails validation; ``field`` names it) or :class:`UnknownMessage` (a ``type`` the bridge does
    not know). Never raises anything else: :func:`frames.check` bounds size and nesting first.
    """
    frames.check(frame)
    try:
        return _decoder.decode(frame)
    except msgspec.ValidationError as exc:
        text = str(exc)
        if "Invalid value" in text and text.endswith("- at `$.type`"):
            raise UnknownMessage(f"unknown message type {_tag_of(text)}", field="type") from None
        raise BadMessage(text, field=error_field(text)) from None
    except msgspec.DecodeError as exc:
        raise frames.undecodable(frame, exc) from None


def encode(message: BridgeMessage | ClientMessage) -> bytes:
    """Encode one message as a JSON frame (UTF-8 bytes)."""
    return _encoder.encode(message)


def ref_of(frame: bytes | str) -> str | None:
    """Best-effort ``event_id`` (or ``query_id``) of a frame that failed to decode, for
    ``error.ref``; None when the frame is not an object or carries neither as a string, or is too
    big or deep to read safely."""
    try:
        frames.check(frame)
        obj = _probe.decode(frame)
    except (BadMessage, msgspec.DecodeError, msgspec.ValidationError):
        return None
    value = obj.get("event_id") or obj.get("query_id")
    return value if isinstance(value, str) and len(value) <= 128 else None

