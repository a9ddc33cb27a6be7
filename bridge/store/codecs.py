"""The JSON values of the stores' rows, as the wire messages' types.

A world's settings: :func:`decode_settings`, :func:`_encode`. An audit row's summary columns:
:data:`_summary_decoder`.

They live apart from :mod:`bridge.store.schema` because they import msgspec and every wire
message. A ``world`` command that writes no settings does without them
(:data:`~bridge.store.worlds.NEW_SETTINGS`).
"""

from __future__ import annotations

import msgspec

from .. import wire
from ..errors import WorldSettingsInvalid

_settings_decoder = msgspec.json.Decoder(wire.WorldSettings)


def decode_settings(world_id: str, stored: bytes | str | memoryview) -> wire.WorldSettings:
    """A world's stored settings row.

    Raises ``WorldSettingsInvalid`` when it is not valid settings. The error names the world, what
    is wrong and the stored value, with the fix.
    """
    raw = bytes(stored) if isinstance(stored, memoryview) else stored
    try:
        return _settings_decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError) as exc:
        text = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else raw
        raise WorldSettingsInvalid(
            f"world {world_id!r} has invalid stored settings ({exc}): {text[:200]}; it is not served "
            f"until they are repaired (`fate-bridge audit repair {world_id}` rebuilds them from its "
            "audit chain)") from None


_summary_decoder = msgspec.json.Decoder(wire.AuditColumns)
_encode = msgspec.json.Encoder().encode
