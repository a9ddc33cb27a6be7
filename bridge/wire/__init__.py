"""Every wire message between the Foundry module and the bridge: the protocol is this package.

The names are wire contract v1's (``tests/test_wire.py`` pins them); ``docs/protocol.md`` explains the flow
and ``schemas/`` holds the JSON Schema generated from these classes. This package holds the shared
messages (``session``, ``audit``, ``overlay``, each listing its ``CLIENT`` and ``BRIDGE`` classes);
every ruleset's own messages live in ``bridge/rulesets/<id>/wire.py`` and join the union through
its :class:`~bridge.ruleset.Ruleset` (``client``, ``bridge``). The union (``ClientMessages``,
``BridgeMessages``) and the rulesets' message names (``wire.TestRolled``...) are resolved on first
use from ``bridge.rulesets.installed()`` (PEP 562 ``__getattr__``), because the rulesets' own modules
import this package's shared types.

Framing: one JSON object per text frame, tagged by ``"type"``, always with ``"v": 1``. Client
messages refuse unknown fields (``forbid_unknown_fields``); bridge messages are only encoded.
Every class is ``kw_only`` and ``frozen``.

Decoding goes through :func:`decode_client`, which turns every msgspec error into
:class:`~bridge.errors.BadMessage` or :class:`~bridge.errors.UnknownMessage` with the offending
field named (``error.field``), so one place maps decode failures to the contract.
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass
from typing import Any, Union

import msgspec

from ..errors import BadMessage, Refusal, UnknownMessage
from ..i18n import _
from . import audit, frames, overlay, session
from .audit import *  # noqa: F403
from .base import *  # noqa: F403
from .base import BridgeMessage, ClientMessage
from .overlay import *  # noqa: F403
from .session import *  # noqa: F403

_SHARED = (session, audit, overlay)


@dataclass(frozen=True, slots=True)
class _Protocol:
    """The whole wire protocol, from the shared modules and every installed ruleset."""

    client_types: tuple[type[ClientMessage], ...]
    bridge_types: tuple[type[BridgeMessage], ...]
    names: dict[str, object]  # every public name of the rulesets' wire modules
    decoder: msgspec.json.Decoder
    bridge_decoder: msgspec.json.Decoder


@functools.cache
def _protocol() -> _Protocol:
    from ..fairness import wire as dice
    from ..rulesets import installed

    rulesets = installed()
    shared = (*_SHARED, dice)  # the dice messages (issue 19) are every ruleset's
    client = tuple(c for m in shared for c in m.CLIENT) + tuple(c for r in rulesets for c in r.client)
    bridge = tuple(c for m in shared for c in m.BRIDGE) + tuple(c for r in rulesets for c in r.bridge)
    modules = dict.fromkeys(importlib.import_module(c.__module__) for r in rulesets for c in (*r.client, *r.bridge))
    names = {name: getattr(module, name) for module in modules
             for name in dir(module) if not name.startswith("_")}
    return _Protocol(client, bridge, names, msgspec.json.Decoder(Union[client]),  # type: ignore[arg-type]
                     msgspec.json.Decoder(Union[bridge]))  # type: ignore[arg-type]


def rebuild() -> None:
    """Forget the union built from the installed rulesets (``bridge.rulesets.register`` calls it)."""
    _protocol.cache_clear()


def bridge_decoder() -> msgspec.json.Decoder:
    """A decoder of every bridge message (replies read back from the audit trail or a terminal)."""
    return _protocol().bridge_decoder


def __getattr__(name: str) -> object:
    """``CLIENT_TYPES``, ``BRIDGE_TYPES``, ``ClientMessages``, ``BridgeMessages`` (the unions
    every decoder and schema uses) and the rulesets' message classes, built on first use."""
    protocol = _protocol()
    if name == "CLIENT_TYPES":
        return protocol.client_types
    if name == "BRIDGE_TYPES":
        return protocol.bridge_types
    if name == "ClientMessages":
        return Union[protocol.client_types]  # type: ignore[valid-type]
    if name == "BridgeMessages":
        return Union[protocol.bridge_types]  # type: ignore[valid-type]
    try:
        return protocol.names[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None


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


def decode_client(frame: bytes | str) -> Any:
    """Decode one client frame into its message class.

    Raises :class:`BadMessage` (not JSON, not an object, missing/invalid ``type`` or a field that
    fails validation; ``field`` names it) or :class:`UnknownMessage` (a ``type`` the bridge does
    not know). Never raises anything else: :func:`frames.check` bounds size and nesting first.
    """
    frames.check(frame)
    try:
        return _protocol().decoder.decode(frame)
    except msgspec.ValidationError as exc:
        text = str(exc)
        if "Invalid value" in text and text.endswith("- at `$.type`"):
            raise UnknownMessage(_("unknown message type %(type)s") % {"type": _tag_of(text)}, field="type") from None
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

