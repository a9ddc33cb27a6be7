"""The built-in rulesets, one folder each: ``bridge/rulesets/<id>/`` exporting a
:class:`~bridge.ruleset.Ruleset` as ``RULESET``.

A ruleset imports nothing above the plug-in interface (:mod:`bridge.ruleset`) and the shared
types beneath it (``wire``, ``cards``, ``dice``, ``state``, ``errors``, ``i18n``). The list of
installed rulesets, and everything built from it (the wire union, the routes, ``welcome``), is
:mod:`bridge.registry`, above them: adding a ruleset is one folder and one line in
``bridge.registry.BUILT_IN``.
"""
