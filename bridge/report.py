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

:func:`collect` is pure (rows in, numbers out); :func:`render` draws the charts with matplotlib
(inline SVG, no script, no outside file) and tests with scipy: both come with the ``report`` extra.
"""

from __future__ import annotations

import asyncio
import functools
import io
import re
import threading
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from importlib import resources

import jinja2
import msgspec

from . import i18n
from .errors import ConfigError
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
REPORT_EXTRA = "pip install 'fate-bridge[report]'"

_record_decoder = msgspec.json.Decoder(dict)


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
        ruleset = summary.ruleset or "bridge"
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


def fit_test(observed: list[int], expected: list[float]) -> FitTest | None:
    """The chi-square test (scipy.stats.chisquare); None when nothing was observed."""
    from scipy.stats import chisquare

    if sum(observed) == 0 or len(observed) < 2:
        return None
    result = chisquare(observed, expected)
    return FitTest(float(result.statistic), float(result.pvalue), len(observed) - 1,
                   min(expected) >= MIN_EXPECTED)


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

_draw_lock = threading.Lock()  # matplotlib's state is not thread-safe: one page at a time
_SVG_PROLOG = re.compile(r"^.*?(?=<svg)", re.S)
INK, FAIR, ACCENT, MUTED = "#2b4c7e", "#c0392b", "#e0a030", "#7f8c8d"


def _svg(figure) -> str:
    """A matplotlib figure as inline SVG (no XML prolog, no metadata date)."""
    out = io.StringIO()
    figure.savefig(out, format="svg", bbox_inches="tight", metadata={"Date": None})
    return _SVG_PROLOG.sub("", out.getvalue(), count=1)


def _figure(width: float, height: float):
    from matplotlib.figure import Figure

    return Figure(figsize=(width, height), dpi=100)


def _counts(axis) -> None:
    """Whole-number ticks on an axis of counts."""
    from matplotlib.ticker import MaxNLocator

    axis.set_major_locator(MaxNLocator(integer=True))


def _d100_chart(data: ReportData) -> str | None:
    rolls = [r for rs in data.d100.values() for r in rs]
    if not rolls:
        return None
    figure = _figure(7, 3.2)
    ax = figure.subplots()
    counts = d100_bands(rolls)
    labels = [f"{10 * i + 1}-{10 * i + 10}" for i in range(D100_BANDS)]
    ax.bar(labels, counts, color=INK, label="rolled")
    ax.axhline(len(rolls) / D100_BANDS, color=FAIR, linestyle="--", label="fair d100")
    ax.set_xlabel("d100 roll")
    ax.set_ylabel("rolls")
    ax.legend(frameon=False)
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(figure)


def _fate_chart(data: ReportData) -> str | None:
    actors = [a for a, t in data.fate_by_actor.items() if t.fate_tests or t.pool_fate_spent]
    if not actors:
        return None
    figure = _figure(7, 0.5 + 0.45 * len(actors))
    ax = figure.subplots()
    left = [0] * len(actors)
    for name, color in (("spent", INK), ("kept", ACCENT), ("lost", FAIR), ("pool_fate_spent", MUTED)):
        values = [getattr(data.fate_by_actor[a], name) for a in actors]
        ax.barh(actors, values, left=left, color=color, label=name.replace("_", " "))
        left = [x + v for x, v in zip(left, values)]
    ax.invert_yaxis()
    ax.set_xlabel("Fate decisions")
    ax.legend(frameon=False, ncols=4, loc="lower center", bbox_to_anchor=(0.5, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(figure)


def _outcomes_chart(data: ReportData) -> str | None:
    if not data.outcomes:
        return None
    rulesets = sorted(data.outcomes)
    figure = _figure(7, 0.3 + sum(0.32 * len(data.outcomes[r]) + 0.5 for r in rulesets))
    axes = figure.subplots(len(rulesets), 1, squeeze=False,
                           gridspec_kw={"height_ratios": [len(data.outcomes[r]) for r in rulesets]})
    for ax, ruleset in zip(axes[:, 0], rulesets):
        items = data.outcomes[ruleset].most_common()
        ax.barh([k for k, _ in items], [v for _, v in items], color=INK)
        _counts(ax.xaxis)
        ax.invert_yaxis()
        ax.set_title(ruleset, loc="left", fontsize=10, fontweight="bold")
        ax.spines[["top", "right"]].set_visible(False)
    figure.tight_layout()
    return _svg(figure)


def _tarot_chart(data: ReportData) -> str | None:
    if not data.player_cards and not data.gm_cards:
        return None
    figure = _figure(9, 3.2)
    ax_player, ax_gm = figure.subplots(1, 2, gridspec_kw={"width_ratios": [4, 5]})
    observed, expected = tarot_groups(data.player_cards)
    ax_player.bar(TAROT_GROUPS, observed, color=INK, label="drawn")
    ax_player.scatter(TAROT_GROUPS, expected, color=FAIR, marker="_", s=600, linewidths=2, label="expected", zorder=3)
    ax_player.set_title("player deck (57 cards)", fontsize=10)
    ax_player.legend(frameon=False)
    gm_total = sum(data.gm_cards.values())
    numerals = [tarot_card(code).name.split(" ")[0] for code in GM_DECK]
    ax_gm.bar(numerals, [data.gm_cards[code] for code in GM_DECK], color=INK)
    ax_gm.axhline(gm_total / len(GM_DECK), color=FAIR, linestyle="--")
    ax_gm.tick_params(axis="x", labelrotation=90, labelsize=7)
    ax_gm.set_title(f"GM deck ({len(GM_DECK)} major arcana)", fontsize=10)
    for ax in (ax_player, ax_gm):
        ax.spines[["top", "right"]].set_visible(False)
        _counts(ax.yaxis)
    figure.tight_layout()
    return _svg(figure)


def _ledger_chart(data: ReportData) -> str | None:
    if not data.ledger:
        return None
    figure = _figure(7, 3.2)
    ax = figure.subplots()
    for index, (name, points) in enumerate(sorted(data.ledger.items())):
        seqs = [p[0] for p in points]
        color = f"C{index % 10}"
        ax.step(seqs, [p[1] for p in points], where="post", color=color, label=f"{name}: Fate")
        ax.step(seqs, [p[2] for p in points], where="post", color=color, linestyle=":", label=f"{name}: Destiny")
    ax.set_xlabel("audit record number (time order)")
    ax.set_ylabel("points")
    _counts(ax.yaxis)
    ax.legend(frameon=False, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.spines[["top", "right"]].set_visible(False)
    return _svg(figure)


@functools.cache
def _environment(language: str) -> jinja2.Environment:
    """The page's template environment in ``language`` (a normalized ``bridge.i18n`` language):
    its words translated when it compiles (``bridge.i18n.TranslatedEnvironment``)."""
    return i18n.TranslatedEnvironment(
        language, loader=jinja2.PackageLoader("bridge", "templates"),
        autoescape=True, trim_blocks=True, lstrip_blocks=True, undefined=jinja2.StrictUndefined)


def render(data: ReportData, *, world_id: str, since: str | None, generated: str) -> str:
    """The report page (HTML5, one file: inline SVG and CSS, no script; a Content-Security-Policy
    forbids any), in the current language (``bridge.i18n.using``; the charts' own labels stay
    English). ``generated`` is the UTC time shown as when it was made. Raises ``ConfigError``
    when matplotlib or scipy (the ``report`` extra) is missing."""
    try:
        import matplotlib  # noqa: F401
        import scipy  # noqa: F401
    except ImportError:
        raise ConfigError(f"the report needs matplotlib and scipy: {REPORT_EXTRA}") from None
    from matplotlib import rc_context

    rolls = [r for rs in data.d100.values() for r in rs]
    d100_test = fit_test(d100_bands(rolls), [len(rolls) / D100_BANDS] * D100_BANDS) if rolls else None
    tarot_observed, tarot_expected = tarot_groups(data.player_cards)
    tarot_test = fit_test(tarot_observed, tarot_expected) if sum(tarot_observed) else None
    gm_total = sum(data.gm_cards.values())
    style = {"svg.fonttype": "none", "svg.hashsalt": "fate-bridge", "font.family": "sans-serif",
             "font.size": 10, "axes.edgecolor": "#555555"}
    with _draw_lock, rc_context(style):
        charts = {"d100": _d100_chart(data), "fate": _fate_chart(data), "outcomes": _outcomes_chart(data),
                  "tarot": _tarot_chart(data), "ledger": _ledger_chart(data)}
    language = i18n.current()
    template = _environment(language).get_template("report.html.j2")
    return template.render(
        language=language, world_id=world_id, since=since, generated=generated, data=data, charts=charts,
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
    """The page for a world's audit rows: :func:`render` of :func:`collect`. Raises ``ConfigError``
    without the ``report`` extra."""
    return render(collect(rows), world_id=world_id, since=since, generated=generated)


async def draw(rows: list[AuditRow], world_id: str, since: str | None) -> str:
    """:func:`report_page` on a worker thread, made now (UTC), in the current language (the
    thread runs in a copy of this context): the server's ``audit_report`` reporter
    (bridge.session.Reporter, called in the world's language), so other connections go on while
    it draws."""
    generated = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M")
    return await asyncio.to_thread(report_page, rows, world_id=world_id, since=since, generated=generated)
