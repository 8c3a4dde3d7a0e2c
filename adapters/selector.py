"""kubectl's ``-l/--selector`` syntax, parsed into the engine's :class:`LabelSelector`.

The grammar is the one of ``k8s.io/apimachinery/pkg/labels``: requirements separated by commas,
each ``key``, ``!key``, ``key=value``, ``key==value``, ``key!=value``, ``key in (v1,v2)`` or
``key notin (v1,v2)``. Keys and values are checked as Kubernetes checks label keys and values.
The numeric ``key>n``/``key<n`` forms are refused: no LabelSelector object can express them.
"""

from __future__ import annotations

import re

from clueue.engine.objects import LabelSelector, Requirement

__all__ = ["parse_label_selector"]

_TOKEN = re.compile(r"==|!=|=|!|,|\(|\)|<|>|[^\s,()=!<>]+")  # whitespace separates, and is dropped
_PUNCTUATION = frozenset(("==", "!=", "=", "!", ",", "(", ")", "<", ">"))
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?"
_DNS_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_KEY = re.compile(rf"(?:(?P<prefix>{_DNS_LABEL}(\.{_DNS_LABEL})*)/)?(?P<name>{_NAME})")
_VALUE = re.compile(rf"({_NAME})?")
_OPERATORS = {"=": "In", "==": "In", "!=": "NotIn", "in": "In", "notin": "NotIn"}


def parse_label_selector(text: str) -> LabelSelector:
    """The selector ``text`` as kubectl reads it; the empty text selects everything.

    >>> parse_label_selector("tier in (web, api),!canary").match_expressions[1]
    Requirement(key='canary', operator='DoesNotExist', values=())

    Raises:
        ValueError: the text is not a label selector; the message says where and why.
    """
    tokens = _TOKEN.findall(text)
    requirements: list[Requirement] = []
    while tokens:
        requirements.append(_requirement(tokens))
        if tokens:
            _expect(tokens, ",", "',' between requirements")
            if not tokens:
                raise ValueError("a requirement is missing after the last ','")
    return LabelSelector((), tuple(requirements))


def _requirement(tokens: list[str]) -> Requirement:
    if tokens[0] == "!":
        tokens.pop(0)
        return Requirement(_key(tokens), "DoesNotExist")
    key = _key(tokens)
    if not tokens or tokens[0] == ",":
        return Requirement(key, "Exists")
    op = tokens.pop(0)
    if op in ("<", ">"):
        raise ValueError(f"{key}{op}...: the numeric comparisons < and > are not supported")
    if op not in _OPERATORS:
        raise ValueError(f"after {key!r}: expected =, ==, !=, in or notin, got {op!r}")
    if op in ("in", "notin"):
        _expect(tokens, "(", f"'(' after {key} {op}")
        values = [_value(tokens, key)]
        while tokens and tokens[0] == ",":
            tokens.pop(0)
            values.append(_value(tokens, key))
        _expect(tokens, ")", f"')' closing the values of {key} {op}")
        return Requirement(key, _OPERATORS[op], tuple(values))
    value = "" if not tokens or tokens[0] in (",", ")") else _value(tokens, key)
    return Requirement(key, _OPERATORS[op], (value,))


def _key(tokens: list[str]) -> str:
    if not tokens or tokens[0] in _PUNCTUATION:
        raise ValueError(f"expected a label key, got {tokens[0]!r}" if tokens else "expected a label key at the end")
    key = tokens.pop(0)
    match = _KEY.fullmatch(key)
    if match is None or len(match["name"]) > 63 or len(match["prefix"] or "") > 253:
        raise ValueError(f"{key!r} is not a valid label key: an optional DNS prefix and '/', then at most 63 "
                         "letters, digits, '-', '_' or '.', beginning and ending with a letter or digit")
    return key


def _value(tokens: list[str], key: str) -> str:
    if not tokens or tokens[0] in _PUNCTUATION:
        raise ValueError(f"expected a value for {key}, got {tokens[0]!r}" if tokens else f"expected a value for {key}")
    value = tokens.pop(0)
    if _VALUE.fullmatch(value) is None or len(value) > 63:
        raise ValueError(f"{value!r} (for {key}) is not a valid label value: at most 63 letters, digits, '-', '_' "
                         "or '.', beginning and ending with a letter or digit")
    return value


def _expect(tokens: list[str], token: str, what: str) -> None:
    if not tokens or tokens[0] != token:
        raise ValueError(f"expected {what}, got {tokens[0]!r}" if tokens else f"expected {what} at the end")
    tokens.pop(0)
