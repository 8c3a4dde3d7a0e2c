"""The built-in rule files say truly what they read and derive.

Each ``policies/*.lp`` file opens with a header whose ``Reads:`` and ``Derives:`` lines name
predicates as ``name/arity``, and introduces every predicate it derives with a line
``%%% name(A,B) - meaning`` (docs/policies.md). A policy author reads these to know what a rule
of theirs may use; here they are checked against the rule heads and bodies that the engine's
policy outline (:func:`clueue.engine.solver.outline_policy`) finds in each file:

- every predicate a file derives has a ``%%%`` line, and every ``%%%`` line names one it derives;
- ``Derives:`` names exactly the predicates the file derives;
- ``Reads:`` names only predicates the file reads, and names every one it reads that another
  built-in file derives (input facts may be described in words instead: docs/facts.md lists them).
"""

from __future__ import annotations

import re
from collections import defaultdict
from functools import cache

import pytest

from clueue.engine.policy import builtin_files, Policy
from clueue.engine.solver import outline_policy

Signature = tuple[str, int]

_NAMED = re.compile(r"\b([a-z_][A-Za-z0-9_]*)/(\d+)\b")
_LABEL = re.compile(r"^% ?([A-Z][a-z]+):\s*(.*)$")
_TERM = r"-?[a-z_][A-Za-z0-9_]*(?:\((?:[^()]|\([^()]*\))*\))?"
_INTRO = re.compile(rf"^%%% ({_TERM}(?:\s*/\s*{_TERM})*) - ")
_SHOW = re.compile(r"^#show ([a-z_]\w*)/(\d+)\.", re.M)


def _arity(term: str) -> Signature:
    """``name(A,f(B,C))`` -> ("name", 2)."""
    name, _, args = term.strip().partition("(")
    if not args.rstrip(")").strip():
        return name, 0
    depth, count = 0, 1
    for ch in args[:-1]:
        depth += ch in "(["
        depth -= ch in ")]"
        count += ch == "," and depth == 0
    return name, count


def _header(text: str) -> dict[str, str]:
    """The labelled blocks of a file's opening comment (``Reads:``, ``Derives:``, ``Part:``, ...)."""
    blocks: dict[str, list[str]] = {}
    label = None
    for line in text.splitlines():
        if not line.startswith("%"):
            break
        found = _LABEL.match(line)
        if found and found.group(1) in ("Reads", "Derives", "Part", "Assumes"):
            label = found.group(1)
            blocks[label] = [found.group(2)]
        elif label and line.startswith("%   "):  # an indented line continues the block
            blocks[label].append(line[1:].strip())
        else:
            label = None
    return {k: " ".join(v) for k, v in blocks.items()}


def _intros(text: str) -> set[Signature]:
    out = set()
    for line in text.splitlines():
        found = _INTRO.match(line)
        if found:
            out |= {_arity(t) for t in re.split(r"\s*/\s*(?=-?[a-z_])", found.group(1))}
    return out


@cache
def _files() -> dict[str, tuple[str, set[Signature], set[Signature]]]:
    """name -> (text, the predicates it derives, those it reads), for every built-in file."""
    files = builtin_files()
    outline = outline_policy(Policy(tuple(files)), ground=False)
    heads: dict[str, set[Signature]] = defaultdict(set)
    reads: dict[str, set[Signature]] = defaultdict(set)
    for f in outline.files:
        for atom in f.atoms:
            if atom.role == "head":
                heads[f.path].add((atom.name, atom.arity))
            elif atom.role == "body":
                reads[f.path].add((atom.name, atom.arity))
    out = {}
    for f in files:
        shown = {(name, int(arity)) for name, arity in _SHOW.findall(f.text)}  # `#show p/n.` reads p/n
        out[f.name] = (f.text, heads[f.path], reads[f.path] | shown)
    return out


def _text(signatures: set[Signature]) -> str:
    return ", ".join(f"{name}/{arity}" for name, arity in sorted(signatures)) or "none"


FILES = sorted(_files())


def test_every_rule_file_is_checked():
    assert len(FILES) >= 14 and "preemption.lp" in FILES


@pytest.mark.parametrize("name", FILES)
def test_every_derived_predicate_has_its_line(name):
    text, derived, _ = _files()[name]
    introduced = _intros(text)
    assert derived - introduced == set(), f"{name}: derived without a %%% line: {_text(derived - introduced)}"
    assert introduced - derived == set(), f"{name}: a %%% line for what it never derives: {_text(introduced - derived)}"


@pytest.mark.parametrize("name", FILES)
def test_derives_names_what_the_file_derives(name):
    text, derived, _ = _files()[name]
    header = _header(text)
    assert "Derives" in header, f"{name}: no 'Derives:' line in its header"
    named = {(n, int(a)) for n, a in _NAMED.findall(header["Derives"])}
    assert derived - named == set(), f"{name}: Derives: leaves out {_text(derived - named)}"
    assert named - derived == set(), f"{name}: Derives: names what it does not derive: {_text(named - derived)}"


@pytest.mark.parametrize("name", FILES)
def test_reads_names_what_the_file_reads_of_other_files(name):
    files = _files()
    text, derived, read = files[name]
    header = _header(text)
    assert "Reads" in header, f"{name}: no 'Reads:' line in its header"
    named = {(n, int(a)) for n, a in _NAMED.findall(header["Reads"])}
    assert named - read == set(), f"{name}: Reads: names what it never reads: {_text(named - read)}"
    of_others = {p for p in read - derived if any(p in d for other, (_, d, _) in files.items() if other != name)}
    assert of_others - named == set(), f"{name}: Reads: leaves out, of other files: {_text(of_others - named)}"
