"""Jinja2 templates in the bridge's languages.

:func:`install` puts the translation callables of :mod:`bridge.i18n` in a template
(``jinja2.ext.i18n``: ``{% trans %}``, ``_()``). Templates rendered often (chat cards) are compiled
once per language instead. Their constant messages are translated then
(:class:`TranslatedEnvironment`).

This is apart from :mod:`bridge.i18n`, so that marking and translating a string imports no Jinja2.
Only what renders a template imports this.
"""

from __future__ import annotations

import functools
import gettext as _gettext
import itertools
import re

import jinja2
from jinja2 import nodes
from jinja2.visitor import NodeTransformer
from markupsafe import Markup, escape

from .i18n import gettext, ngettext, normalize, translations


def install(env: jinja2.Environment) -> None:
    """Give a Jinja2 environment the callables of :mod:`bridge.i18n`.

    Create it with ``extensions=["jinja2.ext.i18n"]``. New-style gettext: ``_("%(n)s left", n=3)``
    formats and escapes."""
    env.install_gettext_callables(gettext=gettext, ngettext=ngettext, newstyle=True)  # type: ignore[attr-defined]


GETTEXT_NAMES = frozenset({"_", "gettext", "ngettext"})
"""The names of the translation callables in a template (``jinja2.ext.i18n``)."""

_NGETTEXT_FILTER = "fate_bridge_ngettext"


class TranslatedEnvironment(jinja2.Environment):
    """A Jinja2 environment speaking one language.

    It has ``jinja2.ext.i18n`` (new-style gettext, as :func:`install`) with the catalog of
    ``language`` (normalized). Every ``_("text")`` or ``gettext("text")`` whose message is a
    constant is translated once, when its template compiles, not at each render. A ``{% trans %}``
    block too. ``options`` are ``jinja2.Environment``'s.

    The output is the same as translating at render time, byte for byte. New-style gettext gives
    ``Markup(translated) % {variables}`` under autoescape, and plain ``str % {...}`` without. A
    variable is escaped; ``%%`` gives ``%``. Compiled, a call becomes that expression with the
    translation as a constant. It is folded into the template's text when its variables are
    constants too.

    Some calls become the translation's text around their variables, each printed (so escaped) as
    any ``{{ name }}``. Such a call is printed (``{{ _("by %(user)s", user=name) }}``). It is
    formatted only with ``%(name)s`` and ``%%``. Each name is used once, and given as a variable
    with no call or filter in it.

    ``ngettext("one", "many", n)`` with constant messages picks its form from the catalog at render
    time, since it depends on ``n``. It does not go through the template context. A call whose
    message is not a constant (``_(label)``) keeps the render-time path, in this language.

    ``_``, ``gettext`` and ``ngettext`` are the translation callables in every template. A template
    that assigns, imports or takes a parameter of one of those names is refused when it compiles
    (``jinja2.TemplateAssertionError``). Render variables must not use them either."""

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
        """New-style ``ngettext`` (``jinja2.ext.i18n``) without the context call.

        Returns the form for ``num``, formatted with ``variables`` (``num`` by default), escaped
        under autoescape."""
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
        if raw:  # (jinja2's overloads tell its two results apart by a literal raw)
            return super().compile(translated, name, filename, True, defer_init)
        return super().compile(translated, name, filename, False, defer_init)


_CONVERSION = re.compile(r"%\((\w+)\)s|%%|%")


@functools.lru_cache(maxsize=1024)
def _pieces(message: str) -> tuple[str, ...] | None:
    """A message's text and placeholders, alternating, text first and last.

    ``"%(a)s or %(b)s"`` gives ``("", "a", " or ", "b", "")``; ``%%`` is read as ``%``. None if it
    has another conversion: ``%d``, ``%(n)d``, ``%s``, a width or flag."""
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
    another meaning.

    That is an assignment, loop variable, macro, parameter or import."""
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
    """Replace each new-style gettext call with constant messages by its translation.

    See :class:`TranslatedEnvironment`. ``_("m", x=v)`` becomes ``MarkSafeIfAutoescape("t") % {"x":
    v}``. Printed and ``spread`` (the environment has no ``finalize``), it becomes the output of
    ``t``'s text and ``v``. ``ngettext("s", "p", n, x=v)`` becomes the :data:`_NGETTEXT_FILTER`
    filter of ``n``. Other calls stay."""

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
        for each in spread:
            each.set_lineno(node.lineno)
        return spread

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
    """A call of a translation callable with positional arguments and keyword variables, each named once.

    Returns (``"gettext"`` or ``"ngettext"``, the arguments, the variables). None for any other
    node."""
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
