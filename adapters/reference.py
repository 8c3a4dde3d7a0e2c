"""The facts reference, generated from the schema in clueue.engine.facts so it cannot drift."""

from __future__ import annotations

from clueue.engine.facts import FACTS_VERSION, PREDICATES

__all__ = ["facts_reference"]


def facts_reference() -> str:
    """Markdown: one section per predicate with its arguments, meaning and an example."""
    lines = [f"# Facts reference ({FACTS_VERSION})", "",
             "Every predicate the compiler emits. Strings are quoted; amounts are integers in the unit",
             "given by `resource_unit/2`; `node` is `cq(\"name\")` or `cohort(\"name\")`.", ""]
    for p in PREDICATES.values():
        args = ", ".join(f"`{name}`: {kind}" for name, kind in p.args)
        lines += [f"## `{p.name}/{len(p.args)}`", "", p.doc, "", f"Arguments: {args}", "",
                  "```prolog", p.example, "```", ""]
    return "\n".join(lines)
