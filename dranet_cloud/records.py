"""Plain record classes compared and shown by field, without :mod:`dataclasses`.

Modules on the auto-detection path build a few small records; importing
:mod:`dataclasses` (with :mod:`inspect`) would cost more than detecting on a
bare-metal node.  A subclass lists its attributes in ``_FIELDS`` and gets the
equality and repr a dataclass would give it (mutable, so not hashable).
"""

from __future__ import annotations

from typing import ClassVar


class FieldRecord:
    _FIELDS: ClassVar[tuple[str, ...]] = ()
    __hash__ = None  # type: ignore[assignment]  # mutable, as a dataclass is

    def _values(self) -> tuple[object, ...]:
        return tuple(getattr(self, f) for f in self._FIELDS)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FieldRecord) or other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()

    def __repr__(self) -> str:
        body = ", ".join(f"{f}={getattr(self, f)!r}" for f in self._FIELDS)
        return f"{type(self).__name__}({body})"
