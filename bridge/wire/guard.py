"""The decode guard: bound a frame's size and nesting before msgspec sees it; name the field msgspec
cannot decode.

msgspec, like any recursive JSON reader, raises ``RecursionError`` on input nested a few
thousand deep. A 2 KiB frame can be. :func:`check` refuses such a frame first. Its scan costs a
few ``bytes.count`` calls for every real message, whose nesting is at most 5.

For a frame that is not JSON, :func:`undecodable` finds where it breaks: invalid UTF-8, a lone
UTF-16 surrogate escape such as ``"\\ud800"``, a syntax error. It names that field as
``error.field`` does for validation errors (``actor.fate_points[1].name``). Both raise or return
:class:`~bridge.errors.BadMessage` only. No frame, however malformed, gets anything else.
"""

from __future__ import annotations

import json
import re
from itertools import accumulate

from ..errors import BadMessage
from ..i18n import N_

MAX_FRAME_BYTES = 64 * 1024  # a test_rolled with a full actor is ~4 KiB; 64 KiB leaves room
MAX_DEPTH = 16  # objects/arrays inside each other: the deepest message (an actor's Fate points) has 4

_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)  # a complete JSON string token
_TOKEN = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"?|[\[\]{},:]', re.S)  # strings (maybe cut) and punctuation
_BRACKET = re.compile(rb"[\[\]{}]")
_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
# in a string token: a surrogate pair, a lone surrogate escape (group 1), or any other escape
_ESCAPE = re.compile(rb"\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
                     rb"|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})|\\.", re.S)


def _bytes(frame: bytes | str) -> bytes:
    return frame.encode("utf-8", "surrogatepass") if isinstance(frame, str) else frame


def check(frame: bytes | str) -> None:
    """Refuse a frame over ``MAX_FRAME_BYTES``, or nested deeper than ``MAX_DEPTH`` outside strings.

    So decoding it cannot exhaust the stack. Raises :class:`BadMessage` naming the top-level field
    where the nesting goes too deep. Returns None for anything else, which may still fail to decode
    (:func:`undecodable`).
    """
    data = _bytes(frame)
    if len(data) > MAX_FRAME_BYTES:
        raise BadMessage(N_("frame of %(size)s bytes is over the limit of %(limit)s bytes"),
                         {"size": len(data), "limit": MAX_FRAME_BYTES})
    if data.count(b"[") + data.count(b"{") <= MAX_DEPTH:
        return  # every real message: cannot be too deep, whatever its strings hold
    brackets = _BRACKET.findall(_STRING.sub(b'""', data))
    if max(accumulate(_STEP[b[0]] for b in brackets), default=0) > MAX_DEPTH:
        path = _path(data, depth=MAX_DEPTH + 1)
        top = re.split(r"[.\[]", path, maxsplit=1)[0] if path else ""
        text = (N_("objects and arrays nested more than %(depth)s deep in `%(field)s`") if top
                else N_("objects and arrays nested more than %(depth)s deep"))
        raise BadMessage(text, {"depth": MAX_DEPTH, "field": top}, field=top or None)


def undecodable(frame: bytes | str, error: Exception) -> BadMessage:
    """The :class:`BadMessage` for a frame msgspec could not decode; ``error`` is its DecodeError.

    It names the field holding invalid UTF-8 or a lone surrogate escape, or where the JSON breaks.
    Call it only on a frame :func:`check` let through.
    """
    data = _bytes(frame)
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        return BadMessage(N_("frame is not valid UTF-8"), field=_path(data, at=exc.start) or None)
    for token in _STRING.finditer(data):
        for escape in _ESCAPE.finditer(token.group(), 1):
            if escape.group(1):
                return BadMessage(N_("lone UTF-16 surrogate escape %(escape)s in a string"),
                                  {"escape": escape.group(1).decode()}, field=_path(data, at=token.end()) or None)
    byte = re.search(r"\(byte (\d+)\)", str(error))  # msgspec says where for some errors
    position: int | None = int(byte.group(1)) if byte else None
    if position is None:
        try:
            json.loads(data)  # its errors say where; RecursionError cannot happen after check()
        except ValueError as exc:
            position = getattr(exc, "pos", None)
    cut = position is not None and position >= len(data.rstrip())  # truncated: no field to blame
    where = _path(data, at=position) if position is not None and not cut else ""
    return BadMessage(N_("frame is not a JSON object: %(error)s"), {"error": error}, field=where or None)


def _path(data: bytes, *, at: int | None = None, depth: int | None = None) -> str:
    """The dotted path (``actor.fate_points[1].name``) of the value open at byte ``at``.

    Or of the first container opened ``depth`` deep; "" at top level. Only for frames already
    refused.
    """
    stack: list[list] = []  # ["{", key, want_key] or ["[", index]
    for token in _TOKEN.finditer(data, 0, len(data) if at is None else at):
        kind = token.group()[:1]
        if kind in (b"{", b"["):
            stack.append(["{", None, True] if kind == b"{" else ["[", 0])
            if depth is not None and len(stack) >= depth:
                break
        elif kind in (b"}", b"]"):
            if stack:
                stack.pop()
        elif not stack:
            continue
        elif kind == b",":
            top = stack[-1]
            if top[0] == "[":
                top[1] += 1
            else:
                top[2] = True
        elif kind == b":":
            if stack[-1][0] == "{":
                stack[-1][2] = False
        elif stack[-1][0] == "{" and stack[-1][2]:  # a key
            stack[-1][1] = token.group().strip(b'"').decode("utf-8", "replace")
    parts = []
    for entry in stack:
        if entry[0] == "[":
            parts.append(f"[{entry[1]}]")
        elif entry[1] is not None:
            parts.append(("." if parts else "") + entry[1])
    return "".join(parts)
