"""Admission fair sharing's consumed usage: what each LocalQueue used, decayed with a half-life,
as Kueue keeps it in ``status.fairSharing.admissionFairSharingStatus`` (docs/fair-sharing.md).

Every ``usageSamplingInterval`` the consumed usage of a LocalQueue moves toward what its
admitted workloads hold now, by the part of the half-life that passed since its ``lastUpdate``:

    alpha = 1 - 0.5 ** (elapsed / usageHalfLifeTime)
    consumed = consumed * (1 - alpha) + usage * alpha

so a queue that stops using quota sees its consumed usage halve every half-life, and one that
keeps using ``u`` approaches ``u``. A half-life of 0 forgets at once (consumed is empty). A queue
without the status starts empty, stamped now (its first sample folds in nothing, as Kueue's).
Resources are summed over flavors.

Pure: the previous status comes from the snapshot (so a restarted controller continues from
it), the time from the caller; the adapter writes what :func:`consumed_updates` returns, and
ordering (fairsharing.py) reads it back from the next snapshot.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Mapping

from .config import AdmissionFairSharing
from .objects import LocalQueue
from .fairsharing import held_quota
from .queues import QueueStatuses
from .snapshot import Snapshot

__all__ = ["ConsumedUsage", "decayed", "sample", "sampled_queues", "consumed_updates", "next_sample",
           "admitted_usage"]

#: Decayed amounts are kept to a thousandth of a unit (milli-cpu; bytes and counts likewise).
_PRECISION = 1000


@dataclass(frozen=True)
class ConsumedUsage:
    """A LocalQueue's ``admissionFairSharingStatus``: resource -> decayed usage, and when it
    was sampled (seconds since the epoch)."""

    resources: Mapping[str, Fraction]
    last_update: int


def decayed(previous: Mapping[str, Fraction], usage: Mapping[str, Fraction], elapsed: float,
            half_life: float) -> dict[str, Fraction]:
    """``previous`` consumed usage moved toward ``usage`` over ``elapsed`` seconds with
    ``half_life`` (see the module docstring); amounts rounded to a thousandth, zeros left out.

    >>> decayed({"cpu": Fraction(8)}, {}, 3600, 3600)
    {'cpu': Fraction(4, 1)}
    >>> decayed({"cpu": Fraction(8)}, {"cpu": Fraction(2)}, 7200, 3600)
    {'cpu': Fraction(7, 2)}
    """
    if half_life <= 0:
        return {}
    alpha = 1.0 - 0.5 ** (max(0.0, elapsed) / half_life)
    out = {}
    for r in sorted(set(previous) | set(usage)):
        value = float(previous.get(r, 0)) * (1.0 - alpha) + float(usage.get(r, 0)) * alpha
        rounded = Fraction(round(value * _PRECISION), _PRECISION)
        if rounded:
            out[r] = rounded
    return out


def sample(lq: LocalQueue, usage: Mapping[str, Fraction], now: int, settings: AdmissionFairSharing
           ) -> ConsumedUsage | None:
    """The status ``lq`` gets at ``now`` given what its admitted workloads hold (``usage``);
    None while its last sample is younger than the sampling interval (nothing to write)."""
    if not lq.consumed_at:  # no status yet: starts empty, stamped now
        return ConsumedUsage({}, now)
    elapsed = now - lq.consumed_at
    if elapsed < settings.sampling_seconds:
        return None
    return ConsumedUsage(decayed(lq.consumed, usage, elapsed, settings.half_life_seconds), now)


def sampled_queues(snapshot: Snapshot) -> list[LocalQueue]:
    """The LocalQueues whose consumed usage is kept: with admission fair sharing on (the
    section in effect, ``snapshot.kueue_settings``), every LocalQueue that is not stopped and
    whose ClusterQueue exists and is not stopped, as Kueue's LocalQueue controller samples them."""
    if snapshot.kueue_settings.admission_fair_sharing is None:
        return []
    return [lq for _, lq in sorted(snapshot.local_queues.items())
            if not lq.stopped and lq.cluster_queue in snapshot.cluster_queues
            and not snapshot.cluster_queues[lq.cluster_queue].stopped]


def consumed_updates(snapshot: Snapshot, usage: Mapping[str, Mapping[str, Fraction]], now: int
                     ) -> dict[str, ConsumedUsage]:
    """LocalQueue key -> its new consumed usage at ``now``, for each sampled queue whose
    sample is due; ``usage``: LocalQueue key -> what its admitted workloads hold, by resource."""
    settings = snapshot.kueue_settings.admission_fair_sharing
    out = {}
    for lq in sampled_queues(snapshot):
        assert settings is not None
        key = f"{lq.namespace}/{lq.name}"
        update = sample(lq, usage.get(key, {}), now, settings)
        if update is not None:
            out[key] = update
    return out


def next_sample(snapshot: Snapshot, now: int) -> int | None:
    """When the next sample of a LocalQueue is due after a cycle at ``now`` (epoch seconds;
    None: none is kept), so that a controller cycles then though nothing changes. A sample due
    now is taken by this cycle's writes, so the next one is an interval later."""
    settings = snapshot.kueue_settings.admission_fair_sharing
    if settings is None:
        return None
    due = []
    for lq in sampled_queues(snapshot):
        at = lq.consumed_at + settings.sampling_seconds if lq.consumed_at else now
        due.append(at if at > now else now + settings.sampling_seconds)
    return int(min(due)) if due else None


def admitted_usage(statuses: QueueStatuses) -> dict[str, dict[str, Fraction]]:
    """LocalQueue key -> what its admitted workloads hold after the cycle, by resource (its
    ``flavorsUsage`` summed over flavors, as Kueue samples a LocalQueue's usage)."""
    out: dict[str, dict[str, Fraction]] = {}
    for key, lq in statuses.local_queues.items():
        held: dict[str, Fraction] = {}
        for (_, r), q in held_quota(lq.flavors_usage).items():
            held[r] = held.get(r, Fraction(0)) + q
        out[key] = {r: q for r, q in held.items() if q}
    return out
