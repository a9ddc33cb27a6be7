"""Chat cards: autoescaped templates, both labels, the Fate Test, the point, who asked; every
card template of every ruleset, in every language, byte for byte the HTML of translating at render
time though its messages are translated when it compiles."""

from __future__ import annotations

import jinja2
import pytest

from bridge import i18n, i18n_templates, wire
from bridge.replies import card_text
from bridge.rulesets.sohl.cards import SohlFateCardData, render_card as sohl_render_card, sohl_fate_card
from bridge.rulesets.sohl import wire as sohl_wire

from tests.test_i18n import DICE_LINES, DICE_TEMPLATES, EXAMPLES, TEMPLATES, cards_in, example_lines, memory_store, play

HOSTILE = "<img src=x onerror=alert(1)>"


def data(**overrides) -> SohlFateCardData:
    base = dict(message_id="m1", actor_id="a1", actor_name="Basic Folk", test_name="Archery Test", basic=False,
                level_before=1, level_after=3, fate_roll=45, fate_ml=77, fate_level=2, outcome="spent", gain=2,
                point_name="Lucky Star", charges_after=0, user_name="Player One")
    base.update(overrides)
    return SohlFateCardData(**base)


class TestEscaping:
    @pytest.mark.parametrize("field", ["actor_name", "test_name", "point_name", "user_name", "message_id"])
    def test_hostile_strings_show_as_text(self, field):
        card = sohl_fate_card(data(**{field: HOSTILE}))
        assert "<img" not in card.html
        assert "&lt;img src=x onerror=alert(1)&gt;" in card.html

    def test_quotes_cannot_break_out_of_attributes(self):
        card = sohl_fate_card(data(message_id='x" onclick="alert(1)'))
        assert 'onclick="alert' not in card.html
        assert 'data-fate-bridge-message-id="x&#34; onclick=&#34;alert(1)"' in card.html

    def test_title_and_speaker_are_plain_fields(self):
        card = sohl_fate_card(data(actor_name=HOSTILE))
        assert card.speaker_alias == HOSTILE  # plain data: the module sets it as text, never as HTML
        assert card.ruleset == "sohl"


class TestContent:
    def test_spent_critical_choice(self):
        text = card_text(wire.encode(resolved(sohl_fate_card(data()))))
        assert "Level: MS (Marginal Success) → CS+1 (Critical Success +1)" in text
        assert "Fate Test: 45 vs Fate ML 77: CS (Critical Success)" in text
        assert "Fate Point: Lucky Star: spent, +2 (0 charges left)" in text
        assert "Basic Folk, asked by Player One" in text

    def test_pending_choice_has_both_buttons(self):
        card = sohl_fate_card(data(outcome="choice", level_after=None, gain=None, charges_after=2))
        assert card.html.count("data-fate-bridge-choice=") == 2
        assert "Spend for +2" in card.html and "Keep for +1" in card.html

    def test_basic_test_reads_success_and_failure(self):
        card = sohl_fate_card(data(basic=True, level_before=0, level_after=1, gain=1, outcome="spent"))
        text = card_text(wire.encode(resolved(card)))
        assert "Level: Failure (Failure) → Success (Success)" in text

    def test_unlimited_point(self):
        card = sohl_fate_card(data(outcome="lost", level_after=1, gain=0, charges_after=None))
        assert "Lucky Star: lost, no gain (unlimited)" in card_text(wire.encode(resolved(card)))

    def test_one_charge_is_singular(self):
        assert "(1 charge left)" in sohl_fate_card(data(charges_after=1)).html


def resolved(card: wire.Card) -> sohl_wire.FateResolved:
    return sohl_wire.FateResolved(event_id="e", message_id="m1", fate_roll=45, fate_ml=77, fate_level=2,
                             fate_label="CS", outcome="spent", gain=2, level_before=1, label_before="MS",
                             level_after=3, label_after="CS+1",
                             point=sohl_wire.PointAfter(point_id="p", name="Lucky Star", charges_after=0),
                             card=card, effects=[])


class TestIssue13:
    def test_the_target_the_test_was_rolled_against(self):
        text = card_text(wire.encode(resolved(sohl_fate_card(data(target=135)))))
        assert "Target: 135" in text
        assert "Target:" not in card_text(wire.encode(resolved(sohl_fate_card(data()))))

    def test_a_critical_success_kept_reads_as_a_gain(self):
        card = sohl_fate_card(data(outcome="kept", level_before=0, level_after=1, gain=1, charges_after=2))
        text = card_text(wire.encode(resolved(card)))
        assert "Lucky Star: kept, gain +1 (2 charges left)" in text
        assert "no gain" not in text

    def test_a_marginal_failure_keeps_without_gain(self):
        card = sohl_fate_card(data(outcome="kept", level_before=0, level_after=0, gain=0, charges_after=2))
        assert "Lucky Star: kept, no gain (2 charges left)" in card_text(wire.encode(resolved(card)))


# Issue 17: card templates are compiled once per language with their constant messages already
# translated (bridge.i18n_templates.TranslatedEnvironment). The reference below is how cards were rendered
# before: one environment, jinja2.ext.i18n translating every message at render time.

def runtime_translated(env: jinja2.Environment) -> jinja2.Environment:
    """An environment like ``env`` (same loader, options and the package's functions) that
    translates at render time, into the current language: ``jinja2.ext.i18n`` with
    :func:`bridge.i18n_templates.install`."""
    reference = jinja2.Environment(loader=env.loader, autoescape=True, undefined=jinja2.StrictUndefined,
                                   trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.i18n"])
    i18n_templates.install(reference)
    reference.globals.update({k: v for k, v in env.globals.items() if k not in reference.globals})
    return reference


@pytest.fixture
def compared(monkeypatch) -> list[tuple[str, str, str, str]]:
    """Every card template rendered while the test runs: (language, template, its HTML, the same
    template and variables rendered translating at render time), computed at the render."""
    seen: list[tuple[str, str, str, str]] = []
    references: dict[int, jinja2.Environment] = {}
    original = jinja2.Template.render

    def render(self, *args, **kwargs):
        html = original(self, *args, **kwargs)
        env = self.environment
        if isinstance(env, i18n_templates.TranslatedEnvironment) and env.language == i18n.current():
            reference = references.setdefault(id(env), runtime_translated(env))
            seen.append((env.language, self.name, html, original(reference.get_template(self.name), *args, **kwargs)))
        elif isinstance(env, i18n_templates.TranslatedEnvironment):
            seen.append((env.language, self.name, html, f"rendered in {env.language} within {i18n.current()}"))
        return html

    monkeypatch.setattr(jinja2.Template, "render", render)
    return seen


@pytest.fixture
def loaded(monkeypatch) -> set[tuple[str, str]]:
    """(language, template name) of every card template loaded while the test runs, the ones
    imported or included by another too."""
    names: set[tuple[str, str]] = set()
    original = i18n_templates.TranslatedEnvironment.get_template

    def get_template(self, name, *args, **kwargs):
        names.add((self.language, name))
        return original(self, name, *args, **kwargs)

    monkeypatch.setattr(i18n_templates.TranslatedEnvironment, "get_template", get_template)
    return names


def hostile_names(lines: list[dict]) -> list[dict]:
    """``lines`` with every name, label, obstacle and question replaced by a distinct script tag
    (the same original gets the same tag, so the session plays the same way)."""
    tags: dict[str, str] = {}

    def swap(value, key=None):
        if isinstance(value, dict):
            return {k: swap(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [swap(v) for v in value]
        if key in ("name", "user_name", "actor_name", "label", "obstacle", "question") and isinstance(value, str):
            return tags.setdefault(value, f"<img src=x onerror=alert({len(tags)})>")
        return value

    return [swap(line) for line in lines]


async def played(lines: list[dict], language: str, **options) -> list[dict]:
    store = await memory_store()
    try:
        return [card for _, reply in await play(store, lines, language, **options) for card in cards_in(reply)]
    finally:
        await store.close()


class TestTranslatedWhenCompiled:
    """The HTML of every card is byte for byte what translating at render time gave."""

    async def test_every_template_of_every_ruleset_in_every_language(self, compared, loaded):
        assert {"de", "en"} <= set(i18n.languages())  # and any catalog added later
        for language in i18n.languages():
            for example in EXAMPLES:
                await played(example_lines(example), language)
            await played(DICE_LINES, language, new_seed=lambda n: bytes(range(n)))
        different = [(language, name) for language, name, html, expected in compared if html != expected]
        assert different == []
        assert len(compared) > 80  # 44 cards in each language
        templates = {t.name for t in TEMPLATES + DICE_TEMPLATES}
        for language in i18n.languages():
            assert templates <= {name for lang, name in loaded if lang == language}, language
        german = " ".join(html for language, _, html, _ in compared if language == "de")
        assert "Schicksalsprobe:" in german and "Gezogen:" in german and "Fate Test:" not in german

    @pytest.mark.parametrize("language", ["en", "de"])
    async def test_hostile_names_show_as_text(self, compared, language):
        cards = []
        for example in EXAMPLES:
            cards += await played(hostile_names(example_lines(example)), language)
        html = "".join(card["html"] for card in cards)
        assert "<img" not in html
        assert html.count("&lt;img src=x onerror=alert(") > 40
        for ruleset in ("sohl", "hmtw", "mythic", "pool"):
            assert any("&lt;img src=x" in card["html"] for card in cards if card["ruleset"] == ruleset), ruleset
        assert [(n, h) for _, n, h, expected in compared if h != expected] == []

    def test_a_language_switch_between_two_renders(self, compared):
        with i18n.using("de"):
            first = sohl_fate_card(data(actor_name=HOSTILE))
        with i18n.using("en"):
            second = sohl_fate_card(data(actor_name=HOSTILE))
        with i18n.using("de"):
            third = sohl_fate_card(data(actor_name=HOSTILE))
        assert first.html == third.html
        assert "Schicksalsprobe:" in first.html and "Fate Test:" not in first.html
        assert "Fate Test:" in second.html and "Schicksal" not in second.html
        assert [(lang, h == expected) for lang, _, h, expected in compared] == [("de", True), ("en", True), ("de", True)]

    def test_a_card_variable_cannot_hide_a_translation_callable(self):
        with pytest.raises(TypeError, match=r"\['_'\]"):
            sohl_render_card("sohl_fate.html.j2", title="t", ruleset="sohl", _=str)


def translated_environment(language: str, **templates: str) -> i18n_templates.TranslatedEnvironment:
    return i18n_templates.TranslatedEnvironment(language, loader=jinja2.DictLoader(templates), autoescape=True,
                                      undefined=jinja2.StrictUndefined)


def at_render_time(language: str, template: str, **variables) -> str:
    env = runtime_translated(translated_environment(language))
    with i18n.using(language):
        return env.from_string(template).render(**variables)


# Real msgids of the catalog (German differs), in every shape a template can translate them.
SHAPES = {
    "constant": '{{ _("Fate Point:") }}|{{ gettext("Keep for +1") }}',
    "placeholder": '{{ _(", asked by %(user)s", user=name) }}',
    "placeholders reordered": '{{ _("%(roll)s vs Fate ML %(ml)s", roll=name, ml=3) }}',
    "placeholder twice": '{{ _("<em>%(x)s</em> and %(x)s again", x=name) }}',
    "variable through a filter": '{{ _(", asked by %(user)s", user=name | upper) }}',
    "variable not used": '{{ _("Fate Point:", unused=nowhere) }}',
    "other conversion": '{{ _("kept, gain +%(gain)d", gain=n) }}|{{ _("kept, gain +%(gain)d", gain=2) }}',
    "constant variables folded": '{{ _("%(roll)s vs Fate ML %(ml)s", roll="<b>", ml=3) }}',
    "plural": '{% for n in (0, 1, 2) %}{{ ngettext("(%(num)s charge left)", "(%(num)s charges left)", n) }}{% endfor %}',
    "plural, num given": '{{ ngettext("%(num)s hit", "%(num)s hits", 2, num=name) }}',
    "in an expression": '{{ (_("Passed") if flag else _("Failed")) ~ "|" ~ (_("Total:") | upper) }}',
    "as an argument": '{% macro m(label) %}[{{ label }}]{% endmacro %}{{ m(_("Drawn:")) }}',
    "untranslated msgid": '{{ _("<em>Not</em> in the catalog & %%: %(x)s", x=name) }}',
    "untranslated plural": '{{ ngettext("<em>%(num)s</em> & one", "<em>%(num)s</em> & more", 2, num=name) }}',
    "without autoescape": '{% autoescape false %}{{ _(", asked by %(user)s", user=name) }}{% endautoescape %}',
    "autoescape decided at render time": '{% autoescape flag %}{{ _("<em>%(x)s</em> & %(y)s", x=name, y=n) }}|{{ _("Fate Point:") }}{% endautoescape %}',
    "trans block": '{% trans user=name %}, asked by {{ user }}{% endtrans %}',
    "trans plural": '{% trans count=2 %}{{ count }} hit{% pluralize %}{{ count }} hits{% endtrans %}',
    "message not a constant": '{{ _(label) }}|{{ ngettext(one, many, 2) }}',
}


class TestTranslatedEnvironment:
    @pytest.mark.parametrize("language", ["en", "de"])
    @pytest.mark.parametrize("shape", SHAPES)
    def test_the_same_text_as_at_render_time(self, shape, language):
        variables = dict(name=HOSTILE, flag=False, n=3, label="Fate Point:", one="(%(num)s charge left)",
                         many="(%(num)s charges left)")
        env = translated_environment(language, t=SHAPES[shape])
        with i18n.using("en" if language == "de" else "de"):  # the environment's language, whatever the current
            html = env.get_template("t").render(**variables)
        assert html == at_render_time(language, SHAPES[shape], **variables)
        assert ("<img" in html) == (shape in ("without autoescape", "autoescape decided at render time"))  # a variable escaped wherever autoescape is on

    def test_variables_are_evaluated_as_at_render_time(self):
        """Once each, in the order written, even when the translation puts them in another."""
        template = '{{ _("%(roll)s vs Fate ML %(ml)s", ml=note("ml"), roll=note("roll")) }}'
        calls = {}
        for way, env in (("compiled", translated_environment("de")),
                         ("at render time", runtime_translated(translated_environment("de")))):
            calls[way] = []
            env.globals["note"] = lambda word, seen=calls[way]: seen.append(word) or word
            with i18n.using("de"):
                assert env.from_string(template).render() == "roll gegen Schicksals-ML ml"
        assert calls == {"compiled": ["ml", "roll"], "at render time": ["ml", "roll"]}

    def test_a_message_not_a_constant_still_translates(self):
        env = translated_environment("de", t=SHAPES["message not a constant"])
        html = env.get_template("t").render(label="Fate Point:", one="(%(num)s charge left)",
                                           many="(%(num)s charges left)")
        assert html == "Schicksalspunkt:|(2 Ladungen übrig)"
        code = env.compile(SHAPES["message not a constant"] + '{{ _("Keep for +1") }}', raw=True)
        assert "Für +1 behalten" in code and "'Keep for +1'" not in code  # translated once, at compile time
        assert "context.call(" in code  # the variable messages still go through gettext at render time

    def test_the_german_words_are_in_the_compiled_template(self):
        code = translated_environment("de").compile(SHAPES["constant"] + SHAPES["placeholder"], raw=True)
        assert "Schicksalspunkt:|Für +1 behalten, angefragt von '" in code  # the variable printed after it
        assert "%(user)s" not in code and "gettext" not in code and "context.call" not in code
        code = translated_environment("de").compile(SHAPES["placeholder twice"] + SHAPES["other conversion"], raw=True)
        assert "Markup('<em>%(x)s</em> and %(x)s again') % {'x': " in code  # formatted, as at render time
        assert "'behalten, Gewinn +%(gain)d') % {'gain':" in code and "behalten, Gewinn +2" in code

    @pytest.mark.parametrize("template", [
        "{% set _ = 1 %}", "{% for gettext in x %}{% endfor %}", "{% macro ngettext() %}{% endmacro %}",
        "{% macro m(_) %}{% endmacro %}", '{% from "x" import y as _ %}', '{% import "x" as gettext %}',
    ])
    def test_a_template_cannot_rebind_a_translation_callable(self, template):
        with pytest.raises(jinja2.TemplateAssertionError, match="translation callable"):
            translated_environment("de").from_string(template)

    def test_the_same_errors_as_at_render_time(self):
        for template in ('{{ _("%(user)s wins") }}', '{{ _(", asked by %(user)s", user=missing) }}',
                         '{{ _("Fate Point:", unused=missing.name) }}'):
            env = translated_environment("de", t=template)
            with pytest.raises((KeyError, jinja2.UndefinedError)) as compiled:
                env.get_template("t").render()
            with pytest.raises(type(compiled.value)):
                at_render_time("de", template)
