"""``python -m bridge`` is ``fate-bridge``: both start at :func:`run`, the one place Ctrl+C is handled.

Ctrl+C ends every command with one line, ``fate-bridge: interrupted``, never a traceback. The exit
code is 130: 128 + SIGINT, as shells report a command stopped by it. ``serve`` catches SIGINT itself
once listening, and shuts down gracefully (bridge/server.py, ``stop_on_signals``).
"""

import signal
import sys

INTERRUPTED = 130  # the exit code of a command stopped by Ctrl+C


def _interrupt(signum: int, frame: object) -> None:
    """SIGINT: ``KeyboardInterrupt`` where the main thread is, also inside an event loop.

    Python's own handler does the same. But ``asyncio.run`` swaps it for a handler that only cancels
    the main task at its next ``await``. A command reading stdin or verifying a trail would not stop
    until it finished. ``finally`` blocks still run: stores are closed, a partial backup is removed."""
    raise KeyboardInterrupt


def run() -> int:
    """The ``fate-bridge`` console script: :func:`bridge.cli.main`, with Ctrl+C as one line and exit
    code 130.

    That holds also while the command's modules are still being imported."""
    try:
        signal.signal(signal.SIGINT, _interrupt)  # in the try: Python's own handler raised it before
        from .cli import main

        return main()
    except KeyboardInterrupt:
        print("fate-bridge: interrupted", file=sys.stderr)
        return INTERRUPTED


if __name__ == "__main__":
    raise SystemExit(run())
