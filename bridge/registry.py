"""The installed rulesets, and what is assembled from them.

That is the wire union and its decoders, and the ids ``welcome`` announces. The route table of their
messages is :func:`bridge.core.routes`.

This sits above the rulesets and below the decision core (``docs/architecture.md``, Layers). The
rulesets import nothing above the plug-in interface (:mod:`bridge.ruleset`) and the shared wire
types (:mod:`bridge.wire`). This module imports them. On first use it builds everything that needs
the whole list. Adding a ruleset is one folder (``bridge/rulesets/<id>/``) and one line in
:data:`BUILT_IN`. A ruleset kept elsewhere (a test's, a third party's) is added at run time with
:func:`register`.

Decoding goes through :func:`decode_client`. It turns every msgspec error into
:class:`~bridge.errors.BadMessage` or :class:`~bridge.errors.UnknownMessage`, with the offending
field named (``error.field``). So one place maps decode failures to the contract.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Union

import msgspec

from . import i18n, wire
from .errors import BadMessage, UnknownMessage
from .fairness import wire as dice_wire
from .i18n import N_
from .ruleset import CardText, Era, Ruleset
from .rulesets import hmtw, mythic, pool, sohl
from .wire import audit_window, control, guard, overlay

BUILT_IN: tuple[Ruleset, ...] = (
    sohl.RULESET,
    hmtw.RULESET,
    mythic.RULESET,
    pool.RULESET,
)
"""The built-in rulesets, in the order ``welcome`` announces them."""

_SHARED = (control, audit_window, overlay, dice_wire)  # the dice messages are every ruleset's

_installed: list[Ruleset] = list(BUILT_IN)


@dataclass(frozen=True, slots=True, eq=False)  # compared and hashed by identity (bridge.core caches on it)
class Protocol:
    """The whole wire protocol of the installed rulesets, built once per list (their routes:
    :func:`bridge.core.routes`).

    ``client_types``/``bridge_types``: every message class (shared ones first). ``ruleset_of``:
    client message class -> ruleset id.
    ``card_text``: bridge message class -> its ruleset's :data:`~bridge.ruleset.CardText`.
    ``ids``: the ids ``welcome`` announces (rulesets with handlers)."""

    client_types: tuple[type[wire.ClientMessage], ...]
    bridge_types: tuple[type[wire.BridgeMessage], ...]
    decoder: msgspec.json.Decoder
    bridge_decoder: msgspec.json.Decoder
    ruleset_of: dict[type, str]
    card_text: dict[type, CardText]
    ids: tuple[str, ...]


@functools.cache
def protocol() -> Protocol:
    """The protocol of the installed rulesets (cached until :func:`register`/:func:`unregister`)."""
    rulesets = tuple(_installed)
    client = tuple(c for m in _SHARED for c in m.CLIENT) + tuple(c for r in rulesets for c in r.client)
    bridge = tuple(c for m in _SHARED for c in m.BRIDGE) + tuple(c for r in rulesets for c in r.bridge)
    return Protocol(
        client_types=client, bridge_types=bridge,
        decoder=msgspec.json.Decoder(Union[client]),
        bridge_decoder=msgspec.json.Decoder(Union[bridge]),
        ruleset_of={kind: r.id for r in rulesets for kind in r.client},
        card_text={kind: r.card_text for r in rulesets if r.card_text is not None for kind in r.bridge},
        ids=tuple(r.id for r in rulesets if r.handlers),
    )


def installed() -> tuple[Ruleset, ...]:
    """Every installed ruleset: the built-in ones, then the registered ones in order."""
    return tuple(_installed)


def register(ruleset: Ruleset) -> None:
    """Install ``ruleset`` after the others.

    Its messages join the wire union and the routes. Its id joins ``welcome``. Its catalogs
    (``Ruleset.locale``) join the bridge's words. Raises ``ValueError`` when its id, or one of its
    message tags, is taken."""
    built = protocol()
    taken_tags = {str(c.__struct_config__.tag) for c in (*built.client_types, *built.bridge_types)}
    clashes = sorted(taken_tags & {str(c.__struct_config__.tag) for c in (*ruleset.client, *ruleset.bridge)})
    if any(r.id == ruleset.id for r in _installed) or clashes:
        raise ValueError(f"ruleset {ruleset.id!r} clashes with an installed one: id or tags {clashes}")
    if ruleset.locale is not None:
        i18n.add_catalogs(ruleset.locale)
    _installed.append(ruleset)
    protocol.cache_clear()


def unregister(ruleset_id: str) -> None:
    """Remove a ruleset added with :func:`register` (built-in ones stay); unknown ids are ignored."""
    _installed[:] = [r for r in _installed if r.id != ruleset_id or r in BUILT_IN]
    protocol.cache_clear()


def rulesets() -> list[str]:
    """The ids of the installed rulesets, as ``welcome.rulesets`` announces them."""
    return list(protocol().ids)


def ruleset_of(message: wire.ClientMessage) -> str | None:
    """The id of the installed ruleset a request belongs to (None for shared messages)."""
    return protocol().ruleset_of.get(type(message))


def eras_of(message: wire.ClientMessage) -> tuple[Era, ...]:
    """The earlier rules of the ruleset a request belongs to (:attr:`Ruleset.eras`).

    None for shared messages. They serve to re-derive a trail decided under them."""
    ruleset_id = ruleset_of(message)
    return next((r.eras for r in installed() if r.id == ruleset_id), ())


def bridge_decoder() -> msgspec.json.Decoder:
    """A decoder of every bridge message (replies read back from the audit trail or a terminal)."""
    return protocol().bridge_decoder


def client_messages() -> Any:
    """The union of every client message (what :func:`decode_client` decodes; the schemas')."""
    return Union[protocol().client_types]


def bridge_messages() -> Any:
    """The union of every bridge message (the schemas')."""
    return Union[protocol().bridge_types]


def _tag_of(error_text: str) -> str:
    """The rejected tag quoted in ``"Invalid value 'nope' - at `$.type`"``."""
    match = re.match(r"Invalid value (.*) - at `\$\.type`$", error_text)
    return match.group(1) if match else "?"


def decode_client(frame: bytes | str) -> Any:
    """Decode one client frame into its message class.

    Raises :class:`BadMessage` for a frame that is not JSON, not an object, has a missing or invalid
    ``type``, or a field that fails validation; ``field`` names it. Raises :class:`UnknownMessage`
    for a ``type`` the bridge does not know. Never raises anything else:
    :func:`bridge.wire.guard.check` bounds size and nesting first."""
    guard.check(frame)
    try:
        return protocol().decoder.decode(frame)
    except msgspec.ValidationError as exc:
        text = str(exc)
        if "Invalid value" in text and text.endswith("- at `$.type`"):
            raise UnknownMessage(N_("unknown message type %(type)s"), {"type": _tag_of(text)}, field="type") from None
        raise BadMessage(text, field=wire.error_field(text)) from None
    except msgspec.DecodeError as exc:
        raise guard.undecodable(frame, exc) from None
