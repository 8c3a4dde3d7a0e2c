"""Kueue's own Configuration, as far as clueue decides by it: the ``fairSharing`` and
``admissionFairSharing`` sections (docs/fair-sharing.md).

Kueue reads its Configuration from the ``controller_manager_config.yaml`` key of the ConfigMap
``kueue-manager-config`` in ``kueue-system``; a snapshot that holds that ConfigMap (from files or
a live cluster) carries the two sections, and clueue's own ``--config`` may set them too (its
sections win). Both are read by the same functions, so they mean the same in either place.
"""

from __future__ import annotations

from dataclasses import dataclass
from .config import FAIR_STRATEGIES, AdmissionFairSharing, Config, FairSharing, WaitForPodsReady
from .errors import SnapshotError
from .fields import Document, Fields
from .parsing import parse_documents

__all__ = ["KueueSettings", "KUEUE_CONFIG_MAP", "CONFIG_KEY", "parse_fair_sharing", "parse_admission_fair_sharing",
           "parse_wait_for_pods_ready",
           "parse_kueue_config_map", "effective_settings"]

#: ``namespace/name`` of the ConfigMap Kueue reads its Configuration from, and the key holding it.
KUEUE_CONFIG_MAP = "kueue-system/kueue-manager-config"
CONFIG_KEY = "controller_manager_config.yaml"


@dataclass(frozen=True)
class KueueSettings:
    """The sections of a Kueue Configuration clueue decides by (``None``: absent or disabled)."""

    fair_sharing: FairSharing | None = None
    admission_fair_sharing: AdmissionFairSharing | None = None
    wait_for_pods_ready: WaitForPodsReady | None = None


def parse_fair_sharing(f: Fields, path: str = "fairSharing") -> FairSharing | None:
    """The ``fairSharing`` section at ``path`` (``None`` if absent).

    Raises:
        SnapshotError: ``enable`` is not a boolean, or ``preemptionStrategies`` is not one of
            the lists Kueue accepts (naming the object and field).
    """
    if f.get(path) is None:
        return None
    f.mapping(path)
    enabled = f.flag(f"{path}.enable", True)  # v1beta1 has the flag; in v1beta2 the section enables it
    strategies = f.strings(f"{path}.preemptionStrategies") or FAIR_STRATEGIES[2]
    if strategies not in FAIR_STRATEGIES:
        raise f.fail(f"{path}.preemptionStrategies", f"expected one of {', '.join(map(str, map(list, FAIR_STRATEGIES)))}, "
                                                     f"got {list(strategies)}")
    return FairSharing(enabled, strategies)


def parse_admission_fair_sharing(f: Fields, path: str = "admissionFairSharing") -> AdmissionFairSharing | None:
    """The ``admissionFairSharing`` section at ``path`` (``None`` if absent).

    Raises:
        SnapshotError: a duration that is not one (durations.py: ``168h``, ``5m``), a sampling
            interval that is not positive, or a resource weight that is not a non-negative number.
    """
    if f.get(path) is None:
        return None
    f.mapping(path)
    half_life = f.duration(f"{path}.usageHalfLifeTime", 0.0)
    sampling = f.duration(f"{path}.usageSamplingInterval", 300.0)
    if sampling <= 0:  # Kueue refuses it too: the usage would be sampled without end (admission_usage.py)
        raise f.fail(f"{path}.usageSamplingInterval", "must be greater than 0")
    weights = []
    for resource, w in sorted(f.mapping(f"{path}.resourceWeights").items()):
        if not isinstance(w, (int, float)) or isinstance(w, bool) or w < 0:
            raise f.fail(f"{path}.resourceWeights.{resource}", f"expected a non-negative number, got {w!r}")
        weights.append((str(resource), float(w)))
    return AdmissionFairSharing(half_life, sampling, tuple(weights))


def parse_wait_for_pods_ready(f: Fields, path: str = "waitForPodsReady") -> WaitForPodsReady | None:
    """The ``waitForPodsReady`` section at ``path`` (``None`` if absent; docs/pods-ready.md).

    Raises:
        SnapshotError: a flag that is not a boolean, a duration that is not one, a count that is
            not a non-negative whole number, ``requeuingStrategy.timestamp`` not ``Eviction`` or
            ``Creation``, or a base back-off longer than the longest (naming the field).
    """
    if f.get(path) is None:
        return None
    f.mapping(path)
    enabled = f.flag(f"{path}.enable", True)  # v1beta1 has the flag; in v1beta2 the section enables it
    timeout = f.duration(f"{path}.timeout", 300.0)
    if timeout <= 0:
        raise f.fail(f"{path}.timeout", "expected a positive duration")
    recovery = f.duration(f"{path}.recoveryTimeout", 0.0) or None
    strategy = f"{path}.requeuingStrategy"
    f.mapping(strategy)
    stamp = f.string(f"{strategy}.timestamp", "Eviction")
    if stamp not in ("Eviction", "Creation"):
        raise f.fail(f"{strategy}.timestamp", f"expected Eviction or Creation, got {stamp!r}")
    limit = f.get(f"{strategy}.backoffLimitCount")
    base = f.count(f"{strategy}.backoffBaseSeconds", 60)
    most = f.count(f"{strategy}.backoffMaxSeconds", 3600)
    if base > most:
        raise f.fail(f"{strategy}.backoffBaseSeconds", f"{base} is more than backoffMaxSeconds ({most})")
    return WaitForPodsReady(enabled, timeout, f.flag(f"{path}.blockAdmission", enabled), recovery, stamp or "Eviction",
                            None if limit is None else f.count(f"{strategy}.backoffLimitCount", 0), base, most)


def parse_kueue_config_map(f: Fields) -> KueueSettings:
    """The settings of a ConfigMap: those of its ``controller_manager_config.yaml`` if it is
    Kueue's (:data:`KUEUE_CONFIG_MAP`); other ConfigMaps hold none.

    Raises:
        SnapshotError: the key is not a YAML Configuration, or a section is malformed; the
            field is named within the key (``data[controller_manager_config.yaml].fairSharing.enable``),
            on the ConfigMap, and one malformed section fails the whole ConfigMap: none of its
            sections is decided by, not the valid ones either.
    """
    if f"{f.namespace}/{f.name}" != KUEUE_CONFIG_MAP:
        return KueueSettings()
    key = f"data[{CONFIG_KEY}]"
    text = f.string(key, value=f.mapping("data").get(CONFIG_KEY))
    if not text:
        return KueueSettings()
    try:
        docs = [d for d in parse_documents(text, f.doc.source) if d is not None]
        if len(docs) != 1 or not isinstance(docs[0], dict):
            raise SnapshotError("expected one Configuration object")
        inner = Fields(Document(f.doc.source, {**docs[0], "metadata": {"name": f.name, "namespace": f.namespace}}),
                             "ConfigMap")
        return KueueSettings(parse_fair_sharing(inner), parse_admission_fair_sharing(inner),
                             parse_wait_for_pods_ready(inner))
    except SnapshotError as e:  # named as a field of the ConfigMap, which a lenient snapshot leaves out whole
        raise f.fail(f"{key}.{e.field}" if e.field else key, e.detail) from None


def effective_settings(snapshot_settings: KueueSettings, config: Config) -> KueueSettings:
    """What a cycle decides by: each section of clueue's ``config`` if set, else Kueue's; a
    ``fairSharing`` or ``waitForPodsReady`` section with ``enable: false`` turns it off."""
    fair = config.fair_sharing if config.fair_sharing is not None else snapshot_settings.fair_sharing
    return KueueSettings(
        fair if fair is not None and fair.enabled else None,
        config.admission_fair_sharing if config.admission_fair_sharing is not None
        else snapshot_settings.admission_fair_sharing,
        _enabled(config.wait_for_pods_ready if config.wait_for_pods_ready is not None
                 else snapshot_settings.wait_for_pods_ready))


def _enabled(section: WaitForPodsReady | None) -> WaitForPodsReady | None:
    """``section`` if it is enabled (``enable: false`` turns waitForPodsReady off)."""
    return section if section is not None and section.enabled else None
