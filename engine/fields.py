"""The field toolkit: typed, validated access to one raw object's fields.

:class:`Fields` reads the fields of one :class:`Document` (a Kubernetes or Kueue object, or a
configuration file's section); every error is a :class:`~.errors.SnapshotError` naming the
source, the object and the field. The snapshot's parsers (snapshot.py), Kueue's Configuration
(kueueconfig.py) and the adapters' file formats all read through it.
"""

from __future__ import annotations

from collections import abc
from dataclasses import dataclass
from datetime import datetime, timezone
from fractions import Fraction
from typing import Any, Mapping

from .durations import parse_duration
from .errors import SnapshotError
from .quantity import parse_quantity

__all__ = ["AT_PATH", "INT32_LIMIT", "Document", "Fields"]

INT32_LIMIT = 2**31  # Kubernetes' counts and priorities are int32
AT_PATH: Any = object()  # an accessor's default ``value``: look the value up by its path


@dataclass(frozen=True)
class Document:
    """One raw object and where it came from (``file.yaml#3`` or ``api``)."""

    source: str
    body: Mapping[str, Any]


class Fields:
    """Typed access to one object's fields; every error names source, object and field.

    The accessors take a dotted ``path`` into the object, or the ``value`` already found at
    that path (``path`` then only names it in errors). An absent value (None) gives the default.
    """

    def __init__(self, doc: Document, kind: str) -> None:
        self.doc = doc
        meta = doc.body.get("metadata") or {}
        if not isinstance(meta, abc.Mapping) or not isinstance(meta.get("name"), str) or not meta["name"]:
            raise SnapshotError("a name is required", source=doc.source, obj=kind, field="metadata.name")
        self.name: str = meta["name"]
        ns = meta.get("namespace")
        if ns is not None and not isinstance(ns, str):
            raise SnapshotError(f"expected a string, got {ns!r}", source=doc.source, obj=f"{kind} {self.name}",
                                field="metadata.namespace")
        self.namespace: str = ns or "default"
        self.kind = kind
        self.meta = meta

    @property
    def ident(self) -> str:
        return f"{self.kind} {self.name}"

    def fail(self, path: str, message: str) -> SnapshotError:
        return SnapshotError(message, source=self.doc.source, obj=self.ident, field=path)

    def get(self, path: str, default: Any = None) -> Any:
        node: Any = self.doc.body
        for part in path.split("."):
            if node is None:
                return default
            if type(node) is not dict and not isinstance(node, abc.Mapping):
                raise self.fail(path, f"expected an object at {part!r}, got {type(node).__name__}")
            node = node.get(part)
        return default if node is None else node

    def _at(self, path: str, value: Any) -> Any:
        return self.get(path) if value is AT_PATH else value

    def typed(self, path: str, value: Any, kind: type, what: str) -> Any:
        # The exact type first: nearly every value is a plain dict, list, str or int.
        if type(value) is not kind and (not isinstance(value, kind) or isinstance(value, bool)):
            raise self.fail(path, f"expected {what}, got {value!r}")
        return value

    def string(self, path: str, default: str | None = None, value: Any = AT_PATH) -> str | None:
        value = self._at(path, value)
        return default if value is None else self.typed(path, value, str, "a string")

    def integer(self, path: str, default: int | None = None, value: Any = AT_PATH) -> int | None:
        """An int32, as every count and priority of the Kubernetes and Kueue APIs is."""
        value = self._at(path, value)
        if value is None:
            return default
        if not -INT32_LIMIT <= self.typed(path, value, int, "an integer") < INT32_LIMIT:
            raise self.fail(path, f"{value} is out of range: at most {INT32_LIMIT - 1} in magnitude (32 bits)")
        return value

    def duration(self, path: str, default: float) -> float:
        """Seconds of the duration at ``path`` (durations.py: ``90s``, ``1h30m``, a number of
        seconds; ``default`` if unset)."""
        value = self._at(path, AT_PATH)
        if value is None:
            return default
        try:
            return parse_duration(value)
        except ValueError as e:
            raise self.fail(path, str(e)) from None

    def count(self, path: str, default: int, value: Any = AT_PATH) -> int:
        """A number of pods: a non-negative int32 (``default`` if unset)."""
        count = self.integer(path, None, value)
        if count is not None and count < 0:
            raise self.fail(path, f"expected a non-negative integer, got {count}")
        return default if count is None else count

    def flag(self, path: str, default: bool = False, value: Any = AT_PATH) -> bool:
        value = self._at(path, value)
        return default if value is None else self.typed(path, value, bool, "true or false")

    def mapping(self, path: str, value: Any = AT_PATH) -> Mapping[str, Any]:
        value = self._at(path, value)
        if type(value) is dict:
            return value
        return {} if value is None else self.typed(path, value, abc.Mapping, "an object")

    def items(self, path: str, value: Any = AT_PATH) -> list[Any]:
        value = self._at(path, value)
        return [] if value is None else self.typed(path, value, list, "a list")

    def objects(self, path: str, value: Any = AT_PATH) -> list[tuple[str, Mapping[str, Any]]]:
        """A list of objects, each with its own path (``path[i]``)."""
        return [(f"{path}[{i}]", self.mapping(f"{path}[{i}]", v)) for i, v in enumerate(self.items(path, value))]

    def strings(self, path: str, value: Any = AT_PATH) -> tuple[str, ...]:
        return tuple(self.typed(f"{path}[{i}]", v, str, "a string") for i, v in enumerate(self.items(path, value)))

    def string_map(self, path: str, value: Any = AT_PATH) -> dict[str, str]:
        raw = self.mapping(path, value)
        for k, v in raw.items():
            if not isinstance(k, str):
                raise self.fail(path, f"expected string keys, got {k!r}")
            if not isinstance(v, str):
                raise self.fail(f"{path}.{k}", f"expected a string value, got {v!r}")
        return dict(raw)

    def quantity(self, path: str, value: Any) -> Fraction:
        try:
            q = parse_quantity(value)
        except ValueError as e:
            raise self.fail(path, str(e)) from None
        if q < 0:
            raise self.fail(path, f"quantity {value!r} must not be negative")
        return q

    def resources(self, path: str, value: Any) -> dict[str, Fraction]:
        raw = self.mapping(path, value)
        return {self.typed(path, k, str, "resource names"): self.quantity(f"{path}.{k}", v) for k, v in raw.items()}

    def timestamp(self, path: str = "metadata.creationTimestamp", value: Any = AT_PATH) -> int:
        """A time (by default ``metadata.creationTimestamp``) in seconds since the epoch (0 if
        unset); a time without a zone is UTC, as Kubernetes writes them (and YAML reads unquoted ones)."""
        raw = self.meta.get("creationTimestamp") if value is AT_PATH and path == "metadata.creationTimestamp" \
            else self._at(path, value)
        if raw is None:
            return 0
        try:
            stamp = raw if isinstance(raw, datetime) else datetime.fromisoformat(str(raw).replace("Z", "+00:00"))
        except ValueError:
            raise self.fail(path, f"{raw!r} is not an RFC 3339 time") from None
        if stamp.tzinfo is None:
            stamp = stamp.replace(tzinfo=timezone.utc)
        # A difference of aware times: .timestamp() fails near year 1 in some time zones.
        return int((stamp - _EPOCH).total_seconds())


_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
