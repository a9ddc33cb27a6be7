"""The installed rulesets, in the order ``welcome`` announces them.

Each is one folder, ``bridge/rulesets/<id>/``, exporting a :class:`~bridge.ruleset.Ruleset` as
``RULESET``; the wire union, the router (``bridge.dispatch``), the schemas and ``welcome`` are built
from :func:`installed`. Adding a ruleset is one folder and one line in :data:`BUILT_IN`; a ruleset
kept elsewhere (a test's, a third party's) is added at run time with :func:`register`.
"""

from __future__ import annotations

from ..ruleset import Ruleset
from . import hmtw, mythic, pool, sohl

BUILT_IN: tuple[Ruleset, ...] = (
    sohl.RULESET,
    hmtw.RULESET,
    mythic.RULESET,
    pool.RULESET,
)

_installed: list[Ruleset] = list(BUILT_IN)


def installed() -> tuple[Ruleset, ...]:
    """Every installed ruleset: the built-in ones, then the registered ones in order."""
    return tuple(_installed)


def register(ruleset: Ruleset) -> None:
    """Install ``ruleset`` after the others: its messages join the wire union and the router,
    its id ``welcome``. Raises ``ValueError`` when its id, or one of its message tags, is taken."""
    taken_tags = {c.__struct_config__.tag for r in _installed for c in (*r.client, *r.bridge)}
    clashes = sorted(taken_tags & {c.__struct_config__.tag for c in (*ruleset.client, *ruleset.bridge)})
    if any(r.id == ruleset.id for r in _installed) or clashes:
        raise ValueError(f"ruleset {ruleset.id!r} clashes with an installed one: id or tags {clashes}")
    _installed.append(ruleset)
    _rebuild()


def unregister(ruleset_id: str) -> None:
    """Remove a ruleset added with :func:`register` (built-in ones stay); unknown ids are ignored."""
    _installed[:] = [r for r in _installed if r.id != ruleset_id or r in BUILT_IN]
    _rebuild()


def _rebuild() -> None:
    """Drop what was built from the list (the wire union and decoders, the router)."""
    from .. import dispatch, wire

    wire.rebuild()
    dispatch.rebuild()
