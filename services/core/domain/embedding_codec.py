"""How a vector is written down: in the graph (so the vector index can be
rebuilt without re-embedding) and in a backup, alike. Pure."""

from __future__ import annotations

import base64
from array import array


def encode_embedding(values: list[float] | None) -> str | None:
    """float32 little-endian, base64: about 2 KB for 384 dimensions."""
    if values is None:
        return None
    packed = array("f", values)
    if packed.itemsize != 4:  # pragma: no cover - every supported platform has 4-byte floats
        raise RuntimeError("float is not 32-bit here")
    return base64.b64encode(packed.tobytes()).decode("ascii")


def decode_embedding(text: str | None) -> list[float] | None:
    """The inverse of encode_embedding (None for none)."""
    packed = decode_embedding_packed(text)
    return None if packed is None else packed.tolist()


def decode_embedding_packed(text: str | None) -> array[float] | None:
    """The inverse of encode_embedding as a packed float32 array (None for
    none): 4 bytes a dimension, where a list holds a 24-byte float object
    and an 8-byte pointer for each (1.5 against 12 KiB at 384)."""
    if not text:
        return None
    packed = array("f")
    packed.frombytes(base64.b64decode(text))
    return packed
