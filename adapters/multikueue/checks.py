"""The AdmissionCheck controller: MultiKueue checks' ``Active`` condition.

An AdmissionCheck with ``spec.controllerName: kueue.x-k8s.io/multikueue`` names its
MultiKueueConfig in ``spec.parameters`` (apiGroup kueue.x-k8s.io, kind MultiKueueConfig). Its
``Active`` condition, with Kueue's reasons and messages:

- ``True``, ``Active``, "The admission check is active": the config is valid and all its
  clusters are active;
- ``True``, ``SomeActiveClusters``: some are missing or inactive (the message names them);
- ``False``, ``NoUsableClusters``: none is active (the message names them);
- ``False``, ``BadConfig``, "Cannot load the AdmissionChecks parameters: ...": no parameters,
  not a MultiKueueConfig, or no such MultiKueueConfig.
"""

from __future__ import annotations

from typing import Any, Mapping

from ..kube.kinds import KUEUE_GROUP
from .api import CONTROLLER_NAME, KueueObjects, is_true, setting_condition

__all__ = ["CheckController", "check_condition"]


def check_condition(check: dict[str, Any], configs: Mapping[str, dict[str, Any]],
                    clusters: Mapping[str, dict[str, Any]]) -> tuple[str, str, str, tuple[str, ...]]:
    """(status, reason, message, the config's clusters) of a MultiKueue AdmissionCheck, given
    the MultiKueueConfigs and MultiKueueClusters by name.

    >>> check_condition({"spec": {}}, {}, {})[:2]
    ('False', 'BadConfig')
    """
    params = (check.get("spec") or {}).get("parameters") or {}
    if not params:
        return "False", "BadConfig", "Cannot load the AdmissionChecks parameters: no parameters", ()
    if params.get("apiGroup") != KUEUE_GROUP or params.get("kind") != "MultiKueueConfig":
        return ("False", "BadConfig", "Cannot load the AdmissionChecks parameters: expected a "
                f"{KUEUE_GROUP} MultiKueueConfig, got {params.get('apiGroup')}/{params.get('kind')}", ())
    config = configs.get(str(params.get("name")))
    if config is None:
        return ("False", "BadConfig", "Cannot load the AdmissionChecks parameters: MultiKueueConfig "
                f"{params.get('name')} not found", ())
    names = tuple(str(n) for n in (config.get("spec") or {}).get("clusters") or ())
    missing = [n for n in names if n not in clusters]
    inactive = [n for n in names if n in clusters and not is_true(clusters[n], "Active")]
    if not missing and not inactive:
        return "True", "Active", "The admission check is active", names
    parts = ([f"Missing clusters: [{' '.join(missing)}]"] if missing else []) + \
        ([f"Inactive clusters: [{' '.join(inactive)}]"] if inactive else [])
    usable = len(missing) + len(inactive) < len(names)
    return ("True" if usable else "False"), ("SomeActiveClusters" if usable else "NoUsableClusters"), \
        ", ".join(parts), names


class CheckController:
    """Keeps MultiKueue AdmissionChecks' ``Active`` condition current; :attr:`clusters_of`
    gives each valid check's clusters to the workload controller."""

    def __init__(self, manager: KueueObjects) -> None:
        self.manager = manager
        self.clusters_of: dict[str, tuple[str, ...]] = {}

    def sync(self, clusters: Mapping[str, dict[str, Any]]) -> None:
        """One pass; ``clusters`` are the MultiKueueClusters as the cluster controller left them.

        Raises:
            ApiException, urllib3 errors: the manager could not be read.
        """
        checks = [c for c in self.manager.list("admissionchecks")
                  if (c.get("spec") or {}).get("controllerName") == CONTROLLER_NAME]
        configs = {c["metadata"]["name"]: c for c in self.manager.list("multikueueconfigs")} if checks else {}
        fresh: dict[str, tuple[str, ...]] = {}
        for check in checks:
            status, reason, message, names = check_condition(check, configs, clusters)
            if reason != "BadConfig":
                fresh[check["metadata"]["name"]] = names
            self.manager.update_status("admissionchecks", check, setting_condition(
                "Active", status, reason, message, (check.get("metadata") or {}).get("generation")))
        self.clusters_of = fresh
