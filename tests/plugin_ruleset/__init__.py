"""A throwaway ruleset kept outside ``bridge/``: a called coin flip, built with the public
:class:`bridge.ruleset.Ruleset` type alone (tests/test_rulesets.py registers it), as a fifth
ruleset would be: this folder and one ``registry.register`` line.

``coin_flip`` (a user calls heads or tails; one d2 decides: 1 heads, 2 tails) is answered
``coin_flipped`` with a chat card, public unless the request says otherwise. The audit report
gets a column of calls won (per actor and session) and a section of the faces against a fair
coin (``templates/coin_report.html.j2``); ``resolve --cards`` a line per flip (:func:`card_text`).
Its German words are in its folder too (``locale/de/LC_MESSAGES/messages.po``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Literal

from bridge import charts
from bridge.cards import CardTemplates
from bridge.chi_square import fit_test
from bridge.i18n import N_, _
from bridge.ruleset import Outcome, Recorded, ReportPart, ReportSection, Ruleset, Tally, visible_card
from bridge.wire import AuditColumns, BridgeMessage, Card, Error, Name, UserRequest, Visibility

RULESET_ID = "coin"
FACES = ("heads", "tails")  # d2: 1 heads, 2 tails
Face = Literal["heads", "tails"]

TEMPLATES = CardTemplates(__package__)
render_card = TEMPLATES.render


class CoinFlip(UserRequest, tag="coin_flip", kw_only=True):
    """A user calls a face and flips (``event_id`` and ``user_id`` come with ``UserRequest``)."""

    actor_name: Name
    call: Face
    visibility: Visibility = "public"


class CoinFlipped(BridgeMessage, tag="coin_flipped", kw_only=True):
    """The face that came up and whether the call won."""

    event_id: str
    face: Face
    won: bool
    card: Card


def _flip(message: CoinFlip, state, dice) -> Outcome:
    face = FACES[dice.roll(2) - 1]
    won = face == message.call
    card = render_card("coin.html.j2", title=_("Coin flip"), ruleset=RULESET_ID, who=message.actor_name,
                       call=message.call, face=face, won=won)
    reply = CoinFlipped(event_id=message.event_id, face=face, won=won, card=card)
    columns = AuditColumns(ruleset=RULESET_ID, actor_name=message.actor_name, test_name="coin flip",
                           outcome="won" if won else "lost")
    return Outcome(reply, columns, visible_card(message, reply), {"face": face, "won": won})


def _refused(message: CoinFlip, error: Error, state) -> AuditColumns:
    return AuditColumns(ruleset=RULESET_ID, actor_name=message.actor_name, outcome=error.code)


def _won(decision: Recorded) -> int:
    return int(decision.columns.outcome == "won")


def _faces(decisions: Sequence[Recorded]) -> Counter[str]:
    """How often each face came up in the period's flips."""
    return Counter(d.reply["face"] for d in decisions if d.reply.get("face") in FACES)


def _faces_section(faces: Counter[str]) -> str:
    counts = [faces[face] for face in FACES]
    return TEMPLATES.html("coin_report.html.j2", faces=dict(zip(FACES, counts)),
                          fit=fit_test(counts, [sum(counts) / len(FACES)] * len(FACES)))


def card_text(reply: BridgeMessage) -> str | None:
    """A ``coin_flipped`` as one terminal line (``resolve --cards``), instead of its card."""
    if not isinstance(reply, CoinFlipped):
        return None
    return f"[coin {reply.event_id}] {reply.face} ({'won' if reply.won else 'lost'})"


REPORT = ReportPart(
    tallies=(Tally("won", N_("coin calls won"), _won, charts.PALETTE[2]),),
    tally_note=N_("coin calls won: flips that came up as called."),
    sections=(ReportSection("coins", _faces, _faces_section),),
)

RULESET = Ruleset(id=RULESET_ID, client=(CoinFlip,), bridge=(CoinFlipped,), handlers={CoinFlip: _flip},
                  refused=_refused, title=N_("Coin flips"), outcome_names={"won": N_("won"), "lost": N_("lost")},
                  report=REPORT, card_text=card_text, locale=__name__)


def flip(event_id: str, call: str = "heads") -> dict:
    """A ``coin_flip`` as the module would send it."""
    return {"type": "coin_flip", "v": 1, "event_id": event_id, "user_id": "user-ada", "actor_name": "Ada",
            "call": call}
