"""The one exception tree of the bridge; each refusal class knows its wire ``code``.

::

    BridgeError                      Base. Never sent as is.
    └── Refusal                      Answered to the client as ``error{code, message, ref, field}``.
                                     Data (a msgid and its parameters), translated in that frame.
        ├── BadMessage               bad_message      Frame is not valid JSON or fails validation.
        ├── UnknownMessage           unknown_message  ``type`` names no message the bridge knows.
        ├── Unauthorized             unauthorized     Missing/wrong token or ``hello`` not first (closes).
        ├── Forbidden                forbidden        The asking user may not act for the actor.
        ├── NotEligible              not_eligible     Fate withheld (S5) or the point does not apply (S7).
        ├── AlreadyFated             already_fated    The result was fated before (S11).
        ├── NoCharges                no_charges       The chosen point has no charge left (S7).
        ├── NotFound                 not_found        Message never graded, or no pending choice.
        ├── RateLimited              rate_limited     Too many decisions for the world, or failed hellos
        │                                             from one address (bridge/limits.py).
        ├── Unavailable              unavailable      The store cannot write now (StorageUnavailable).
        │                                             Nothing was applied: send it again after
        │                                             ``retry_after_ms``.
        └── Internal                 internal         Anything unexpected. Details only in the log.
    └── ConfigError                  Operator-side problem. The CLI exits 2.
        └── WorldNotRegistered       Also closes that world's connections with 4001.
    └── LeaseLost                    Another bridge process took the world (PostgreSQL store).
                                     The decision was not applied. The connection closes 4003.
    └── StorageUnavailable           The database cannot be written or reached now: disk full,
                                     read-only, unreachable, locked too long, its file deleted.
                                     Answered ``unavailable``. The store logs the outage's start
                                     and end.

A refusal leaves every stored row untouched. The decision that raised it writes nothing but the
reply kept under its ``event_id``, so a repeat gets the same answer.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Text:
    """Words shown in a language chosen later, such as a refusal's message (:class:`Refusal`).

    ``msgid`` is the English text and its catalog's key. ``params`` are filled in after it is
    translated: ``%(name)s``, or ``{name}`` when ``braces``. That is the msgid's own style, which
    its catalog entry keeps. A :class:`Text` or :class:`Joined` among them is shown in the same
    language first. A msgid no catalog holds, such as a decoder's own words, is shown as it is."""

    msgid: str
    params: Mapping[str, object] | None = None
    braces: bool = False

    def shown(self, gettext: Callable[[str], str]) -> str:
        """The text in the language of ``gettext`` (a catalog's, :func:`bridge.i18n.translations`)."""
        words = gettext(self.msgid)
        if not self.params:
            return words
        values = {k: v.shown(gettext) if isinstance(v, Text | Joined) else v for k, v in self.params.items()}
        return words.format(**values) if self.braces else words % values


@dataclass(frozen=True, slots=True)
class Joined:
    """Several words shown in one language, such as a list of reasons, joined by ``separator``.

    Each of ``parts``, and the separator, is a :class:`Text` (translated) or a ``str`` (shown as it
    is)."""

    parts: tuple[Text | str, ...]
    separator: Text | str = ", "

    def shown(self, gettext: Callable[[str], str]) -> str:
        """The parts in the language of ``gettext``, joined."""
        separator = self.separator.shown(gettext) if isinstance(self.separator, Text) else self.separator
        return separator.join(p.shown(gettext) if isinstance(p, Text) else p for p in self.parts)


class BridgeError(Exception):
    """Base of every error the bridge raises on purpose."""


class Refusal(BridgeError):
    """A request the bridge answers with ``error``; ``code`` is the contract's error code.

    Data, not prose. ``text`` is the message as a msgid and its parameters: ``Refusal(N_("no test
    %(test)s"), {"test": test_id})``, or a :class:`Text` or :class:`Joined` made already. It is safe
    to show a player. It is translated once, where the reply frame is made
    (:func:`bridge.replies.error_reply`). So nothing raises one inside a language. ``field`` is the
    JSON path of the offending field, such as ``"test.eml"``, or None. ``message`` (and ``str()``)
    is the English text, for logs and tests."""

    code: str = "internal"

    def __init__(self, message: str | Text | Joined, params: Mapping[str, object] | None = None, *,
                 field: str | None = None) -> None:
        self.text = Text(message, params) if isinstance(message, str) else message
        super().__init__(self.text)
        self.field = field

    @property
    def message(self) -> str:
        """The English text."""
        return self.text.shown(str)  # English: each msgid as it is

    def __str__(self) -> str:
        return self.message


class BadMessage(Refusal):
    code = "bad_message"


class UnknownMessage(Refusal):
    code = "unknown_message"


class Unauthorized(Refusal):
    code = "unauthorized"


class Forbidden(Refusal):
    code = "forbidden"


class NotEligible(Refusal):
    code = "not_eligible"


class AlreadyFated(Refusal):
    code = "already_fated"


class NoCharges(Refusal):
    code = "no_charges"


class NotFound(Refusal):
    code = "not_found"


class RateLimited(Refusal):
    code = "rate_limited"


class Unavailable(Refusal):
    """The bridge cannot store decisions now (:class:`StorageUnavailable`); nothing was applied.

    The client sends the same request (same ``event_id``) again after ``retry_after_ms``."""

    code = "unavailable"

    def __init__(self, message: str, *, retry_after_ms: int) -> None:
        super().__init__(message)
        self.retry_after_ms = retry_after_ms


class Internal(Refusal):
    code = "internal"


class ConfigError(BridgeError):
    """Operator-side problem (bad ``--db`` path, unknown world for ``world`` commands).

    The CLI prints the message and exits with status 2.
    """


class WorldNotRegistered(ConfigError):
    """The world is not (or no longer) registered. The CLI says so; a connection of that world
    is answered ``unauthorized`` and closed (4001), as after ``fate-bridge world remove``."""


class WorldStateMismatch(WorldNotRegistered):
    """A world's state rows differ from what its audit chain produces.

    The bridge does not serve it until ``audit repair``. Its connection is refused like an
    unregistered world's."""


class WorldSettingsInvalid(WorldNotRegistered):
    """A world's stored settings row cannot be read: a value outside its enum.

    Such a value was written by hand or by another program. The bridge serves the other worlds. It
    refuses this one's connection like an unregistered world's, naming the world and the value,
    until it is repaired."""


class SigningKeyChanged(WorldNotRegistered):
    """A world's chain is signed by another key than the one this bridge holds.

    ``audit new-key`` ran while it served. The bridge serves that world no more, and signs nothing
    for it, until restarted with the new key. Its connection is refused like an unregistered
    world's."""


class LeaseLost(BridgeError):
    """Another bridge process holds the world's lease now (``bridge.store.postgres``).

    The database's fencing check refused this process's decision; nothing was applied. The
    forwarder's connection is closed with 4003 (superseded), unanswered. That is what happens when
    it is superseded inside one process. The module rejects the request as ``superseded`` and stops.
    The browser that took the world over goes on with it."""


class StorageUnavailable(BridgeError):
    """The store cannot write (or reach) its database now.

    ``reason`` is one of :data:`bridge.store.health.REASONS`: ``disk_full``, ``read_only``,
    ``unreachable``, ``locked``, ``io_error``, ``database_file_gone``. Nothing of the request was
    applied. The session answers ``unavailable`` with ``retry_after_ms``, the milliseconds before
    sending it again. The store logs one line when the outage starts and one when it ends. It
    answers ``/healthz`` 503 meanwhile (:class:`bridge.store.health.StorageHealth`)."""

    def __init__(self, reason: str, retry_after_ms: int) -> None:
        super().__init__(f"the database is unavailable ({reason})")
        self.reason = reason
        self.retry_after_ms = retry_after_ms
