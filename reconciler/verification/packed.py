"""A list stored as compact JSON: for the rarely read parts of cached objects
(``slim``). Pure: no I/O.

Not for anything that is serialized: ``json.dumps`` reads a list subclass's own
storage, which is empty here; the cache's objects are read, never sent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any, SupportsIndex, overload


class Packed(list[Any]):
    """A list kept as compact JSON and decoded each time it is read: for the rarely read
    parts of a cached object (the verifications of a Stage's older freight collections,
    read only when a second run of such a collection shows up). Reads as the list it
    was made from (iteration, indexing, ``len``, ``==``, copies); the decoded values
    are fresh each time, so nothing a reader does changes the cache. ~600 bytes for ten
    entries where the dicts cost ~4 KB."""

    __slots__ = ("_raw",)

    def __init__(self, items: list[Any]) -> None:
        super().__init__()
        self._raw = json.dumps(items, separators=(",", ":")).encode()

    def unpacked(self) -> list[Any]:
        value: list[Any] = json.loads(self._raw)
        return value

    def __iter__(self) -> Iterator[Any]:
        return iter(self.unpacked())

    def __len__(self) -> int:
        return len(self.unpacked())

    def __bool__(self) -> bool:
        return self._raw != b"[]"

    @overload
    def __getitem__(self, index: SupportsIndex) -> Any: ...
    @overload
    def __getitem__(self, index: slice) -> list[Any]: ...

    def __getitem__(self, index: SupportsIndex | slice) -> Any:
        return self.unpacked()[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Packed) and other._raw == self._raw:
            return True  # the same bytes: no decoding (a Stage event that kept its history)
        return self.unpacked() == (other.unpacked() if isinstance(other, Packed) else other)

    def __ne__(self, other: object) -> bool:
        return not self == other

    __hash__ = None

    def __repr__(self) -> str:
        return f"Packed({self.unpacked()!r})"

    def __deepcopy__(self, memo: dict[int, Any]) -> list[Any]:
        return self.unpacked()

    def __copy__(self) -> list[Any]:
        return self.unpacked()

    def __reduce__(self) -> Any:
        return (list, (self.unpacked(),))
