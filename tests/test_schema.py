"""schemas/ is generated from the message types (bridge/wire/, bridge/rulesets/*/wire.py) and must be up to date."""

from __future__ import annotations

import json
from pathlib import Path

from bridge import json_schema as schema

SCHEMAS = Path(__file__).resolve().parent.parent / "schemas"


def test_checked_in_schemas_are_up_to_date():
    stale = schema.stale_files(SCHEMAS)
    assert stale == [], f"schemas/ is stale ({stale}): run `fate-bridge schema` and commit the result"


def test_client_schema_refuses_unknown_fields_and_lists_every_message():
    document = json.loads((SCHEMAS / "client-messages.schema.json").read_text())
    defs = document["$defs"]
    assert {"Hello", "Ping", "Settings", "TestRolled", "FateSpend", "FateChoice"} <= set(defs)
    assert defs["FateSpend"]["additionalProperties"] is False
    assert defs["FateSpend"]["properties"]["type"] == {"enum": ["fate_spend"]}
    assert defs["SohlTest"]["properties"]["roll"] == {"minimum": 1, "maximum": 100, "type": "integer",
                                                      "description": "A d100 result, 1..100."}


def test_stale_file_is_detected(tmp_path):
    schema.write(tmp_path)
    assert schema.stale_files(tmp_path) == []
    (tmp_path / "bridge-messages.schema.json").write_text("{}")
    assert schema.stale_files(tmp_path) == ["bridge-messages.schema.json"]
