"""Minimize a failing fuzz case for the corpus: ``python3 -m tests.fuzz.minimize CASE [NAME]``.

Hypothesis minimizes what it generates, but a snapshot's choices are many and interlinked, so
its result often keeps objects that play no part. This removes, greedily and until nothing more
can go, whole documents, then keys and list items anywhere in them, keeping each removal after
which the case still fails the same way (the same failure signature, see ``properties.py``).
``CASE`` is a case as ``properties.save_case`` writes it (``x.yaml``, or a folder ``x/`` of
``snapshot.yaml`` and policy files); the result is written beside it as ``NAME`` (default: over
the case), headed by the failure.
"""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any, Callable

import yaml

from clueue.engine import Policy, load_policy
from tests.fuzz.properties import FuzzFailure, check_case, save_case
from tests.fuzz.strategies import paths


def signature(documents: list[Any], policy: Policy) -> str | None:
    """The failure signature of a case (``hang``, ``crash KeyError at prune.py:124``...), or None."""
    try:
        check_case(documents, policy, save=False)
    except FuzzFailure as e:
        return str(e).partition("]")[0].lstrip("[")
    return None


def _without(documents: list[Any], path: tuple[Any, ...]) -> list[Any]:
    out = copy.deepcopy(documents)
    node = out
    for part in path[:-1]:
        node = node[part]
    del node[path[-1]]
    return out


def minimize(documents: list[Any], policy: Policy, log: Callable[[str], None] = print) -> list[Any]:
    """The smallest case found that fails with the signature of ``documents``."""
    wanted = signature(documents, policy)
    if wanted is None:
        raise ValueError("the case does not fail")
    log(f"signature: {wanted}")
    changed = True
    while changed:
        changed = False
        for path in sorted(paths(documents), key=len):
            try:
                candidate = _without(documents, path)
            except (KeyError, IndexError, TypeError):
                continue  # a path under something removed already
            if path[1:] and path[1] in ("apiVersion", "kind"):
                continue
            if signature(candidate, policy) == wanted:
                documents, changed = candidate, True
                log(f"removed {'.'.join(map(str, path))}")
                break
    return documents


def read_case(path: Path) -> tuple[list[Any], Policy]:
    """The documents and policy of a saved case (``x.yaml``, or a folder of ``snapshot.yaml`` and ``.lp`` files)."""
    snapshot = path / "snapshot.yaml" if path.is_dir() else path
    documents = [d for d in yaml.safe_load_all(snapshot.read_text()) if d is not None]
    return documents, load_policy([path] if path.is_dir() else [])


def main(argv: list[str]) -> int:
    source = Path(argv[0])
    name = argv[1] if len(argv) > 1 else source.stem
    documents, policy = read_case(source)
    small = minimize(documents, policy)
    try:
        check_case(small, policy, save=False)
    except FuzzFailure as failure:
        print(f"wrote {save_case(name, small, str(failure), policy, directory=source.parent)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
