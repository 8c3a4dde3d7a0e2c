"""Which workloads ``clueue plan`` and ``clueue explain`` show: ``-n/--namespace`` and ``-l/--selector``.

A cycle always decides over the whole snapshot (a queue's quota is shared whatever one looks
at); a scope only narrows what is printed, as ``kubectl get -n NS -l SELECTOR`` does.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from clueue.engine import Snapshot
from clueue.engine.objects import LabelSelector
from clueue.engine.plan import PodGroupEntry, WorkloadEntry
from clueue.engine.kueue_api import POD_GROUP_LABEL

__all__ = ["Scope"]


@dataclass(frozen=True)
class Scope:
    """Workloads of one ``namespace`` (None: all) whose labels match ``selector`` (None: any).

    A Kueue Workload object matches by its own labels; a pod or pod group by the labels of its
    pods: it is shown if one of its pods matches.
    """

    namespace: str | None = None
    selector: LabelSelector | None = None
    selector_text: str = ""  # as given, for messages and the plan's metadata

    @property
    def narrows(self) -> bool:
        """True if some workload might not be shown."""
        return self.namespace is not None or self.selector is not None

    def describe(self) -> str:
        """``in namespace NS, matching SELECTOR``, or "" for every workload."""
        parts = ([f"in namespace {self.namespace}"] if self.namespace is not None else []) + (
            [f"matching {self.selector_text}"] if self.selector is not None else [])
        return ", ".join(parts)

    def to_dict(self, total: int) -> dict[str, Any]:
        """The plan's ``metadata.filter``: what narrowed it, and how many workloads the whole plan has."""
        out: dict[str, Any] = {}
        if self.namespace is not None:
            out["namespace"] = self.namespace
        if self.selector is not None:
            out["selector"] = self.selector_text
        return {**out, "workloads": total}

    def shows(self, entry: WorkloadEntry, snapshot: Snapshot) -> bool:
        """Whether ``entry`` (of a plan over ``snapshot``) is shown."""
        namespace = entry.name.split("/", 1)[0]
        if self.namespace is not None and namespace != self.namespace:
            return False
        return self.selector is None or any(self.selector.matches(labels)
                                            for labels in _labels(entry, namespace, snapshot))


    def shows_group(self, entry: PodGroupEntry, snapshot: Snapshot) -> bool:
        """Whether PodGroup ``entry`` is shown: of the namespace, and its own labels or those
        of one of its pods match the selector."""
        namespace, name = entry.name.split("/", 1)
        if self.namespace is not None and namespace != self.namespace:
            return False
        if self.selector is None:
            return True
        group = snapshot.pod_groups.get(entry.name)
        labels = [group.labels] if group is not None else []
        labels += [p.labels for p in snapshot.pods.values()
                   if p.namespace == namespace and p.labels.get(POD_GROUP_LABEL) == name]
        return any(self.selector.matches(lbls) for lbls in labels)


def _labels(entry: WorkloadEntry, namespace: str, snapshot: Snapshot) -> Iterable[Mapping[str, str]]:
    if entry.origin == "workload":
        obj = snapshot.workloads.get(entry.name)
        return [obj.labels] if obj is not None else []
    pods = (snapshot.pods.get(f"{namespace}/{name}") for name, _ in entry.pods)
    return [pod.labels for pod in pods if pod is not None]
