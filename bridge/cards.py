"""Chat cards the bridge renders: Jinja2 templates with autoescaping, never string concatenation.

Each ruleset renders its own cards from its ``templates/`` through :class:`CardTemplates`. The
template engine escapes every string that came from outside: actor, test, point and user names, ids.
A name like ``<img src=x onerror=alert(1)>`` shows as text.
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator, Mapping, MutableMapping
from typing import Any

import jinja2
import jinja2.compiler
from markupsafe import escape

try:
    from markupsafe import _escape_inner  # MarkupSafe 3: its escaping, without the Markup around
except ImportError:  # pragma: no cover - MarkupSafe 2 escapes in one C call that makes the Markup
    def _escape_inner(s: str, /) -> str:
        return str(escape(s))

from . import i18n, wire
from .i18n_templates import GETTEXT_NAMES, TranslatedEnvironment

_RENDERING = contextvars.ContextVar("fate_bridge_rendering", default=True)


@contextlib.contextmanager
def unrendered() -> Iterator[None]:
    """Within it, cards are made with empty ``html``.

    ``audit verify`` re-derives decisions. Their card text is presentation it ignores
    (:func:`bridge.audit.verdict`), and rendering would be most of its cost."""
    token = _RENDERING.set(False)
    try:
        yield
    finally:
        _RENDERING.reset(token)


def escaped_text(value: object) -> str:
    """``markupsafe.escape(value)`` as plain text: the same characters, without the ``Markup``.

    ``markupsafe`` makes one around each printed value: a third of a card's render. Only for what a
    template prints (:class:`_CardCodeGenerator`), which is joined into the card's text at once."""
    if type(value) is str:
        return _escape_inner(value)
    if hasattr(value, "__html__"):
        return value.__html__()
    return _escape_inner(str(value))


def _hiding(context: Mapping[str, object]) -> TypeError:
    """The error of template variables named as a translation callable (``_``, ``gettext``...)."""
    return TypeError(f"template variables {sorted(GETTEXT_NAMES & context.keys())} would hide "
                     "the translation callables of the same names")


class _CardCodeGenerator(jinja2.compiler.CodeGenerator):
    """Jinja2's code generator, printing each ``{{ value }}`` through :func:`escaped_text`.

    That replaces ``markupsafe.escape``. A printed value is only ever joined into the output:
    ``Environment.concat``, or a block's buffer made ``Markup`` as a whole. So the text is the same,
    byte for byte."""

    def visit_Template(self, node: jinja2.nodes.Template, frame: jinja2.compiler.Frame | None = None) -> None:
        super().visit_Template(node, frame)
        self.writeline(f"from {__name__} import escaped_text as escape")


class _CardEnvironment(TranslatedEnvironment):
    """The environment of one package's cards in one language.

    A template's globals are a plain dict, copied from the environment's when the template loads.
    Jinja2's own ``ChainMap`` costs a few µs per render, copied into each render's context.
    :class:`CardTemplates` sets them all before the first load and never changes them. Its templates
    print through :func:`escaped_text` (:class:`_CardCodeGenerator`)."""

    code_generator_class = _CardCodeGenerator

    def make_globals(self, d: MutableMapping[str, Any] | None) -> MutableMapping[str, Any]:
        """``self.globals`` overlaid with ``d``, as a new dict."""
        return {**self.globals, **(d or {})}


class CardTemplates:
    """One ruleset's card templates: ``<package>/templates/*.j2``.

    They are autoescaped and strict: a missing variable raises. Their text is translated into the
    current language (``bridge.i18n``). Each ruleset's ``cards.py`` makes one: ``render_card =
    CardTemplates(__package__).render``. ``functions`` are callables its templates may use (hmtw's
    ``card_name``). They are kept for the package: a later ``CardTemplates(package)`` (a restyled
    copy) has them too.

    Each language gets its own Jinja2 environment, made the first time a card is rendered in it
    (:class:`bridge.i18n_templates.TranslatedEnvironment`). Its templates are compiled with their
    constant messages already translated. So a render calls no gettext for them. The HTML is the
    same as translating at render time, byte for byte."""

    _functions: dict[str, Mapping[str, Callable[..., str]]] = {}

    def __init__(self, package: str, functions: Mapping[str, Callable[..., str]] | None = None) -> None:
        self._package = package
        if functions is not None:
            CardTemplates._functions[package] = functions
        self._globals = dict(CardTemplates._functions.get(package, {}))
        self._environments: dict[str, jinja2.Environment] = {}

    def _environment(self, language: str) -> jinja2.Environment:
        """The Jinja2 environment rendering this package's cards in ``language``, made on first use
        and kept.

        ``language`` is a normalized language of :func:`bridge.i18n.languages`."""
        env = self._environments.get(language)
        if env is None:
            env = _CardEnvironment(
                language,
                loader=jinja2.PackageLoader(self._package, "templates"),
                autoescape=True,  # every template is HTML: escape all of them, whatever the file name
                undefined=jinja2.StrictUndefined,
                trim_blocks=True,
                lstrip_blocks=True,
                auto_reload=False,  # templates ship with the package: no stat() per card
            )
            env.globals.update(self._globals)
            env = self._environments.setdefault(language, env)
        return env

    def render(
        self,
        template: str,
        *,
        title: str,
        ruleset: str,
        speaker_actor_id: str | None = None,
        speaker_alias: str | None = None,
        **context: object,
    ) -> wire.Card:
        """Render ``templates/<template>`` with ``title`` and ``context`` into a chat card.

        It renders in the current language (``bridge.i18n.using``); the caller translates ``title``.
        ``html`` is empty within :func:`unrendered`. ``TypeError`` if ``context`` names a
        translation callable: ``_``, ``gettext``, ``ngettext``
        (:data:`bridge.i18n_templates.GETTEXT_NAMES`)."""
        return self.render_variables(template, context, title=title, ruleset=ruleset,
                                     speaker_actor_id=speaker_actor_id, speaker_alias=speaker_alias)

    def render_variables(
        self,
        template: str,
        context: dict[str, object],
        *,
        title: str,
        ruleset: str,
        speaker_actor_id: str | None = None,
        speaker_alias: str | None = None,
    ) -> wire.Card:
        """:meth:`render` with the template's variables in one dict, which becomes the render's.

        ``title`` is added to it. A card of twenty variables passed as keywords costs ~2 µs in
        matching them to the signature alone."""
        if not _RENDERING.get():
            html = ""
        elif context.keys().isdisjoint(GETTEXT_NAMES):  # three lookups, not one per variable
            context["title"] = title  # one dict for Jinja2 to copy, not keywords to gather first
            html = self._environment(i18n.current()).get_template(template).render(context)
        else:
            raise _hiding(context)
        return wire.Card(title=title, html=html, ruleset=ruleset, speaker_actor_id=speaker_actor_id,
                         speaker_alias=speaker_alias)

    def html(self, template: str, **context: object) -> str:
        """``templates/<template>`` rendered with ``context`` in the current language, as HTML that
        is no chat card.

        An example is a ruleset's section of the audit report
        (:class:`bridge.ruleset.ReportSection`). It is rendered inside :func:`unrendered` too.
        ``TypeError`` as :meth:`render`."""
        if not context.keys().isdisjoint(GETTEXT_NAMES):
            raise _hiding(context)
        return self._environment(i18n.current()).get_template(template).render(context)
