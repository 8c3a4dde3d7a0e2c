"""How clueue is configured: which pods it manages and how long a cycle may take."""

from __future__ import annotations

from dataclasses import dataclass

from .objects import LabelSelector, Requirement

__all__ = ["Config", "DEFAULT_MANAGED_OWNERS"]

#: Controlling owners whose pods another integration queues (KEP-976: such pods are skipped).
DEFAULT_MANAGED_OWNERS: tuple[str, ...] = (
    "batch/Job", "jobset.x-k8s.io/JobSet", "kubeflow.org/*", "ray.io/*",
    "leaderworkerset.x-k8s.io/LeaderWorkerSet", "workload.codeflare.dev/AppWrapper",
)


@dataclass(frozen=True)
class Config:
    """Options of a decision cycle.

    Parameters:
        controller_namespace: where clueue itself runs; its pods are never queued.
        namespace_selector: namespaces whose pods are queued; ``None`` means every namespace
            except ``kube-system`` and the controller's own (the seed's default).
        pod_selector: pods that are queued, among those with a queue name.
        managed_owners: ``group/Kind`` (or ``group/*``) of controllers whose pods are skipped.
        time_budget: seconds the solver may spend on one cycle.
    """

    controller_namespace: str = "clueue-system"
    namespace_selector: LabelSelector | None = None
    pod_selector: LabelSelector = LabelSelector()
    managed_owners: tuple[str, ...] = DEFAULT_MANAGED_OWNERS
    time_budget: float = 10.0

    def effective_namespace_selector(self) -> LabelSelector:
        if self.namespace_selector is not None:
            return self.namespace_selector
        return LabelSelector(match_expressions=(Requirement(
            "kubernetes.io/metadata.name", "NotIn", ("kube-system", self.controller_namespace)),))

    def owner_is_managed(self, owner: str) -> bool:
        group, _, kind = owner.partition("/")
        return any(m == owner or (m.endswith("/*") and m[:-2] == group) for m in self.managed_owners)
