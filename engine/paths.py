"""Files named on a command line: a file, or a directory of files of some kinds, read as text."""

from __future__ import annotations

from pathlib import Path

from .errors import ClueueError

__all__ = ["expand_path", "read_text"]


def expand_path(raw: str | Path, *, suffixes: tuple[str, ...], recursive: bool, what: str,
                error: type[ClueueError]) -> list[Path]:
    """``raw`` itself if it is a file, else the files with one of ``suffixes`` in the directory
    (below it, with ``recursive``), sorted.

    Raises:
        error: ``raw`` is neither a file nor a directory ("<raw>: no such <what> or directory").
    """
    path = Path(raw)
    if path.is_dir():
        found = path.rglob("*") if recursive else path.iterdir()
        return sorted(p for p in found if p.is_file() and p.suffix in suffixes)
    if path.is_file():
        return [path]
    raise error(f"{raw}: no such {what} or directory")


def read_text(path: Path, *, error: type[ClueueError]) -> str:
    """The file's text (UTF-8).

    Raises:
        error: it cannot be read ("<path>: cannot read: ...").
    """
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise error(f"{path}: cannot read: {e}") from None
