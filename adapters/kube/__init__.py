"""The Kubernetes API adapter: read a live cluster into a snapshot, apply a plan, watch for changes."""

from .apply import ApplyResult, apply_plan
from .cache import ClusterCache
from .connect import connect
from .read import read_cluster, snapshot_documents

__all__ = ["connect", "read_cluster", "snapshot_documents", "apply_plan", "ApplyResult", "ClusterCache"]
