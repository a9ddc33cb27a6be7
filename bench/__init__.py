"""Benchmark of the bridge against a bare websockets echo server.

``python -m bench`` runs everything (see ``bench/__main__.py``); ``docs/performance.md`` holds
the numbers measured on the reference machine.
"""
