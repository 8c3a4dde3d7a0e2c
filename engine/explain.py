"""Turning the explanation pass's reason terms into reasons with quantities and words."""

from __future__ import annotations

from fractions import Fraction
from typing import Any, Iterable

from .compiler import Compiled
from .facts import Node
from .quantity import format_quantity
from .reasons import BY_TERM, Reason, make_reason
from .solver import Term

__all__ = ["decode_reasons"]

_AMOUNTS = ("need", "unusedNominal", "lent", "borrowable", "short", "capacity", "held", "free")


def _why(term: Any) -> str:
    """Words for a flavor_unfit cause."""
    if isinstance(term, Term) and term.name == "untolerated_taint":
        key, value, effect = term.args
        return f"pods do not tolerate its taint {key}{'=' + value if value else ''}:{effect}"
    if isinstance(term, Term) and term.name == "node_label":
        key, value = term.args
        return f"its nodes have {key}={value}, which the pods' node selector or affinity excludes"
    return str(term)


def _reserved(compiled: Compiled, args: tuple[Any, ...]) -> dict[str, Any]:
    """What InQueue PodGroups hold in the quota tree, flavor and resource a shortage is of
    (the ``reserved`` and ``reservedFor`` details; none when they hold nothing there)."""
    cluster_queue, flavor, resource = args[:3]
    tree = compiled.units.node_tree.get(Node("cq", cluster_queue))
    held = compiled.reserved.get((tree, flavor, resource), ())
    if not held:
        return {}
    return {"reserved": format_quantity(sum((q for _, q in held), Fraction(0))),
            "reservedFor": sorted({g for g, _ in held})}


def decode_reasons(terms: Iterable[Any], compiled: Compiled) -> list[Reason]:
    """Reasons from ``reason/2`` terms, amounts converted back to Kubernetes quantities.

    Terms the catalog does not know (a user policy's own) become reasons with their term as
    code, so that nothing a policy says is dropped.
    """
    out = []
    terms = list(terms)
    # where those ahead in line take added quota first (line.py): said with the shortfall
    line = {t.args[:3]: t.args[3:] for t in terms if isinstance(t, Term) and t.name == "in_line"}
    for term in terms:
        if not isinstance(term, Term):
            term = Term(str(term))
        if term.name == "in_line":
            continue
        kind = BY_TERM.get(term.name)
        if kind is None or len(kind.args) != len(term.args):
            out.append(Reason(term.name, f"policy reason {term}", {"term": str(term)}))
            continue
        details = dict(zip(kind.args, term.args))
        for name in _AMOUNTS:
            if name in details:
                details[name] = format_quantity(compiled.amount(details["clusterQueue"], details["resource"],
                                                                  details[name]))
        if "why" in details:
            details["why"] = _why(details["why"])
        if kind.code == "InsufficientQuota":
            details.update(_reserved(compiled, term.args))
            if term.args[:3] in line:
                position, ahead, count = line[term.args[:3]]
                details.update(position=position, ahead=list(ahead), aheadCount=count)
        out.append(make_reason(kind.code, **details))
    return out
