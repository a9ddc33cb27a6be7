"""The audit report: one self-contained HTML page a GM can read, from a world's trail.

``fate-bridge audit report --world W [--since ...] --out report.html`` writes it. The GM's audit
window gets the same page over its link (``audit_report`` -> ``audit_report_page``). Sections:

- The bridge's d100 rolls against a fair d100: a histogram in ten bands, and Pearson's
  chi-square goodness-of-fit test with its p-value (:mod:`bridge.chi_square`). The rolls come
  from every ruleset whose :class:`~bridge.ruleset.ReportPart` says its dice are d100s.
- Fate per actor and per session: the rulesets' :class:`~bridge.ruleset.Tally` columns. A session
  is a run of records with no gap longer than :data:`SESSION_GAP`; the page says so. Each
  session shows its GM overrides and physical dice.
- Outcomes per ruleset: every decision, a ruleset's under its title. This holds whether or not
  the ruleset adds anything else to the report.
- Each installed ruleset's own sections (:class:`~bridge.ruleset.ReportSection`), in the order
  the rulesets are installed.

This module names no ruleset: what a ruleset adds is its ``RULESET.report``. :func:`collect` is
pure: rows in, numbers out. :func:`render` draws the charts as inline SVG (bridge/charts.py: no
script, no outside file). It computes the tests in plain Python. So the report needs nothing beyond
the bridge's own install.
"""

from __future__ import annotations

import asyncio
import functools
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, UTC

import jinja2
import msgspec

from . import charts, i18n, registry
from .chi_square import MIN_EXPECTED, fit_test
from .i18n_templates import TranslatedEnvironment
from .i18n import N_, _
from .fairness import decide as dice
from .fairness.trail import OVERRIDE
from .ruleset import Recorded, ReportSection, Ruleset, Tally
from .store.base import AuditRow

SESSION_GAP = timedelta(hours=4)  # a table's break is minutes, the next session days away
D100_BANDS = 10  # 1-10, ..., 91-100: ten equally likely bands of a fair d100

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
    """A group of decisions (a ruleset id, ``dice``, ``bridge``) as the page names it.

    The name is in the current language: the ruleset's :attr:`~bridge.ruleset.Ruleset.title`. The id
    itself is used only for a ruleset without one."""
    titles = {dice.RULESET_ID: dice.TITLE, OTHER_DECISIONS: OTHER_TITLE,
              **{r.id: r.title for r in registry.installed() if r.title}}
    return _(titles[group]) if group in titles else group


def outcome_name(group: str, outcome: str) -> str:
    """An audit ``outcome`` value as the page shows it, in the current language.

    First the group's own word for it: its ruleset's ``outcome_names``, or the dice decisions'. Else
    an error code's (:data:`CODE_NAMES`). Else any ruleset's, for a decision recorded without its
    ruleset. The value itself is shown only when nobody names it."""
    own = {dice.RULESET_ID: dice.OUTCOME_NAMES}
    names = {r.id: r.outcome_names for r in registry.installed()}
    for table in (own.get(group, {}), names.get(group, {}), CODE_NAMES, *names.values(), dice.OUTCOME_NAMES):
        if outcome in table:
            return _(table[outcome])
    return outcome


Tallies = Counter[str]
"""The tallies of one actor or one session: ``"<ruleset>.<key>"`` (:class:`~bridge.ruleset.Tally`)
-> its count (0 when absent)."""


@dataclass
class Session:
    """A run of records with no gap longer than SESSION_GAP."""

    number: int
    start: str
    end: str
    records: int = 0
    fate: Tallies = field(default_factory=Counter)
    overrides: int = 0  # GM overrides applied (refused ones do not count)
    physical: int = 0  # dice the bridge took from the table (physical dice) instead of rolling


@dataclass
class ReportData:
    """What the page shows, as numbers (see :func:`collect`). ``sections``: each ruleset's own
    sections' numbers, by ``"<ruleset>.<section id>"`` (what its ``collect`` returned)."""

    records: int = 0
    first_ts: str | None = None
    last_ts: str | None = None
    d100: dict[str, list[int]] = field(default_factory=dict)  # ruleset -> rolls, in order
    fate_by_actor: dict[str, Tallies] = field(default_factory=dict)
    sessions: list[Session] = field(default_factory=list)
    outcomes: dict[str, Counter[str]] = field(default_factory=dict)  # ruleset -> outcome counts
    sections: dict[str, object] = field(default_factory=dict)


@dataclass(frozen=True)
class Column:
    """A Tally column of the Fate tables: its key in :data:`Tallies` and its ruleset's Tally."""

    key: str
    tally: Tally


def _columns(rulesets: tuple[Ruleset, ...]) -> list[Column]:
    """The Fate tables' columns: every installed ruleset's tallies, in order."""
    return [Column(f"{r.id}.{t.key}", t) for r in rulesets for t in r.report.tallies]


def _section_key(ruleset: Ruleset, section: ReportSection) -> str:
    """Where ``ReportData.sections`` keeps a ruleset's section's numbers."""
    return f"{ruleset.id}.{section.id}"


def _time(ts: str) -> datetime:
    return datetime.fromisoformat(ts.rstrip("Z"))


def collect(rows: list[AuditRow]) -> ReportData:
    """The report's numbers from a world's audit rows, in any order; read oldest first.

    Only what the bridge recorded counts: its own dice (``record.dice``), each record's outcome
    column, and the replies it sent. The rulesets' tallies and sections read those replies."""
    data = ReportData()
    rulesets = {r.id: r for r in registry.installed()}
    decided: dict[str, list[Recorded]] = {ruleset_id: [] for ruleset_id in rulesets}
    by_actor: dict[str, Tallies] = {}  # by actor id (a refusal's row may lack the name)
    names: dict[str, str] = {}
    session: Session | None = None
    last: datetime | None = None
    for row in sorted(rows, key=lambda r: r.seq):
        record = _record_decoder.decode(row.record)
        reply = record.get("reply")
        if not isinstance(reply, dict):
            reply = {}
        summary = row.summary
        group = summary.ruleset or OTHER_DECISIONS
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
        data.outcomes.setdefault(group, Counter())[summary.outcome] += 1
        if row.type == OVERRIDE and record.get("ok"):
            session.overrides += 1
        session.physical += sum(1 for d in record.get("draws") or () if isinstance(d, dict) and d.get("source") == "physical")
        actor = summary.actor_id or summary.actor_name
        if actor and summary.actor_name:
            names[actor] = summary.actor_name
        tallies = [session.fate] + ([by_actor.setdefault(actor, Counter())] if actor else [])
        ruleset = rulesets.get(group)
        if ruleset is None:  # the bridge's own decisions, the dice layer's, an uninstalled ruleset's
            continue
        decision = Recorded(row.seq, summary, reply)
        decided[group].append(decision)
        if ruleset.report.d100 is not None:
            rolled = [d for d in record.get("dice") or [] if isinstance(d, int) and 1 <= d <= 100]
            data.d100.setdefault(group, []).extend(rolled)
        for column in ruleset.report.tallies:
            counted = column.count(decision)
            for tally in tallies if counted else ():
                tally[f"{group}.{column.key}"] += counted
    shown = Counter(names.get(actor, actor) for actor in by_actor)
    for actor, tally in by_actor.items():
        name = names.get(actor, actor)
        data.fate_by_actor[name if shown[name] == 1 else f"{name} ({actor})"] = tally
    data.sections = {_section_key(r, s): s.collect(decided[r.id]) for r in rulesets.values() for s in r.report.sections}
    return data


def d100_bands(rolls: list[int]) -> list[int]:
    """How many rolls fell in each band 1-10, 11-20, ..., 91-100."""
    counts = [0] * D100_BANDS
    for roll in rolls:
        counts[(roll - 1) // (100 // D100_BANDS)] += 1
    return counts


# --- drawing ---------------------------------------------------------------------------------


def _d100_chart(data: ReportData) -> str | None:
    rolls = [r for rs in data.d100.values() for r in rs]
    if not rolls:
        return None
    labels = [f"{10 * i + 1}-{10 * i + 10}" for i in range(D100_BANDS)]
    panel = charts.column_panel(labels, d100_bands(rolls), color=charts.INK, reference=len(rolls) / D100_BANDS,
                                marker_color=charts.FAIR, value_name=_("rolls"), category_name=_("d100 roll"),
                                legend_entries=[(_("rolled"), charts.INK, "box"), (_("fair d100"), charts.FAIR, "dashed")])
    return charts.figure([panel], label=_("d100 rolls in ten bands against a fair d100"))


def _fate_actors(data: ReportData, columns: list[Column]) -> dict[str, Tallies]:
    """The actors the Fate tables show: those with a count in one of the ``columns``."""
    return {actor: tally for actor, tally in data.fate_by_actor.items() if any(tally[c.key] for c in columns)}


def _fate_chart(actors: dict[str, Tallies], columns: list[Column]) -> str | None:
    if not actors:
        return None
    series = [charts.Series(_(c.tally.name), [tally[c.key] for tally in actors.values()], c.tally.color)
              for c in columns if c.tally.color]
    return charts.figure([charts.bar_panel(list(actors), series, value_name=_("Fate decisions"))],
                         label=_("Fate decisions per actor"))


def _outcomes_chart(data: ReportData) -> str | None:
    if not data.outcomes:
        return None
    panels = []
    for ruleset in sorted(data.outcomes):
        items = data.outcomes[ruleset].most_common()
        panels.append(charts.bar_panel([outcome_name(ruleset, k) for k, _ in items],
                                       [charts.Series("", [v for _, v in items], charts.INK)], title=group_title(ruleset)))
    return charts.figure(panels, label=_("outcomes per ruleset"))


@functools.cache
def _environment(language: str) -> jinja2.Environment:
    """The page's template environment in ``language``, a normalized ``bridge.i18n`` language.

    Its words are translated when it compiles (``bridge.i18n_templates.TranslatedEnvironment``)."""
    return TranslatedEnvironment(
        language, loader=jinja2.PackageLoader("bridge", "templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)


def render(data: ReportData, *, world_id: str, since: str | None, generated: str) -> str:
    """The report page: HTML5, one file, inline SVG and CSS.

    It has no script, and a Content-Security-Policy forbids any. It is in the current language
    (``bridge.i18n.using``): its words, the charts' labels and every outcome's name. The trail's
    codes stay in it only as names do. It has the sections of the rulesets installed now
    (:func:`bridge.registry.installed`).

    ``since``: the time the rows were asked from, as the trail writes a record's
    (:func:`bridge.times.trail_time`), or None. ``generated`` is the UTC time shown as when it was
    made."""
    rulesets = registry.installed()
    d100_words = {r.id: r.report.d100 for r in rulesets if r.report.d100 is not None}
    columns = _columns(rulesets)
    fate_actors = _fate_actors(data, columns)
    rolls = [r for rs in data.d100.values() for r in rs]
    d100_test = fit_test(d100_bands(rolls), [len(rolls) / D100_BANDS] * D100_BANDS) if rolls else None
    drawn = {"d100": _d100_chart(data), "fate": _fate_chart(fate_actors, columns), "outcomes": _outcomes_chart(data)}
    language = i18n.current()
    template = _environment(language).get_template("report.html.j2")
    return template.render(
        language=language, world_id=world_id, since=since, generated=generated, data=data, charts=drawn,
        d100_counts=[d100_words[k](len(v)) for k, v in data.d100.items() if k in d100_words],
        d100_total=len(rolls), d100_test=d100_test, min_expected=MIN_EXPECTED,
        session_gap_hours=SESSION_GAP.total_seconds() / 3600, columns=columns, fate_actors=fate_actors,
        tally_notes=[r.report.tally_note for r in rulesets if r.report.tally_note],
        sections=[s.render(data.sections[_section_key(r, s)]) for r in rulesets for s in r.report.sections
                  if _section_key(r, s) in data.sections],
    )


def report_page(rows: list[AuditRow], *, world_id: str, since: str | None, generated: str) -> str:
    """The page for a world's audit rows: :func:`render` of :func:`collect`."""
    return render(collect(rows), world_id=world_id, since=since, generated=generated)


async def draw(rows: list[AuditRow], world_id: str, since: str | None) -> str:
    """:func:`report_page` on a worker thread, made now (UTC), in the current language.

    The thread runs in a copy of this context. This is the server's ``audit_report`` reporter
    (bridge.session.Reporter, called in the world's language). Other connections go on while it
    draws."""
    generated = datetime.now(UTC).strftime("%Y-%m-%d %H:%M")
    return await asyncio.to_thread(report_page, rows, world_id=world_id, since=since, generated=generated)
