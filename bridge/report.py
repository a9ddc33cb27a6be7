"""The audit report (issue 15): one self-contained HTML page a GM can read, from a world's trail.

``fate-bridge audit report --world W [--since ...] --out report.html`` writes it; the GM's audit
window gets the same page over its link (``audit_report`` -> ``audit_report_page``). Sections:

- the bridge's d100 rolls (SoHL Fate Tests, S9; the Mythic Fate Chart) against a fair d100: a
  histogram in ten bands and Pearson's chi-square goodness-of-fit test with its p-value;
- Fate per actor and per session: SoHL Fate Tests by outcome (S9: spent, kept, lost) and the
  pool ruleset's Fate spent on rerolls; a session is a run of records with no gap longer than
  :data:`SESSION_GAP` (the page says so), with each session's GM overrides and physical dice
  (issue 19);
- outcomes per ruleset;
- tarot cards drawn (hmtw, H1) against their expected frequency: the player deck by suit and the
  Fool, the GM deck card by card;
- the pool ledger (each character's Fate and Destiny) over the records.

:func:`collect` is pure (rows in, numbers out); :func:`render` draws the charts as inline SVG
(bridge/charts.py: no script, no outside file) and computes the tests in plain Python, so the
report needs nothing beyond the bridge's own install.
"""

from __future__ import annotations

import asyncio
import functools
import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import jinja2
import msgspec

from . import charts, i18n, registry
from .i18n_templates import TranslatedEnvironment
from .i18n import N_, _
from .fairness import decide as dice
from .fairness.trail import OVERRIDE
from .rulesets.hmtw.rules import FOOL_NAME, GM_DECK, MAJOR_ARCANA, PLAYER_DECK, SUIT_NAMES, SUITS, card as tarot_card
from .store.base import AuditRow

SESSION_GAP = timedelta(hours=4)  # a table's break is minutes, the next session days away
D100_RULESETS = ("sohl", "mythic")  # every die these roll is the bridge's d100 (S9; Fate Chart)
D100_BANDS = 10  # 1-10, ..., 91-100: ten equally likely bands of a fair d100
MIN_EXPECTED = 5  # the chi-square test's usual rule: every expected count at least 5
FATE_OUTCOMES = ("spent", "kept", "lost")  # a SoHL Fate Test's outcomes (S9)
TAROT_GROUPS = (*SUITS, "fool")
TAROT_GROUP_NAMES = {**SUIT_NAMES, "fool": FOOL_NAME}  # their words, in the catalog from hmtw's rules (babel.cfg)

_record_decoder = msgspec.json.Decoder(dict)
OTHER_DECISIONS = "bridge"  # the report's group of decisions no ruleset claims (collect)
OTHER_TITLE = N_("other decisions")


# What each error code reads as where people see refusals counted (the audit report's outcomes):
# English msgids, shown translated; the code itself stays in the wire's and the trail's fields.
CODE_NAMES = {
    "bad_message": N_("bad message"),
    "unknown_message": N_("unknown message"),
    "unauthorized": N_("not authorized"),
    "forbidden": N_("not allowed"),
    "not_eligible": N_("not eligible"),
    "already_fated": N_("already fated"),
    "no_charges": N_("no charges left"),
    "not_found": N_("not found"),
    "rate_limited": N_("too many requests"),
    "unavailable": N_("storage unavailable"),
    "internal": N_("bridge error"),
}


def group_title(group: str) -> str:
    """A group of decisions (a ruleset id, ``dice``, ``bridge``) as the page names it, in the
    current language: the ruleset's :attr:`~bridge.ruleset.Ruleset.title`; the id itself only for
    a ruleset without one."""
    titles = {dice.RULESET_ID: dice.TITLE, OTHER_DECISIONS: OTHER_TITLE,
              **{r.id: r.title for r in registry.installed() if r.title}}
    return _(titles[group]) if group in titles else group


def outcome_name(group: str, outcome: str) -> str:
    """An audit ``outcome`` value as the page shows it, in the current language: the group's own
    word for it (its ruleset's ``outcome_names``; the dice decisions'), else an error code's
    (:data:`CODE_NAMES`), else any ruleset's (a decision recorded without its
    ruleset); the value itself only when nobody names it."""
    own = {dice.RULESET_ID: dice.OUTCOME_NAMES}
    names = {r.id: r.outcome_names for r in registry.installed()}
    for table in (own.get(group, {}), names.get(group, {}), CODE_NAMES, *names.values(), dice.OUTCOME_NAMES):
        if outcome in table:
            return _(table[outcome])
    return outcome


@dataclass
class FateTally:
    """Fate decisions of one actor or one session."""

    fate_tests: int = 0
    spent: int = 0
    kept: int = 0
    lost: int = 0
    pool_fate_spent: int = 0


@dataclass
class Session:
    """A run of records with no gap longer than SESSION_GAP."""

    number: int
    start: str
    end: str
    records: int = 0
    fate: FateTally = field(default_factory=FateTally)
    overrides: int = 0  # GM overrides applied (issue 19; refused ones do not count)
    physical: int = 0  # dice the bridge took from the table (physical dice) instead of rolling


@dataclass
class ReportData:
    """What the page shows, as numbers (see :func:`collect`)."""

    records: int = 0
    first_ts: str | None = None
    last_ts: str | None = None
    d100: dict[str, list[int]] = field(default_factory=dict)  # ruleset -> rolls, in order
    fate_by_actor: dict[str, FateTally] = field(default_factory=dict)
    sessions: list[Session] = field(default_factory=list)
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)  # ruleset -> outcome counts
    player_cards: Counter[str] = field(default_factory=Counter)  # card code -> times drawn
    gm_cards: Counter[str] = field(default_factory=Counter)
    ledger: dict[str, list[tuple[int, int, int]]] = field(default_factory=dict)  # name -> (seq, fate, destiny)


def _time(ts: str) -> datetime:
    return datetime.fromisoformat(ts.rstrip("Z"))


def _drawn_cards(reply: object) -> list[str]:
    """Codes of the tarot cards an hmtw reply shows drawn (``first``, ``pushed``, ``drawn``, at
    any depth: a group test's members too)."""
    found: list[str] = []
    if isinstance(reply, dict):
        for key, value in reply.items():
            if key in ("first", "pushed", "drawn") and isinstance(value, dict) and isinstance(value.get("code"), str):
                found.append(value["code"])
            elif isinstance(value, (dict, list)):
                found.extend(_drawn_cards(value))
    elif isinstance(reply, list):
        for value in reply:
            found.extend(_drawn_cards(value))
    return found


def _pool_characters(reply: dict) -> list[dict]:
    """The pool ledger entries a reply carries (``characters``, or one ``character``)."""
    if isinstance(reply.get("characters"), list):
        return [c for c in reply["characters"] if isinstance(c, dict)]
    return [reply["character"]] if isinstance(reply.get("character"), dict) else []


def collect(rows: list[AuditRow]) -> ReportData:
    """The report's numbers from a world's audit rows (any order; read oldest first).

    Only what the bridge recorded counts: its own dice (``record.dice``), each record's outcome
    column, and the replies it sent (cards drawn, the pool ledger, Fate spent)."""
    data = ReportData()
    by_actor: dict[str, FateTally] = {}  # by actor id (a refusal's row may lack the name)
    names: dict[str, str] = {}
    session: Session | None = None
    last: datetime | None = None
    for row in sorted(rows, key=lambda r: r.seq):
        record = _record_decoder.decode(row.record)
        reply = record.get("reply") if isinstance(record.get("reply"), dict) else {}
        summary = row.summary
        ruleset = summary.ruleset or OTHER_DECISIONS
        when = _time(row.ts)
        data.records += 1
        data.first_ts = data.first_ts or row.ts
        data.last_ts = row.ts
        if session is None or last is None or when - last > SESSION_GAP:
            session = Session(number=len(data.sessions) + 1, start=row.ts, end=row.ts)
            data.sessions.append(session)
        last = when
        session.end = row.ts
        session.records += 1
        data.outcomes.setdefault(ruleset, Counter())[summary.outcome] += 1
        if row.type == OVERRIDE and record.get("ok"):
            session.overrides += 1
        session.physical += sum(1 for d in record.get("draws") or () if isinstance(d, dict) and d.get("source") == "physical")

        if ruleset in D100_RULESETS:
            dice = [d for d in record.get("dice") or [] if isinstance(d, int) and 1 <= d <= 100]
            data.d100.setdefault(ruleset, []).extend(dice)
        actor = summary.actor_id or summary.actor_name
        if actor and summary.actor_name:
            names[actor] = summary.actor_name
        tallies = [session.fate] + ([by_actor.setdefault(actor, FateTally())] if actor else [])
        if ruleset == "sohl" and summary.outcome in FATE_OUTCOMES:
            for tally in tallies:
                tally.fate_tests += 1
                setattr(tally, summary.outcome, getattr(tally, summary.outcome) + 1)
        if ruleset == "pool" and isinstance(reply.get("fate_spent"), dict):
            spent = sum(v for v in reply["fate_spent"].values() if isinstance(v, int))
            for tally in tallies:
                tally.pool_fate_spent += spent
        if ruleset == "hmtw":
            for code in _drawn_cards(reply):
                (data.gm_cards if code in GM_DECK else data.player_cards)[code] += 1
        if ruleset == "pool":
            for entry in _pool_characters(reply):
                name = str(entry.get("name") or entry.get("character_id"))
                fate, destiny = entry.get("fate"), entry.get("destiny")
                if isinstance(fate, int) and isinstance(destiny, int):
                    data.ledger.setdefault(name, []).append((row.seq, fate, destiny))
    shown = Counter(names.get(actor, actor) for actor in by_actor)
    for actor, tally in by_actor.items():
        name = names.get(actor, actor)
        data.fate_by_actor[name if shown[name] == 1 else f"{name} ({actor})"] = tally
    return data


@dataclass(frozen=True)
class FitTest:
    """Pearson's chi-square goodness-of-fit test of observed counts against expected ones."""

    statistic: float
    p_value: float
    degrees: int
    valid: bool  # every expected count is at least MIN_EXPECTED


def chi_square_sf(statistic: float, degrees: int) -> float:
    """P(X >= ``statistic``) for X chi-square distributed with ``degrees`` degrees of freedom: the
    regularized upper incomplete gamma function Q(degrees/2, statistic/2), by its power series below
    a + 1 and its continued fraction (modified Lentz) above (Numerical Recipes, 3rd ed., 6.2), to
    about 1e-14 relative. Raises ``ValueError`` for ``degrees`` < 1 or a negative ``statistic``."""
    if degrees < 1 or statistic < 0:
        raise ValueError(f"chi-square needs degrees >= 1 and statistic >= 0, got {degrees}, {statistic}")
    a, x = degrees / 2, statistic / 2
    if x == 0:
        return 1.0
    front = math.exp(-x + a * math.log(x) - math.lgamma(a))
    if x < a + 1:  # P(a, x) by the series sum x^n / (a (a+1) ... (a+n))
        term = total = 1 / a
        n = a
        while abs(term) > abs(total) * 1e-16:
            n += 1
            term *= x / n
            total += term
        return max(0.0, 1 - front * total)
    tiny = 1e-300
    b = x + 1 - a
    c, d = 1 / tiny, 1 / b
    h = d
    for i in range(1, 10_000):
        an = -i * (i - a)
        b += 2
        d = an * d + b
        d = d if abs(d) > tiny else tiny
        c = b + an / c
        c = c if abs(c) > tiny else tiny
        d = 1 / d
        h *= d * c
        if abs(d * c - 1) < 1e-16:
            break
    return front * h


def fit_test(observed: list[int], expected: list[float]) -> FitTest | None:
    """Pearson's chi-square test of ``observed`` against ``expected`` counts (same length, same
    total), with len - 1 degrees of freedom; None when nothing was observed."""
    if sum(observed) == 0 or len(observed) < 2:
        return None
    statistic = sum((o - e) ** 2 / e for o, e in zip(observed, expected))
    degrees = len(observed) - 1
    return FitTest(statistic, chi_square_sf(statistic, degrees), degrees, min(expected) >= MIN_EXPECTED)


def d100_bands(rolls: list[int]) -> list[int]:
    """How many rolls fell in each band 1-10, 11-20, ..., 91-100."""
    counts = [0] * D100_BANDS
    for roll in rolls:
        counts[(roll - 1) // (100 // D100_BANDS)] += 1
    return counts


def tarot_groups(cards: Counter[str]) -> tuple[list[int], list[float]]:
    """Player-deck draws by suit and the Fool, and what a fair shuffle makes each (its share of
    the 57 cards, H1)."""
    size = {group: 0 for group in TAROT_GROUPS}
    for code in PLAYER_DECK:
        suit = tarot_card(code).suit
        size[suit if suit in SUITS else "fool"] += 1
    observed = {group: 0 for group in TAROT_GROUPS}
    for code, count in cards.items():
        suit = tarot_card(code).suit
        observed[suit if suit in SUITS else "fool"] += count
    total = sum(observed.values())
    return ([observed[g] for g in TAROT_GROUPS], [total * size[g] / len(PLAYER_DECK) for g in TAROT_GROUPS])


# --- drawing ---------------------------------------------------------------------------------

INK, FAIR, ACCENT, MUTED = "#2b4c7e", "#c0392b", "#e0a030", "#7f8c8d"


def _d100_chart(data: ReportData) -> str | None:
    rolls = [r for rs in data.d100.values() for r in rs]
    if not rolls:
        return None
    labels = [f"{10 * i + 1}-{10 * i + 10}" for i in range(D100_BANDS)]
    panel = charts.column_panel(labels, d100_bands(rolls), color=INK, reference=len(rolls) / D100_BANDS,
                                marker_color=FAIR, value_name=_("rolls"), category_name=_("d100 roll"),
                                legend_entries=[(_("rolled"), INK, "box"), (_("fair d100"), FAIR, "dashed")])
    return charts.figure([panel], label=_("d100 rolls in ten bands against a fair d100"))


def _fate_chart(data: ReportData) -> str | None:
    actors = [a for a, t in data.fate_by_actor.items() if t.fate_tests or t.pool_fate_spent]
    if not actors:
        return None
    series = [charts.Series(label, [getattr(data.fate_by_actor[a], name) for a in actors], color)
              for name, label, color in (("spent", _("spent"), INK), ("kept", _("kept"), ACCENT),
                                         ("lost", _("lost"), FAIR), ("pool_fate_spent", _("pool Fate spent"), MUTED))]
    return charts.figure([charts.bar_panel(actors, series, value_name=_("Fate decisions"))],
                         label=_("Fate decisions per actor"))


def _outcomes_chart(data: ReportData) -> str | None:
    if not data.outcomes:
        return None
    panels = []
    for ruleset in sorted(data.outcomes):
        items = data.outcomes[ruleset].most_common()
        panels.append(charts.bar_panel([outcome_name(ruleset, k) for k, _ in items],
                                       [charts.Series("", [v for _, v in items], INK)], title=group_title(ruleset)))
    return charts.figure(panels, label=_("outcomes per ruleset"))


def _tarot_chart(data: ReportData) -> str | None:
    if not data.player_cards and not data.gm_cards:
        return None
    observed, expected = tarot_groups(data.player_cards)
    player = charts.column_panel([_(TAROT_GROUP_NAMES[group]) for group in TAROT_GROUPS], observed, color=INK,
                                 markers=expected, marker_color=FAIR, width=380, height=300,
                                 title=_("player deck ({count} cards)").format(count=len(PLAYER_DECK)),
                                 legend_entries=[(_("drawn"), INK, "box"), (_("expected"), FAIR, "line")])
    gm_total = sum(data.gm_cards.values())
    gm = charts.column_panel([tarot_card(code).name.split(" ")[0] for code in GM_DECK],
                             [data.gm_cards[code] for code in GM_DECK], color=INK, reference=gm_total / len(GM_DECK),
                             marker_color=FAIR, width=480, height=300, rotate_labels=True,
                             title=_("GM deck ({count} major arcana)").format(count=len(GM_DECK)))
    return charts.figure([player, gm], label=_("tarot cards drawn against their expected counts"), across=True)


def _ledger_chart(data: ReportData) -> str | None:
    if not data.ledger:
        return None
    series = []
    for index, (name, points) in enumerate(sorted(data.ledger.items())):
        color = charts.PALETTE[index % len(charts.PALETTE)]
        seqs = [p[0] for p in points]
        series.append(charts.Series(_("{name}: Fate").format(name=name), [p[1] for p in points], color, xs=seqs))
        series.append(charts.Series(_("{name}: Destiny").format(name=name), [p[2] for p in points], color,
                                    dashed=True, xs=seqs))
    return charts.figure([charts.step_panel(series, width=760, x_name=_("audit record number (time order)"),
                                            value_name=_("points"))], label=_("pool ledger over time"))


@functools.cache
def _environment(language: str) -> jinja2.Environment:
    """The page's template environment in ``language`` (a normalized ``bridge.i18n`` language):
    its words translated when it compiles (``bridge.i18n_templates.TranslatedEnvironment``)."""
    return TranslatedEnvironment(
        language, loader=jinja2.PackageLoader("bridge", "templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)


def render(data: ReportData, *, world_id: str, since: str | None, generated: str) -> str:
    """The report page (HTML5, one file: inline SVG and CSS, no script; a Content-Security-Policy
    forbids any), in the current language (``bridge.i18n.using``: its words, the charts' labels and
    every outcome's name; the trail's codes stay in it only as names do). ``since``: the time the
    rows were asked from, as the trail writes a record's (:func:`bridge.times.trail_time`), or
    None; ``generated`` is the UTC time shown as when it was made."""
    rolls = [r for rs in data.d100.values() for r in rs]
    d100_test = fit_test(d100_bands(rolls), [len(rolls) / D100_BANDS] * D100_BANDS) if rolls else None
    tarot_observed, tarot_expected = tarot_groups(data.player_cards)
    tarot_test = fit_test(tarot_observed, tarot_expected) if sum(tarot_observed) else None
    gm_total = sum(data.gm_cards.values())
    drawn = {"d100": _d100_chart(data), "fate": _fate_chart(data), "outcomes": _outcomes_chart(data),
             "tarot": _tarot_chart(data), "ledger": _ledger_chart(data)}
    language = i18n.current()
    template = _environment(language).get_template("report.html.j2")
    return template.render(
        language=language, world_id=world_id, since=since, generated=generated, data=data, charts=drawn,
        d100_counts={k: len(v) for k, v in data.d100.items()}, d100_total=len(rolls), d100_test=d100_test,
        tarot_groups=list(zip(TAROT_GROUPS, tarot_observed, tarot_expected)), tarot_test=tarot_test,
        gm_cards=[(_gm_card_name(code), data.gm_cards[code]) for code in GM_DECK if data.gm_cards[code]],
        gm_total=gm_total, gm_expected=gm_total / len(GM_DECK), session_gap_hours=SESSION_GAP.total_seconds() / 3600,
        min_expected=MIN_EXPECTED, fate_outcomes=FATE_OUTCOMES, tarot_group_names=TAROT_GROUP_NAMES,
    )


def _gm_card_name(code: str) -> str:
    """A GM deck card (a major arcanum, H1) as its numeral and its name in the current language
    ("XIII Death", "XIII Der Tod")."""
    numeral, title = MAJOR_ARCANA[tarot_card(code).value]
    return f"{numeral} {i18n.gettext(title)}"


def report_page(rows: list[AuditRow], *, world_id: str, since: str | None, generated: str) -> str:
    """The page for a world's audit rows: :func:`render` of :func:`collect`."""
    return render(collect(rows), world_id=world_id, since=since, generated=generated)


async def draw(rows: list[AuditRow], world_id: str, since: str | None) -> str:
    """:func:`report_page` on a worker thread, made now (UTC), in the current language (the
    thread runs in a copy of this context): the server's ``audit_report`` reporter
    (bridge.session.Reporter, called in the world's language), so other connections go on while
    it draws."""
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    return await asyncio.to_thread(report_page, rows, world_id=world_id, since=since, generated=generated)
