"""``python -m bridge`` is ``fate-bridge``."""

from .cli import main

raise SystemExit(main())
