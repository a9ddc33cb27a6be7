"""The built-in rulesets, one folder each: ``bridge/rulesets/<id>/`` exports a
:class:`~bridge.ruleset.Ruleset` as ``RULESET``.

A ruleset imports only the plug-in interface (:mod:`bridge.ruleset`) and the shared types
beneath it: ``wire``, ``cards``, ``dice``, ``state``, ``errors``, ``i18n``. The list of installed
rulesets lives above them, in :mod:`bridge.registry`. So does everything built from it: the wire
union, the routes, ``welcome``. Adding a ruleset is one folder and one line in
``bridge.registry.BUILT_IN``.
"""
