"""The stream overlay's page in the bridge's languages.

``bridge/overlay/index.html`` is rendered once per language, with Jinja2's ``jinja2.ext.i18n`` and
the bridge's catalogs (``bridge.i18n``).

The module's overlay URL carries the world's language (``&lang=de``: Foundry's ``game.i18n.lang``).
The page's status lines come in it, as data attributes ``overlay.js`` shows as text. The cards on it
are already in the world's language: its decisions rendered them.
"""

from __future__ import annotations

from urllib.parse import parse_qs

import jinja2

from . import i18n, i18n_templates

PAGE = "index.html"


def render_pages() -> dict[str, bytes]:
    """The page's HTML (UTF-8) by language, for every language in :func:`bridge.i18n.languages`."""
    env = jinja2.Environment(loader=jinja2.PackageLoader("bridge", "overlay"), autoescape=True,
                             undefined=jinja2.StrictUndefined, extensions=["jinja2.ext.i18n"])
    i18n_templates.install(env)
    template = env.get_template(PAGE)
    pages = {}
    for language in i18n.languages():
        with i18n.using(language):
            pages[language] = template.render(lang=language).encode()
    return pages


def language_of(query: str) -> str:
    """The page language a request's query string asks for: ``lang=de-DE`` -> ``de``.

    English when it names none, or one the bridge has no catalog for."""
    return i18n.normalize(parse_qs(query).get("lang", [None])[0])
