"""The facts schema: every predicate the compiler emits, declared once.

This table is the documented, versioned contract between the compiler and policy files: the
facts reference (``clueue facts --reference``) is generated from it, ``#defined`` directives for
optional inputs are generated from it, and the compiler can only emit predicates declared here.

Argument types: ``str`` is a quoted string, ``int`` an integer (resource amounts are integers
in the unit of the resource in its quota tree, see ``tree_unit/3``), ``node`` a term ``cq("name")`` or
``cohort("name")``.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Iterable, Mapping, Union

__all__ = ["FACTS_VERSION", "Predicate", "PREDICATES", "Node", "fact_text", "render_facts", "value_text"]

FACTS_VERSION = "clueue.dev/facts/v1"


@dataclass(frozen=True)
class Node:
    """A node of the quota tree: ``cq("name")`` or ``cohort("name")``."""

    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind}({_quote(self.name)})"


Value = Union[str, int, Node]


@dataclass(frozen=True)
class Predicate:
    name: str
    args: tuple[tuple[str, str], ...]  # (argument name, type)
    doc: str
    example: str

    @property
    def signature(self) -> str:
        return f"{self.name}({','.join(a for a, _ in self.args)})"


def _p(signature: str, types: str, doc: str, example: str) -> Predicate:
    name, _, rest = signature.partition("(")
    names = [a.strip() for a in rest.rstrip(")").split(",")]
    kinds = types.split()
    assert len(names) == len(kinds), signature
    return Predicate(name, tuple(zip(names, kinds)), doc, example)


PREDICATES: dict[str, Predicate] = {p.name: p for p in (
    # -- flavors ------------------------------------------------------------------------------
    _p("flavor(F)", "str", "ResourceFlavor F exists.", 'flavor("on-demand").'),
    _p("flavor_label(F,Key,Value)", "str str str", "Nodes of flavor F carry label Key=Value (spec.nodeLabels).",
       'flavor_label("spot","cloud.example/capacity","spot").'),
    _p("flavor_taint(F,Key,Value,Effect)", "str str str str",
       "Nodes of flavor F carry a NoSchedule or NoExecute taint (spec.nodeTaints).",
       'flavor_taint("spot","spot","true","NoSchedule").'),
    # -- queues and the quota tree ------------------------------------------------------------
    _p("cluster_queue(Q)", "str", "ClusterQueue Q exists.", 'cluster_queue("team-a").'),
    _p("cq_stopped(Q)", "str", "ClusterQueue Q has a stopPolicy other than None: it admits nothing new.",
       'cq_stopped("team-a").'),
    _p("cq_check_inactive(Q,Check,Why)", "str str str",
       "ClusterQueue Q requires AdmissionCheck Check, which does not exist or is not Active (Why, in words): "
       "as Kueue, Q is inactive and admits nothing new.",
       'cq_check_inactive("team-a","prov-req","does not exist").'),
    _p("cohort(C)", "str", "Cohort C exists, as an object or because a ClusterQueue or Cohort names it.",
       'cohort("eng").'),
    _p("queue_parent(N,P)", "node node", "Node N of the quota tree is a child of cohort P.",
       'queue_parent(cq("team-a"),cohort("eng")).'),
    _p("quota(N,F,R,Amount)", "node str str int", "Nominal quota of node N for resource R in flavor F.",
       'quota(cq("team-a"),"on-demand","cpu",8).'),
    _p("borrowing_limit(N,F,R,Amount)", "node str str int",
       "Node N may use at most Amount beyond its nominal quota (unset: no limit but the cohort's).",
       'borrowing_limit(cq("team-a"),"on-demand","cpu",4).'),
    _p("lending_limit(N,F,R,Amount)", "node str str int",
       "At most Amount of node N's quota may be lent; the rest is guaranteed to N.",
       'lending_limit(cq("team-b"),"on-demand","cpu",2).'),
    _p("cq_flavor(Q,G,F,Pos)", "str int str int",
       "Resource group G of ClusterQueue Q lists flavor F at position Pos (0 is tried first).",
       'cq_flavor("team-a",0,"on-demand",0).'),
    _p("cq_resource(Q,G,R)", "str int str", "Resource group G of ClusterQueue Q covers resource R.",
       'cq_resource("team-a",0,"cpu").'),
    _p("cq_namespace(Q,NS)", "str str", "The namespaceSelector of ClusterQueue Q selects namespace NS "
       "(emitted for the pairs a LocalQueue of NS pointing to Q connects).",
       'cq_namespace("team-a","research").'),
    _p("queueing_strategy(Q,S)", "str str", "ClusterQueue Q orders its queue by S: BestEffortFIFO or StrictFIFO.",
       'queueing_strategy("team-a","StrictFIFO").'),
    _p("flavor_fungibility(Q,When,Policy)", "str str str",
       "flavorFungibility of ClusterQueue Q: When is whenCanBorrow or whenCanPreempt.",
       'flavor_fungibility("team-a","whenCanBorrow","TryNextFlavor").'),
    _p("preemption(Q,Kind,Policy)", "str str str",
       "spec.preemption of ClusterQueue Q: Kind withinClusterQueue with Policy LowerPriority or "
       "LowerOrNewerEqualPriority, Kind reclaimWithinCohort with Policy LowerPriority or Any, or Kind "
       "borrowWithinCohort (its policy) with Policy LowerPriority (absent: Never).",
       'preemption("team-a","withinClusterQueue","LowerPriority").'),
    _p("borrow_max_priority(Q,P)", "str int",
       "spec.preemption.borrowWithinCohort.maxPriorityThreshold of ClusterQueue Q: preempting while "
       "borrowing takes only workloads of other queues with a priority of at most P.",
       'borrow_max_priority("team-a",100).'),
    _p("local_queue(NS,LQ,Q)", "str str str", "LocalQueue NS/LQ points to ClusterQueue Q.",
       'local_queue("research","main","team-a").'),
    _p("lq_stopped(NS,LQ)", "str str", "LocalQueue NS/LQ has a stopPolicy other than None: it admits nothing new.",
       'lq_stopped("research","main").'),
    # -- workloads ------------------------------------------------------------------------------
    _p("workload(W)", "str", "Workload W (namespace/name) exists and is not finished.", 'workload("research/train").'),
    _p("workload_namespace(W,NS)", "str str", "Workload W lives in namespace NS.",
       'workload_namespace("research/train","research").'),
    _p("workload_queue(W,LQ)", "str str", "Workload W is queued in LocalQueue LQ of its namespace.",
       'workload_queue("research/train","main").'),
    _p("workload_priority(W,P)", "str int", "Workload W has priority P.", 'workload_priority("research/train",100).'),
    _p("workload_created(W,T)", "str int", "W entered its queue at T (seconds since the epoch; 0 if unknown): its creation, or when it "
       "was requeued after an eviction that Kueue orders by its time (docs/pods-ready.md).",
       'workload_created("research/train",1767225600).'),
    _p("workload_tiebreak(W,N)", "str int", "Position N of W in name order: the last ordering tie-break.",
       'workload_tiebreak("research/train",7).'),
    _p("pod_group_member(W)", "str", "W is the gang of a coscheduling PodGroup: at equal priority, lone pods and "
       "other workloads go first (the coscheduling QueueSort).", 'pod_group_member("research/podgroup-mpi").'),
    _p("held(W)", "str", "The compiler holds W back this cycle (e.g. an incomplete pod group); see its reasons.",
       'held("research/train").'),
    _p("pod_set(W,PS,Count)", "str str int", "Workload W has pod set PS of Count pods.",
       'pod_set("research/train","workers",4).'),
    _p("pod_request(W,PS,R,Amount)", "str str str int", "Each pod of pod set PS requests Amount of resource R.",
       'pod_request("research/train","workers","cpu",2).'),
    _p("pod_set_node_label(W,PS,Key,Value)", "str str str str",
       "Pods of PS require node label Key to be Value (one fact per allowed value).",
       'pod_set_node_label("research/train","workers","cloud.example/capacity","spot").'),
    _p("pod_set_toleration(W,PS,Key,Op,Value,Effect)", "str str str str str str",
       "Pods of PS tolerate taints matching Key/Op/Value/Effect ('' key with Exists: every key; '' effect: every effect).",
       'pod_set_toleration("research/train","workers","spot","Exists","","NoSchedule").'),
    _p("admitted(W)", "str", "W was admitted before this cycle and keeps its quota.", 'admitted("research/serve").'),
    _p("admitted_cq(W,Q)", "str str",
       "Admitted W holds its quota in ClusterQueue Q, the one its admission names (status.admission.clusterQueue), "
       "wherever its LocalQueue points now.", 'admitted_cq("research/serve","research").'),
    _p("workload_reserved(W,T)", "str int",
       "Admitted W's quota was reserved at T (its QuotaReserved condition's lastTransitionTime, else its "
       "creation; seconds since the epoch): of equally good victims the most recently admitted go.",
       'workload_reserved("research/serve",1767229200).'),
    _p("eviction_order(Q,W,N)", "str str int",
       "Admitted W is the N-th (from 0) workload of ClusterQueue Q that preemption takes: "
       "lower priority first, then the most recently admitted (workload_reserved/2), then by name.", 'eviction_order("team-a","research/serve",0).'),
    # -- fair sharing (docs/fair-sharing.md; only when it is on) --------------------------------
    _p("fair_strategy(S,I)", "str int",
       "Fair sharing is on; S is its I-th preemption strategy (from 0): LessThanOrEqualToFinalShare or "
       "LessThanInitialShare.", 'fair_strategy("LessThanOrEqualToFinalShare",0).'),
    _p("fair_weight(N,Milli)", "node int", "Node N (below a cohort) has fairSharing.weight Milli/1000.",
       'fair_weight(cq("team-a"),1000).'),
    _p("fair_share(N,S)", "node int",
       "Node N's share now: the largest over resources of what it uses above its subtree quota over what its "
       "parent can lend, divided by its weight, in millionths, rounded up (2**29 and above: weight 0 and borrowing).",
       'fair_share(cq("team-a"),250000).'),
    _p("fair_rank(W,Top,Own,Lq)", "str int int int",
       "Pending W orders by: Top, the share after admitting W of its ClusterQueue's ancestor just below the "
       "root (the ClusterQueue itself in a flat cohort); Own, its ClusterQueue's share after; Lq, its LocalQueue's "
       "position by weighted consumed usage in its ClusterQueue (admission fair sharing; 0 otherwise).",
       'fair_rank("team-a/train",0,0,1).'),
    _p("fair_preemptor_share(P,N,S)", "str node int",
       "Pending P, the head of a ClusterQueue that reclaims within its cohort (its first workload not held), would give node N on its path the share S "
       "once admitted (in its ClusterQueue's first flavors).", 'fair_preemptor_share("team-a/train",cq("team-a"),400000).'),
    _p("fair_victim_share(V,N,Old,New)", "str node int int",
       "Admitted V is below node N, whose share is Old now and New once V is evicted.",
       'fair_victim_share("team-b/serve",cq("team-b"),600000,300000).'),
    _p("admitted_flavor(W,PS,R,F)", "str str str str", "Admitted W holds resource R of pod set PS in flavor F.",
       'admitted_flavor("research/serve","main","cpu","on-demand").'),
    _p("admitted_count(W,PS,N)", "str str int",
       "N pods of admitted pod set PS hold quota (succeeded pods are reclaimable and excluded).",
       'admitted_count("research/serve","main",2).'),
    _p("reservation(G,Q,F,R,Amount)", "str str str str int",
       "InQueue PodGroup G (namespace/name) holds Amount of resource R in flavor F of ClusterQueue Q until its "
       "gang is admitted (delay-pod-creation, docs/podgroups.md): it counts as usage of Q.",
       'reservation("research/mpi","team-a","on-demand","cpu",16).'),
    _p("reservation_gang(G,W)", "str str",
       "Workload W is the gang of InQueue PodGroup G: admitting W frees what G holds (W takes its place).",
       'reservation_gang("research/mpi","research/podgroup-mpi").'),
    # -- nodes (only when the snapshot has Nodes; see docs/placement.md) --------------------------
    _p("node_count(N)", "int",
       "The snapshot has Nodes, N of them schedulable: pods of admitted workloads are placed on nodes "
       "(emitted whenever the snapshot has Nodes, even N = 0).", 'node_count(1000).'),
    _p("node_class(C,Count)", "int int",
       "Count schedulable nodes form node class C: alike in free resources, the labels flavors and pod sets ask "
       "about, taints, and whether any pod runs on them.", 'node_class(0,12).'),
    _p("class_free(C,R,Amount)", "int str int",
       "Each node of class C has Amount of resource R free (allocatable less what the pods on it take), "
       "in the node unit of R (node_unit/2). Besides requested resources, R may be one that placement alone counts "
       "(engine/nodematch.py): \"pods\" (the node's pods limit), \"hostport/<protocol>/<port>\", \"anti-affinity/<n>\".", 'class_free(0,"nvidia.com/gpu",8).'),
    _p("class_idle(C)", "int", "No pod runs on the nodes of class C: they are wholly free.", 'class_idle(0).'),
    _p("node_unit(R,Unit)", "str str",
       "Node amounts of R (class_free/3, node_request/4) are integers in Unit (a Kubernetes quantity).",
       'node_unit("memory","1Gi").'),
    _p("node_request(W,PS,R,Amount)", "str str str int",
       "Each pod of pending pod set PS takes Amount of R, in the node unit of R (rounded up): what it requests, "
       "and 1 of each placement-only resource (class_free/3) it takes.",
       'node_request("research/train","workers","nvidia.com/gpu",8).'),
    _p("fits(W,PS,F,C,PerNode)", "str str str int int",
       "With flavor F, PerNode pods of pending pod set PS fit on one node of class C (its labels, taints, "
       "node selector and required node affinity, and free resources all allow it).",
       'fits("research/train","workers","a100",0,1).'),
    # -- topology-aware scheduling (only when the snapshot has Nodes; see docs/placement.md) -------
    _p("flavor_topology(F,T)", "str str",
       "ResourceFlavor F names Topology T in spec.topologyName: its pods are placed topology-aware (a T that "
       "has no topology_level/3 does not exist).", 'flavor_topology("tas","default").'),
    _p("topology_level(T,Level,I)", "str str int",
       "Level I of Topology T (0 the highest) is the node label Level.",
       'topology_level("default","cloud.provider.com/topology-rack",1).'),
    _p("pod_set_topology(W,PS,Mode,Level)", "str str str str",
       "Pending pod set PS asks, by annotation kueue.x-k8s.io/podset-<Mode>-topology, for topology-aware "
       "placement: Mode is required (all pods in one domain of Level), preferred (as few domains as can be) or "
       "unconstrained (Level \"\").",
       'pod_set_topology("research/train","workers","required","cloud.provider.com/topology-rack").'),
    _p("pod_set_slice(W,PS,Level,Size)", "str str str int",
       "The pods of pending pod set PS go in slices of Size pods, each slice in one domain of Level "
       "(kueue.x-k8s.io/podset-slice-required-topology and podset-slice-size).",
       'pod_set_slice("research/train","workers","kubernetes.io/hostname",4).'),
    _p("class_domain(T,Level,C,D)", "str str int str",
       "The nodes of class C lie in domain D at level Level of Topology T: D is the values of the labels of "
       "Level and the levels above it, joined by \"/\". Only for the levels pending pod sets ask for (never "
       "the hostname level: a node is its own domain there).",
       'class_domain("default","cloud.provider.com/topology-rack",0,"b1/r1").'),
    _p("domain_cost(W,PS,T,Level,Cost)", "str str str str int",
       "Preferred pod set PS, placed in a flavor of Topology T, costs Cost per domain it uses at level Level "
       "(its preferred level and those above it; a level up costs more than all domains below it).",
       'domain_cost("research/train","workers","default","cloud.provider.com/topology-block",9).'),
    _p("unplaceable(W,C)", "str int",
       "The engine's node-by-node check found that W's pods did not fit on the nodes of class C beside the "
       "others placed there in an earlier solve of this cycle: W is not placed on class C (a nogood).",
       'unplaceable("research/train",0).'),
    # -- dispatch to MultiKueue's workers (the dispatch pass only; see docs/dispatch.md) -----------
    _p("worker(K)", "str", "Worker cluster K is named by the MultiKueueConfig of a workload to dispatch.",
       'worker("worker-a").'),
    _p("worker_active(K)", "str", "The MultiKueueCluster of K is Active: copies can be made there.",
       'worker_active("worker-a").'),
    _p("worker_age(K,S)", "str int", "What is known of K's objects was read S seconds ago.",
       'worker_age("worker-a",12).'),
    _p("worker_stale(K)", "str", "K's data is older than multiKueue.staleAfterSeconds: a fit predicted there is "
       "uncertain.", 'worker_stale("worker-c").'),
    _p("worker_order(K,N)", "str int", "K is the N-th worker by name (from 0): the last tie-break.",
       'worker_order("worker-a",0).'),
    _p("worker_label(K,Key,Value)", "str str str", "The MultiKueueCluster of K carries label Key=Value.",
       'worker_label("worker-a","region","eu").'),
    _p("worker_flavor(K,Q,G,F,Pos)", "str str int str int",
       "On worker K, resource group G of ClusterQueue Q lists flavor F at position Pos.",
       'worker_flavor("worker-a","team-a",0,"a100",0).'),
    _p("worker_resource(K,Q,G,R)", "str str int str", "On worker K, resource group G of ClusterQueue Q covers R.",
       'worker_resource("worker-a","team-a",0,"nvidia.com/gpu").'),
    _p("worker_free(K,Q,F,R,Amount)", "str str str str int",
       "On worker K, ClusterQueue Q has Amount of R free in flavor F (nominal quota less what its admitted "
       "workloads hold), in dispatch_unit/2.", 'worker_free("worker-a","team-a","a100","nvidia.com/gpu",4).'),
    _p("worker_nodes(K)", "str", "Worker K reports Nodes: worker_nodes_free/3 bounds what fits there.",
       'worker_nodes("worker-a").'),
    _p("worker_nodes_free(K,R,Amount)", "str str int",
       "The schedulable nodes of K have Amount of R free in all (allocatable less the requests of their pods).",
       'worker_nodes_free("worker-a","cpu",96).'),
    _p("worker_node_largest(K,R,Amount)", "str str int", "The roomiest node of K has Amount of R free.",
       'worker_node_largest("worker-a","cpu",32).'),
    _p("dispatch(W)", "str", "W holds the manager's quota (reserved now or before) with its MultiKueue check "
       "Pending and no worker yet: it is dispatched this cycle.", 'dispatch("team-a/train").'),
    _p("dispatch_rank(W,N)", "str int", "W is the N-th workload to dispatch (from 0): priority, then age, then name.",
       'dispatch_rank("team-a/train",0).'),
    _p("dispatch_to(W,K)", "str str", "K is a cluster of W's MultiKueueConfig.", 'dispatch_to("team-a/train","worker-a").'),
    _p("dispatch_cq(W,K,Q)", "str str str", "On worker K, the LocalQueue of W's name and namespace leads to "
       "ClusterQueue Q.", 'dispatch_cq("team-a/train","worker-a","team-a").'),
    _p("dispatch_need(W,R,Amount)", "str str int", "W asks Amount of R in all (pods times requests), in "
       "dispatch_unit/2, rounded up.", 'dispatch_need("team-a/train","nvidia.com/gpu",8).'),
    _p("dispatch_pod(W,R,Amount)", "str str int", "The largest pod of W asks Amount of R.",
       'dispatch_pod("team-a/train","nvidia.com/gpu",1).'),
    _p("dispatch_label(W,Key,Value)", "str str str", "W's Workload (or all its pods) carries label Key=Value.",
       'dispatch_label("team-a/train","data-region","eu").'),
    _p("nominated_before(W,K)", "str str", "K is in W's status.nominatedClusterNames now.",
       'nominated_before("team-a/train","worker-a").'),
    _p("dispatch_copies(N)", "int", "A workload whose prediction is uncertain is nominated to N workers "
       "(multiKueue.copiesWhenUncertain).", 'dispatch_copies(3).'),
    _p("dispatch_no_fit_copies(N)", "int", "A workload that fits no worker, as their fresh data tell, is nominated "
       "to N workers (multiKueue.copiesWhenNoFit; 0: it waits).", 'dispatch_no_fit_copies(0).'),
    _p("dispatch_unit(R,Unit)", "str str", "Amounts of R in the dispatch facts are integers in Unit.",
       'dispatch_unit("memory","1Gi").'),
    _p("resource_unit(R,Unit)", "str str",
       "Every quota tree counts resource R in Unit (a Kubernetes quantity); absent when trees count R in "
       "different units (see tree_unit/3).", 'resource_unit("memory","1Gi").'),
    _p("tree_unit(T,R,Unit)", "node str str",
       "Amounts of resource R in the quota tree rooted at T (quotas of its nodes, requests of the workloads "
       "queued in it) are integers in Unit (a Kubernetes quantity). Each tree has units of its own: compare "
       "amounts only within one tree.",
       'tree_unit(cohort("eng"),"memory","1Gi").'),
)}


def fact_text(predicate: str, args: Iterable[Value]) -> str:
    """One fact as ASP text: ``predicate(args...).``"""
    return f"{predicate}({','.join(map(value_text, args))})."


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


@functools.lru_cache(maxsize=1 << 16, typed=True)  # a cycle renders the same names in many facts
def value_text(value: Value) -> str:
    if isinstance(value, bool):
        raise TypeError("booleans are not fact values")
    if isinstance(value, int):
        return str(value)
    if isinstance(value, Node):
        return str(value)
    return _quote(value)


def render_facts(lines: Mapping[str, Iterable[str]], *, commented: bool = False) -> str:
    """Facts as ASP text, given as predicate -> its facts' texts: sorted, predicate by predicate
    in schema order; with ``commented``, each predicate is headed by its meaning."""
    out: list[str] = []
    for name in (n for n in PREDICATES if lines.get(n)):
        if commented:
            p = PREDICATES[name]
            out += ["", f"% {p.signature}: {p.doc}"]
        out += sorted(lines[name])
    if commented:
        out = [f"% clueue facts ({FACTS_VERSION})"] + out
    return "\n".join(out) + "\n"


def defined_directives() -> str:
    """``#defined`` for every input predicate, so that policies may read absent ones silently."""
    return "".join(f"#defined {p.name}/{len(p.args)}.\n" for p in PREDICATES.values())
