"""The bridge's languages: gettext message catalogs read through Babel, one language per world.

Every string a user reads (chat cards, notices, refusal messages, the overlay page) is written in
English in the code and templates, marked for translation, and looked up in
``bridge/locale/<lang>/LC_MESSAGES/messages.po`` (docs/translating.md says how to add a language,
and why the built-in rulesets' words are in that one catalog); a ruleset kept outside the bridge
brings its own words in its folder (:func:`add_catalogs`).
The ``.po`` files are read by Babel the first time a language is used (package data, like the
card templates Jinja2 reads), so the package ships only the text a translator edits and no
compiled file can go stale.

The language of a world is the one its forwarder named in ``hello.client.language`` (Foundry's
``game.i18n.lang``); the session renders that world's decisions inside :func:`using`. Unknown
languages (and none) fall back to English (:func:`normalize`). Card text is presentation: the
audit's re-derivation (``bridge.audit.verdict``) ignores it, so it runs in English whatever
language a record was rendered in.

Marking: ``_("text")`` translates now (in the current language); ``N_("text")`` only marks a
table entry for extraction, translated where it is shown with ``_(TABLE[key])``; ``ngettext``
for plurals. Templates use Jinja2's ``jinja2.ext.i18n`` (``{% trans %}``, ``_()``), installed
with these same callables by :func:`install`; templates rendered often (chat cards) are compiled
once per language instead, their constant messages translated then (:class:`TranslatedEnvironment`).
"""

from __future__ import annotations

import contextvars
import functools
import gettext as _gettext
import itertools
import re
from importlib import resources
from importlib.resources.abc import Traversable

import jinja2
from jinja2 import nodes
from jinja2.visitor import NodeTransformer
from markupsafe import Markup, escape
from babel.messages.catalog import Catalog
from babel.messages.pofile import read_po

DEFAULT = "en"
"""The language the code is written in, and every fallback."""

DOMAIN = "messages"

_current: contextvars.ContextVar[str] = contextvars.ContextVar("fate_bridge_language", default=DEFAULT)


def _locale_folder() -> Traversable:
    return resources.files("bridge").joinpath("locale")


@functools.cache
def languages() -> tuple[str, ...]:
    """The languages the bridge speaks: English and every ``locale/<lang>/`` with a catalog."""
    found = {
        entry.name
        for entry in _locale_folder().iterdir()
        if entry.joinpath("LC_MESSAGES", f"{DOMAIN}.po").is_file()
    }
    return tuple(sorted(found | {DEFAULT}))


@functools.lru_cache(maxsize=256)  # tags come from clients: bounded; a decision asks several times
def normalize(language: str | None) -> str:
    """The catalog for a language tag as Foundry or a browser writes it: ``"de"``, ``"de-DE"``
    and ``"de_AT"`` give ``"de"``; anything the bridge has no catalog for (or None) gives
    ``"en"``."""
    if not language:
        return DEFAULT
    tag = language.strip().replace("-", "_").lower()
    for candidate in (tag, tag.split("_", 1)[0]):
        if candidate in languages():
            return candidate
    return DEFAULT


class Translations(_gettext.NullTranslations):
    """One language's catalog as gettext lookups: ``gettext``, ``ngettext``. Untranslated and
    fuzzy entries fall back to the English text."""

    def __init__(self, catalog: Catalog) -> None:
        super().__init__()
        self._messages: dict[object, object] = {  # msgid (a pair for plurals) -> msgstr(s)
            m.id: m.string for m in catalog
            if m.id and not m.fuzzy and (all(m.string) if isinstance(m.string, tuple) else m.string)
        }
        self._plural = _gettext.c2py(catalog.plural_expr)

    def gettext(self, message: str) -> str:
        found = self._messages.get(message)
        return found if isinstance(found, str) else message

    def ngettext(self, msgid1: str, msgid2: str, n: int) -> str:
        found = self._messages.get((msgid1, msgid2))
        if isinstance(found, tuple):
            return found[min(self._plural(n), len(found) - 1)]
        return msgid1 if n == 1 else msgid2

    def fill(self, catalog: Catalog) -> None:
        """Add the entries of ``catalog`` whose msgid this one lacks (a plug-in ruleset's words:
        the bridge's own translation of a msgid wins)."""
        for msgid, found in Translations(catalog)._messages.items():
            self._messages.setdefault(msgid, found)


def _read_po(po: Traversable, language: str) -> Catalog:
    with po.open("rb") as source:
        return read_po(source, locale=language, domain=DOMAIN)


def read_catalog(language: str) -> Catalog:
    """The ``messages.po`` catalog of ``language`` as Babel reads it (``KeyError`` if none)."""
    if language not in languages() or language == DEFAULT:
        raise KeyError(language)
    return _read_po(_locale_folder().joinpath(language, "LC_MESSAGES", f"{DOMAIN}.po"), language)


def add_catalogs(package: str) -> None:
    """Add the words of a ruleset kept outside the bridge: ``<package>/locale/<lang>/LC_MESSAGES/
    messages.po``, for each language the bridge speaks (:func:`languages`; others are ignored),
    under the bridge's catalog (a msgid the bridge translates keeps the bridge's words). Called
    by ``bridge.registry.register`` for a ruleset's ``locale``; kept until the process ends.
    ``ModuleNotFoundError`` if ``package`` is not importable."""
    folder = resources.files(package).joinpath("locale")
    for language in languages():
        po = folder.joinpath(language, "LC_MESSAGES", f"{DOMAIN}.po")
        if language != DEFAULT and po.is_file():
            found = translations(language)
            assert isinstance(found, Translations)
            found.fill(_read_po(po, language))


def translations(language: str) -> _gettext.NullTranslations:
    """The catalog of ``language`` (normalized first: one object per language, which
    :func:`add_catalogs` fills); English is the code's own text."""
    return _translations(normalize(language))


@functools.cache
def _translations(language: str) -> _gettext.NullTranslations:
    if language == DEFAULT:
        return _gettext.NullTranslations()
    return Translations(read_catalog(language))


def current() -> str:
    """The language strings are translated into now (``"en"`` outside :func:`using`)."""
    return _current.get()


class using:  # noqa: N801 (used as a function: ``with i18n.using(language):``)
    """Translate into ``language`` (normalized; English when unknown) inside the block; yields
    the language used. Context-local: concurrent sessions do not see each other's. A class, not a
    ``contextlib.contextmanager``: a decision enters two (~1.4 -> ~0.4 µs each, issue 17)."""

    __slots__ = ("_wanted", "_token")

    def __init__(self, language: str | None) -> None:
        self._wanted = normalize(language)
        self._token: contextvars.Token[str] | None = None

    def __enter__(self) -> str:
        if _current.get() != self._wanted:  # else nested in a block of the same language (a decision in its session's)
            self._token = _current.set(self._wanted)
        return self._wanted

    def __exit__(self, *_exc: object) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None


def gettext(message: str) -> str:
    """``message`` in the current language (itself when it has no translation)."""
    return translations(_current.get()).gettext(message)


def ngettext(singular: str, plural: str, n: int) -> str:
    """The singular or plural form for ``n`` in the current language."""
    return translations(_current.get()).ngettext(singular, plural, n)


_ = gettext


def rule_text(error: ValueError) -> str:
    """A ruleset's refusal in the current language. A ruleset's ``rules.py`` cannot import the
    bridge (the rules stay pure), so it raises (or returns) a ``ValueError`` carrying ``template``,
    its English text with ``%(name)s`` placeholders (a table ``babel.cfg`` names, so the catalog
    has it), and ``values``: this gives ``_(template) % values``. Any other ``ValueError`` is its
    ``str()``, untranslated."""
    template = getattr(error, "template", None)
    if not isinstance(template, str):
        return str(error)
    return gettext(template) % getattr(error, "values", {})


def N_(message: str) -> str:
    """Mark ``message`` for extraction without translating it (table entries translated where
    they are shown)."""
    return message


def install(env: jinja2.Environment) -> None:
    """Give a Jinja2 environment (created with ``extensions=["jinja2.ext.i18n"]``) this module's
    callables; new-style gettext: ``_("%(n)s left", n=3)`` formats and escapes."""
    env.install_gettext_callables(gettext=gettext, ngettext=ngettext, newstyle=True)  # type: ignore[attr-defined]


GETTEXT_NAMES = frozenset({"_", "gettext", "ngettext"})
"""The names of the translation callables in a template (``jinja2.ext.i18n``)."""

_NGETTEXT_FILTER = "fate_bridge_ngettext"


class TranslatedEnvironment(jinja2.Environment):
    """A Jinja2 environment speaking one language: ``jinja2.ext.i18n`` (new-style gettext, as
    :func:`install`) with the catalog of ``language`` (normalized), and every ``_("text")``,
    ``gettext("text")`` (a ``{% trans %}`` block too) whose message is a constant translated once,
    when its template compiles, instead of at each render. ``options`` are ``jinja2.Environment``'s.

    The output is the same as translating at render time, byte for byte. New-style gettext gives
    ``Markup(translated) % {variables}`` under autoescape (plain ``str % {...}`` without): a
    variable is escaped, ``%%`` gives ``%``. Compiled, a call becomes that expression with the
    translation as a constant (folded into the template's text when its variables are constants
    too); printed (``{{ _("by %(user)s", user=name) }}``) and formatted only with ``%(name)s`` and
    ``%%``, each name used once and given as a variable with no call or filter in it, it becomes
    the translation's text around its variables, each printed (so escaped) as any ``{{ name }}``.
    ``ngettext("one", "many", n)`` with constant messages picks its form from the catalog at render
    time (it depends on ``n``) without going through the template context. A call whose message is
    not a constant (``_(label)``) keeps the render-time path, in this language.

    ``_``, ``gettext`` and ``ngettext`` are the translation callables in every template: a
    template that assigns, imports or takes a parameter of one of those names is refused when it
    compiles (``jinja2.TemplateAssertionError``), and render variables must not use them either.
    """

    def __init__(self, language: str, **options: object) -> None:
        options["extensions"] = [*options.get("extensions", ()), "jinja2.ext.i18n"]  # type: ignore[misc]
        super().__init__(**options)  # type: ignore[arg-type]
        self.language = normalize(language)
        self._translations = translations(self.language)
        self.install_gettext_callables(  # type: ignore[attr-defined]
            gettext=self._translations.gettext, ngettext=self._translations.ngettext, newstyle=True)
        self.filters[_NGETTEXT_FILTER] = self._ngettext

    @jinja2.pass_eval_context
    def _ngettext(self, eval_ctx: nodes.EvalContext, num: int, singular: str, plural: str,
                  variables: dict[str, object]) -> str:
        """New-style ``ngettext`` (``jinja2.ext.i18n``) without the context call: the form for
        ``num`` formatted with ``variables`` (``num`` by default), escaped under autoescape."""
        variables.setdefault("num", num)
        found = self._translations.ngettext(singular, plural, num)
        if not eval_ctx.autoescape:
            return found % variables
        pieces = _pieces(found)
        if pieces is None:
            return Markup(found) % variables
        # Markup(found) % variables, without its escaping wrapper per value: the same text
        return Markup(found % {name: escape(variables[name]) for name in pieces[1::2]})

    def compile(self, source: str | nodes.Template, name: str | None = None,  # type: ignore[override]
                filename: str | None = None, raw: bool = False, defer_init: bool = False) -> object:
        """``jinja2.Environment.compile`` after translating the template's constant messages."""
        tree = self.parse(source, name, filename) if isinstance(source, str) else source
        _refuse_shadowing(tree, name, filename)
        translated = _ConstantMessages(self._translations, spread=self.finalize is None).visit(tree)
        return super().compile(translated, name, filename, raw, defer_init)


_CONVERSION = re.compile(r"%\((\w+)\)s|%%|%")


@functools.lru_cache(maxsize=1024)
def _pieces(message: str) -> tuple[str, ...] | None:
    """A message's text and placeholders, alternating, text first and last: ``"%(a)s or %(b)s"``
    gives ``("", "a", " or ", "b", "")``, ``%%`` read as ``%``. None if it has another
    conversion (``%d``, ``%(n)d``, ``%s``, a width or flag)."""
    parts, text, at = [], "", 0
    for found in _CONVERSION.finditer(message):
        text += message[at:found.start()]
        at = found.end()
        if found[1]:
            parts += [text, found[1]]
            text = ""
        elif found[0] == "%%":
            text += "%"
        else:
            return None
    return (*parts, text + message[at:])


def _refuse_shadowing(tree: nodes.Template, name: str | None, filename: str | None) -> None:
    """Raise ``jinja2.TemplateAssertionError`` if ``tree`` gives one of :data:`GETTEXT_NAMES`
    another meaning (an assignment, loop variable, macro, parameter or import)."""
    bound: list[tuple[str, int]] = [
        (n.name, n.lineno) for n in tree.find_all(nodes.Name) if n.ctx in ("store", "param")]
    bound += [(m.name, m.lineno) for m in tree.find_all(nodes.Macro)]
    bound += [(i.target, i.lineno) for i in tree.find_all(nodes.Import)]
    bound += [(n if isinstance(n, str) else n[1], i.lineno)
              for i in tree.find_all(nodes.FromImport) for n in i.names]
    for word, lineno in bound:
        if word in GETTEXT_NAMES:
            raise jinja2.TemplateAssertionError(
                f"{word!r} is a translation callable in these templates: give the variable another name",
                lineno, name, filename)


class _ConstantMessages(NodeTransformer):
    """Replace each new-style gettext call with constant messages by its translation (see
    :class:`TranslatedEnvironment`): ``_("m", x=v)`` becomes ``MarkSafeIfAutoescape("t") % {"x": v}``,
    or, printed and ``spread`` (the environment has no ``finalize``), the output of ``t``'s text
    and ``v``; ``ngettext("s", "p", n, x=v)`` the :data:`_NGETTEXT_FILTER` filter of ``n``. Other
    calls stay."""

    def __init__(self, found: _gettext.NullTranslations, spread: bool) -> None:
        self._found = found
        self._spread = spread

    def visit_Output(self, node: nodes.Output) -> nodes.Node:
        printed: list[nodes.Expr] = []
        for child in node.nodes:
            spread = self._spread_out(child) if self._spread else None
            printed += [self.visit(child)] if spread is None else spread
        node.nodes = printed
        return node

    def _spread_out(self, node: nodes.Expr) -> list[nodes.Expr] | None:
        """A printed ``_("... %(x)s ...", x=v)`` as the printed text and ``v``; None when it is
        no such call."""
        call = _translation_call(node)
        if call is None or call[0] != "gettext" or len(call[1]) != 1 or not _is_text(call[1][0]):
            return None
        pieces = _pieces(self._found.gettext(call[1][0].value))  # type: ignore[attr-defined]
        values = call[2]
        names = pieces[1::2] if pieces is not None else ()
        if (pieces is None or len(set(names)) != len(names) or set(names) != values.keys()
                or any(_calls(value) for value in values.values())):
            return None  # evaluated other than once each, in a different order: not the same
        spread = [values[piece] if odd else nodes.TemplateData(piece)
                  for odd, piece in zip(itertools.cycle((False, True)), pieces) if odd or piece]
        return [each.set_lineno(node.lineno) for each in spread]

    def visit_Call(self, node: nodes.Call) -> nodes.Node:
        self.generic_visit(node)  # messages in the arguments first
        call = _translation_call(node)
        if call is None:
            return node
        function, args, values = call
        variables = nodes.Dict([nodes.Pair(nodes.Const(key), value) for key, value in values.items()])
        replaced: nodes.Expr
        if function == "ngettext" and len(args) == 3 and _is_text(args[0]) and _is_text(args[1]):
            replaced = nodes.Filter(args[2], _NGETTEXT_FILTER, [args[0], args[1], variables], [], None, None)
        elif function == "gettext" and len(args) == 1 and _is_text(args[0]):
            translated = nodes.Const(self._found.gettext(args[0].value))  # type: ignore[attr-defined]
            replaced = nodes.Mod(nodes.MarkSafeIfAutoescape(translated), variables)
        else:
            return node
        return replaced.set_lineno(node.lineno)


def _translation_call(node: nodes.Node) -> tuple[str, list[nodes.Expr], dict[str, nodes.Expr]] | None:
    """A call of a translation callable with positional arguments and keyword variables, each
    named once: (``"gettext"`` or ``"ngettext"``, the arguments, the variables); None for any
    other node."""
    if not (isinstance(node, nodes.Call) and isinstance(node.node, nodes.Name)
            and node.node.name in GETTEXT_NAMES and node.dyn_args is None and node.dyn_kwargs is None):
        return None
    values = {keyword.key: keyword.value for keyword in node.kwargs}
    if len(values) != len(node.kwargs):
        return None
    return ("gettext" if node.node.name == "_" else node.node.name), node.args, values


def _is_text(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Const) and isinstance(node.value, str)


def _calls(node: nodes.Node) -> bool:
    """Whether evaluating ``node`` may call something (a function, filter or test)."""
    kinds = (nodes.Call, nodes.Filter, nodes.Test)
    return isinstance(node, kinds) or next(node.find_all(kinds), None) is not None
