"""Rendering plans for people (Jinja2 templates) and for programs (JSON, YAML)."""

from __future__ import annotations

import json
from typing import Any

import jinja2
import yaml

from clueue.engine import Plan

__all__ = ["render_plan", "render_explanation", "dump"]

_env = jinja2.Environment(loader=jinja2.PackageLoader("clueue.adapters", "templates"),
                          undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)


def dump(data: Any, fmt: str) -> str:
    """``data`` as JSON or YAML, keys in a stable order."""
    if fmt == "json":
        return json.dumps(data, indent=2) + "\n"
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False, width=120)


def render_plan(plan: Plan, fmt: str) -> str:
    data = plan.to_dict()
    if fmt == "text":
        return _env.get_template("plan.txt.j2").render(plan=data)
    return dump(data, fmt)


def render_explanation(plan: Plan, workload: str, fmt: str) -> str:
    """One workload's decision with its reasons and the actions that apply it.

    Raises:
        KeyError: no such workload in the plan.
    """
    entry = plan.workload(workload).to_dict()
    actions = [a.to_dict() for a in plan.actions if a.workload == entry["name"]]
    if fmt == "text":
        return _env.get_template("explain.txt.j2").render(w=entry, actions=actions,
                                                          candidates=plan.solver.candidates) + "\n"
    return dump({**entry, "actions": actions}, fmt)
