"""YAML and JSON text to plain Python values, with bounded nesting.

Both parsers recurse once per level of nesting: ``json.loads`` raises ``RecursionError`` at about
a thousand levels, and the composer of libyaml's loader (PyYAML's fast one) recurses in C and
kills the process with a segmentation fault at some tens of thousands. So YAML deeper than
:data:`MAX_DEPTH` levels is refused as it is read, before the composer goes deeper, and JSON too
deep for Python is refused with the same error. Newer libyaml builds (PyYAML 6.0.3 on) also stop
their scanner at a nesting depth of their own, which in flow style (``[[[...``) it reaches
before the composer sees the first node: that refusal is reported as the same error, so the
message does not depend on which PyYAML release is installed. Kubernetes objects need about 20
levels.

Every reader of YAML or JSON in clueue goes through here: snapshots and configuration files
(``clueue.adapters.files``), policy test files (``clueue.policytools``).
"""

from __future__ import annotations

import json
from typing import Any

import yaml

from .errors import SnapshotError

__all__ = ["MAX_DEPTH", "parse_documents", "parse_yaml"]

#: The most values a YAML document may have on a path from its top (the top one and its
#: innermost scalar included).
MAX_DEPTH = 200

# libyaml's loader (when PyYAML was built with it) reads large snapshots an order of magnitude faster.
_SAFE_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _TooDeep(Exception):
    pass


class _Loader(_SAFE_LOADER):  # type: ignore[misc, valid-type]
    """The safe loader, counting the nesting: both of PyYAML's composers (libyaml's and the
    pure-Python one) call ``descend_resolver`` before composing a node and ``ascend_resolver``
    after it, so the count stops a deep document before the composer recurses further.

    The methods replaced serve only path resolvers, which the safe loader has none of; not
    calling them keeps reading as fast as before (one Python call per node either way).
    """

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.depth = 0

    def descend_resolver(self, current_node: Any, current_index: Any) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise _TooDeep

    def ascend_resolver(self) -> None:
        self.depth -= 1


def _too_deep(source: str) -> SnapshotError:
    return SnapshotError(f"nested deeper than {MAX_DEPTH} levels", source=source)


def _scanner_too_deep(e: Exception) -> bool:
    """Whether ``e`` is libyaml's own nesting limit (its scanner's "exceeded maximum nesting
    depth"), which is deeper than :data:`MAX_DEPTH`, so the document is too deep for clueue too."""
    return isinstance(e, yaml.MarkedYAMLError) and "nesting depth" in (e.problem or "")


def parse_documents(text: str, source: str) -> list[Any]:
    """Every document of ``text``: JSON (one value; a list is its documents) if ``source`` ends
    in ``.json`` or the text starts with ``{`` or ``[``, else YAML (any number of documents).

    Raises:
        SnapshotError: ``text`` is not valid YAML or JSON, or is nested too deeply; it names ``source``.
    """
    try:
        if source.endswith(".json") or text.lstrip().startswith(("{", "[")):
            loaded = json.loads(text)
            return loaded if isinstance(loaded, list) else [loaded]
        return list(yaml.load_all(text, Loader=_Loader))
    except (_TooDeep, RecursionError):
        raise _too_deep(source) from None
    except (yaml.YAMLError, ValueError) as e:  # ValueError: JSON's errors, and a number of over 4300 digits
        if _scanner_too_deep(e):
            raise _too_deep(source) from None
        raise SnapshotError(f"not valid YAML or JSON: {e}", source=source) from None


def parse_yaml(text: str, source: str) -> Any:
    """The single YAML document of ``text`` (``None`` if empty).

    Raises:
        SnapshotError: ``text`` is not one valid YAML document, or is nested too deeply; it names ``source``.
    """
    try:
        return yaml.load(text, Loader=_Loader)
    except _TooDeep:
        raise _too_deep(source) from None
    except (yaml.YAMLError, ValueError) as e:
        if _scanner_too_deep(e):
            raise _too_deep(source) from None
        raise SnapshotError(f"not valid YAML: {e}", source=source) from None
