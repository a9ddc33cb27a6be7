"""mythic's chat cards: rendered from this package's ``templates/`` (autoescaped, strict)."""

from __future__ import annotations

from ...cards import CardTemplates

render_card = CardTemplates(__package__).render
