"""Policies: the built-in rule files and a user's own, as data.

A policy is a set of named ``.lp`` files. The built-in files ship in ``clueue.policies``; a
user's directory adds files, and a user file with the same name as a built-in one replaces that
rule group. Policy files are data, not code: ``#script``, ``#include`` and external function
calls (``@name(...)``) are refused with the file and line.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Iterable

from .errors import PolicyError

__all__ = ["PolicyFile", "Policy", "load_policy", "builtin_files"]


@dataclass(frozen=True)
class PolicyFile:
    name: str  # e.g. "quota.lp": the rule group it defines
    path: str  # where it was read from, for messages
    text: str


@dataclass(frozen=True)
class Policy:
    files: tuple[PolicyFile, ...]

    def digest(self) -> str:
        h = hashlib.sha256()
        for f in self.files:
            h.update(f"{f.name}\0{f.text}\0".encode())
        return "sha256:" + h.hexdigest()[:16]


_COMMENT_OR_STRING = re.compile(r'%\*.*?\*%|%[^\n]*|"(?:\\.|[^"\\])*"', re.S)
_FORBIDDEN = (
    (re.compile(r"#script\b"), "#script runs code; policy files are data"),
    (re.compile(r"#include\b"), "#include reads other files; pass every policy file with --policy instead"),
    (re.compile(r"@\s*[a-z_][A-Za-z0-9_']*\s*\("), "external function calls (@name(...)) run code; use ASP arithmetic"),
)


def _blank(match: re.Match[str]) -> str:
    # Keep newlines so that line numbers stay right; strings keep their quotes.
    return "".join(c if c == "\n" else " " for c in match.group(0))


def check_safety(file: PolicyFile) -> None:
    """Refuse code execution and file access in a policy file.

    Raises:
        PolicyError: ``path:line:column: message`` for the first forbidden construct.
    """
    stripped = _COMMENT_OR_STRING.sub(_blank, file.text)
    for pattern, why in _FORBIDDEN:
        m = pattern.search(stripped)
        if m:
            line = stripped.count("\n", 0, m.start()) + 1
            col = m.start() - (stripped.rfind("\n", 0, m.start()) + 1) + 1
            raise PolicyError(f"{file.path}:{line}:{col}: forbidden: {why}")


def builtin_files() -> list[PolicyFile]:
    """The policy files that ship with clueue, in name order."""
    root = resources.files("clueue.policies")
    return [PolicyFile(p.name, f"<builtin>/{p.name}", p.read_text(encoding="utf-8"))
            for p in sorted(root.iterdir(), key=lambda p: p.name) if p.name.endswith(".lp")]


def load_policy(paths: Iterable[str | Path] = ()) -> Policy:
    """The built-in policy extended (or overridden, file by file) by the given files and directories.

    Raises:
        PolicyError: a path does not exist, holds no ``.lp`` file, or a file is forbidden.
    """
    files = {f.name: f for f in builtin_files()}
    for raw in paths:
        path = Path(raw)
        if path.is_dir():
            found = sorted(path.glob("*.lp"))
            if not found:
                raise PolicyError(f"{path}: no .lp files in this directory")
        elif path.is_file():
            found = [path]
        else:
            raise PolicyError(f"{path}: no such policy file or directory")
        for p in found:
            try:
                text = p.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as e:
                raise PolicyError(f"{p}: cannot read: {e}") from None
            files[p.name] = PolicyFile(p.name, str(p), text)
    for f in files.values():
        check_safety(f)
    return Policy(tuple(files[name] for name in sorted(files)))
