"""The bridge's languages: gettext message catalogs read through Babel, one language per world.

Every string a user reads is written in English in the code and templates: chat cards, notices,
refusal messages, the overlay page. It is marked for translation, and looked up in
``bridge/locale/<lang>/LC_MESSAGES/messages.po``. docs/translating.md says how to add a language,
and why the built-in rulesets' words are in that one catalog. A ruleset kept outside the bridge
brings its own words in its folder (:func:`add_catalogs`).

Babel reads the ``.po`` files the first time a language is used. They are package data, like the
card templates Jinja2 reads. So the package ships only the text a translator edits, and no compiled
file can go stale.

A world's language is the one its forwarder named in ``hello.client.language`` (Foundry's
``game.i18n.lang``). The session renders that world's decisions inside :func:`using`. Unknown
languages, and none, fall back to English (:func:`normalize`). Card text is presentation: the
audit's re-derivation (``bridge.audit.verdict``) ignores it. So it runs in English whatever language
a record was rendered in.

Marking:

- ``_("text")`` translates now, in the current language.
- ``N_("text")`` only marks a table entry for extraction. It is translated where it is shown,
  with ``_(TABLE[key])``.
- ``ngettext`` is for plurals.

Templates use Jinja2's ``jinja2.ext.i18n`` (``{% trans %}``, ``_()``) with these same callables.
That is :mod:`bridge.i18n_templates`. It is apart so that marking and translating a string imports
neither Jinja2 nor Babel. A command that prints no translated text reads no catalog: Babel is
imported when a catalog is first read.
"""

from __future__ import annotations

import contextvars
import functools
import gettext as _gettext
from typing import TYPE_CHECKING

from .errors import Text

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable

    from babel.messages.catalog import Catalog

DEFAULT = "en"
"""The language the code is written in, and every fallback."""

DOMAIN = "messages"

_current: contextvars.ContextVar[str] = contextvars.ContextVar("fate_bridge_language", default=DEFAULT)


def _locale_folder() -> Traversable:
    from importlib import resources  # (with tempfile: only when a catalog is looked for)

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
    """The catalog for a language tag as Foundry or a browser writes it.

    ``"de"``, ``"de-DE"`` and ``"de_AT"`` give ``"de"``. Anything the bridge has no catalog for, or
    None, gives ``"en"``."""
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
        """Add the entries of ``catalog`` whose msgid this one lacks: a plug-in ruleset's words.

        The bridge's own translation of a msgid wins."""
        for msgid, found in Translations(catalog)._messages.items():
            self._messages.setdefault(msgid, found)


def _read_po(po: Traversable, language: str) -> Catalog:
    from babel.messages.pofile import read_po  # (Babel: only when a catalog is read)

    with po.open("rb") as source:
        return read_po(source, locale=language, domain=DOMAIN)


def read_catalog(language: str) -> Catalog:
    """The ``messages.po`` catalog of ``language`` as Babel reads it (``KeyError`` if none)."""
    if language not in languages() or language == DEFAULT:
        raise KeyError(language)
    return _read_po(_locale_folder().joinpath(language, "LC_MESSAGES", f"{DOMAIN}.po"), language)


def add_catalogs(package: str) -> None:
    """Add the words of a ruleset kept outside the bridge.

    They are in ``<package>/locale/<lang>/LC_MESSAGES/messages.po``, for each language the bridge
    speaks (:func:`languages`); others are ignored. They go under the bridge's catalog: a msgid the
    bridge translates keeps the bridge's words. ``bridge.registry.register`` calls it for a
    ruleset's ``locale``. They are kept until the process ends. ``ModuleNotFoundError`` if
    ``package`` is not importable."""
    from importlib import resources

    folder = resources.files(package).joinpath("locale")
    for language in languages():
        po = folder.joinpath(language, "LC_MESSAGES", f"{DOMAIN}.po")
        if language != DEFAULT and po.is_file():
            found = translations(language)
            assert isinstance(found, Translations)
            found.fill(_read_po(po, language))


def translations(language: str) -> _gettext.NullTranslations:
    """The catalog of ``language``, normalized first; English is the code's own text.

    There is one object per language, which :func:`add_catalogs` fills."""
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
    ``contextlib.contextmanager``: a decision enters one (~1.4 -> ~0.4 µs each)."""

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


def rule_text(error: ValueError) -> Text:
    """A ruleset's refusal as words to show.

    A ruleset's ``rules.py`` cannot import the bridge: the rules stay pure. So it raises (or
    returns) a ``ValueError`` carrying ``template`` and ``values``. ``template`` is its English text
    with ``%(name)s`` placeholders. It is in a table ``babel.cfg`` names, so the catalog has it.
    :mod:`bridge.times` does the same. This gives ``Text(template, values)``. Any other
    ``ValueError`` is its ``str()``, shown as it is."""
    template = getattr(error, "template", None)
    if not isinstance(template, str):
        return Text(str(error))
    return Text(template, getattr(error, "values", {}))


def N_(message: str) -> str:
    """Mark ``message`` for extraction without translating it (table entries translated where
    they are shown)."""
    return message
