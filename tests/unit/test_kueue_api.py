"""Kueue's API names are spelled once, in engine/kueue_api.py: no engine, adapter or bench
module spells one again, and the policies spell only names that module defines."""

from __future__ import annotations

import ast
import doctest
import re
from pathlib import Path

from clueue.engine import kueue_api

ROOT = Path(kueue_api.__file__).resolve().parent.parent
# Every name the module defines, as its value (the topology annotations by their modes).
NAMES = {v for k, v in vars(kueue_api).items() if k.isupper() and isinstance(v, str)} | {
    kueue_api.topology_annotation(m) for m in kueue_api.TOPOLOGY_MODES}


def test_the_examples_hold() -> None:
    assert doctest.testmod(kueue_api).failed == 0


def _docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (they may name what they describe)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                out.add(id(first.value))
    return out


def test_no_module_spells_a_kueue_name_again() -> None:
    again = []
    for package in ("engine", "adapters", "bench"):
        for path in sorted((ROOT / package).rglob("*.py")):
            if path.name == "kueue_api.py":
                continue
            tree = ast.parse(path.read_text(), str(path))
            docs = _docstrings(tree)
            again += [f"{path.relative_to(ROOT)}:{node.lineno}: {node.value!r}" for node in ast.walk(tree)
                      if isinstance(node, ast.Constant) and node.value in NAMES and id(node) not in docs]
    assert not again, "spelled again instead of imported from clueue.engine.kueue_api:\n" + "\n".join(again)


def test_the_policies_spell_only_names_kueue_api_defines() -> None:
    spelled = {m for lp in (ROOT / "policies").glob("*.lp")
               for m in re.findall(r'"([^"]*(?:kubernetes\.io|x-k8s\.io)/[^"]*)"', lp.read_text())}
    assert spelled, "topology.lp compares levels with the hostname label"
    assert spelled <= NAMES, f"the policies spell {sorted(spelled - NAMES)}, which engine/kueue_api.py does not define"
