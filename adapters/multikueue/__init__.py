"""MultiKueue (KEP-693) on the manager cluster: worker clusters, MultiKueue admission checks,
copies of Workloads in workers (first admission wins), and the garbage collector.

- api.py: names (labels, controller and dispatcher names), kueue.x-k8s.io objects as dicts, Events;
- clusters.py: MultiKueueClusters, a client per worker, ``Active`` conditions, the worker registry;
- checks.py: MultiKueue AdmissionChecks' ``Active`` condition;
- workloads.py: the dispatch protocol;
- gc.py: remote copies whose manager Workload is gone;
- runner.py: the loop that runs them in ``clueue controller``.

Their settings are the Configuration's ``multiKueue`` section (engine/config.py).
docs/multikueue.md describes the setup, the guarantees and what is covered.
"""

from .runner import MultiKueue
from .clusters import WorkerRegistry

__all__ = ["MultiKueue", "WorkerRegistry"]
