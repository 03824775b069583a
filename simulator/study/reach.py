"""Whether more replicas can still meet a plan's SLA: the search stops early, and says why, when they cannot.

A replica search (specplan.simulator.study.replica_search) asks this after
every failed probe; two findings end it before the replica cap:

- a pool held fixed is saturated: with a prefill pool that does not grow with
  the decode replicas (a capacity plan's `cluster.prefill`), a failed probe
  whose prefill replicas were busy at least `SATURATED` of the window cannot
  be rescued by decode replicas (the prefill queue grows whatever they do):
  grow cluster.prefill.replicas. Judged from the first probe on.
- a pool held fixed queues past the SLA: a failed probe that keeps up, with
  a TTFT bound that would hold without the wait before prefill starts (its
  `ttft_unqueued_*` statistic) but fails with it: that queue is the pool's,
  and decode replicas do not shorten it, busy 62% or 97% (bursts queue a
  pool that is idle on average): grow cluster.prefill.replicas.
- the SLA statistics stopped moving: a failed probe that kept up, after a
  smaller failed one that kept up too, whose every failing bound gained no
  more than the noise (its 95% half-widths over seeds, and `FLAT` of the
  value: one seed has no interval), and whose gap to its bound the same
  gain repeated at every doubling left up to the cap would not close: the
  per-request figures are the engine's at that batch, not the cluster's,
  and doubling again only repeats them (a closed loop of 8 users asked for
  5,000 tokens/s/user probed up to 256 replicas reading 301.9 from 8
  replicas on).

A cluster that falls behind can still be rescued by more replicas (its
backlog shrinks), so neither finding is drawn from one.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

from specplan.simulator.scenario.study import Bound
from specplan.simulator.study.keepup import FALLS_BEHIND
from specplan.simulator.study.probe import Probe
from specplan.simulator.study.target import Target

SATURATED = 0.97   # busy share of a fixed pool's replicas that no more decode replicas can lower
FLAT = 0.02        # a gain below 2% of the statistic counts as none


def out_of_reach(probes: Mapping[int, Probe], n: int, target: Target, fixed_pool: bool,
                 max_replicas: int) -> str | None:
    """Why no cluster larger than the failed probe at `n` replicas (up to `max_replicas`) can meet the
    target, or None."""
    probe = probes[n]
    busy = probe.mean("prefill_busy_share")
    if fixed_pool and busy >= SATURATED:
        pool = int(probe.mean("prefill_replicas"))
        return (f"the prefill pool ({pool} replica(s), held fixed) was busy {busy:.0%} of the window at {n} "
                "decode replica(s): no number of decode replicas serves more requests; grow "
                "cluster.prefill.replicas")
    queued = pool_queue_misses(probe, target) if fixed_pool and probe.keep_up != FALLS_BEHIND else []
    if queued:
        pool = int(probe.mean("prefill_replicas"))
        shown = "; ".join(f"{b.key} {probe.stats[b.key][0]:.3g} s, {probe.mean(unqueued_key(b.key)):.3g} s without "
                          "its queue" for b in queued)
        return (f"the prefill pool ({pool} replica(s), held fixed, busy {busy:.0%}) queues requests long enough "
                f"to miss the SLA at {n} decode replica(s) ({shown}; the SLA asks "
                f"{', '.join(b.text() for b in queued)}): decode replicas do not shorten its queue; grow "
                "cluster.prefill.replicas")
    smaller = [m for m in probes if m < n and not probes[m].meets_sla]
    if not smaller or FALLS_BEHIND in (probe.keep_up, probes[max(smaller)].keep_up):
        return None
    before = probes[max(smaller)]
    failing = [b for b in target.bounds if not b.holds(probe.stats.get(b.key, (math.nan, math.nan))[0])]
    doublings = max(math.ceil(math.log2(max_replicas / n)), 0)
    if not failing or any(closing(b, before, probe, doublings) for b in failing):
        return None
    shown = "; ".join(f"{b.key} {before.stats[b.key][0]:.4g} at {before.replicas} replica(s), "
                      f"{probe.stats[b.key][0]:.4g} at {n} (the SLA asks {b.text()})" for b in failing)
    return f"more replicas stopped moving the SLA statistics: {shown}; a larger cluster repeats them"


def unqueued_key(key: str) -> str:
    """'ttft_p99_s' → 'ttft_unqueued_p99_s': the same statistic without the wait before prefill starts."""
    return key.replace("ttft_", "ttft_unqueued_", 1)


def pool_queue_misses(probe: Probe, target: Target) -> list[Bound]:
    """The TTFT bounds a probe fails only because of the wait before prefill starts (they hold without it)."""
    out = []
    for bound in target.bounds:
        if not bound.key.startswith("ttft_") or bound.holds(probe.stats.get(bound.key, (math.nan, math.nan))[0]):
            continue
        without = probe.mean(unqueued_key(bound.key))
        if math.isfinite(without) and bound.holds(without):
            out.append(bound)
    return out


def closing(bound: Bound, before: Probe, after: Probe, doublings: int) -> bool:
    """Whether `after` moved the bound's statistic towards the bound by more than the noise, or by enough
    that the same gain at each of the `doublings` left would reach it."""
    (was, was_half), (now, now_half) = before.stats[bound.key], after.stats[bound.key]
    if not (math.isfinite(was) and math.isfinite(now)):
        return True  # nothing to compare: keep searching
    gain = now - was if bound.op == ">=" else was - now
    gap = bound.value - now if bound.op == ">=" else now - bound.value
    noise = max(h for h in (was_half, now_half, 0.0) if math.isfinite(h)) + FLAT * abs(was)
    return gain > noise or max(gain, 0.0) * doublings >= gap

