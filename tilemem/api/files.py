"""The JSON documents as the CLI prints and writes them (one formatting for both)."""
from __future__ import annotations

from typing import Any


def json_text(obj: Any) -> bytes:
    """``obj`` (msgspec structs, dicts, lists) as indented JSON, keys as the structs name them.

    Example
    -------
    >>> json_text({"a": [1]}).decode()
    '{\\n  "a": [\\n    1\\n  ]\\n}\\n'
    """
    import msgspec

    return msgspec.json.format(msgspec.json.encode(obj), indent=2) + b"\n"
