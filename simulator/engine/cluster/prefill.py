"""A prefill pool: prefill replicas on GPUs of their own, batching prompts and shipping their KV to decode.

Place in the data flow: with `cluster.prefill` (specplan.simulator.scenario.deployment)
the simulation sends every arrival here first; when a request's KV has
reached the decode pool, `on_ready(rid, first)` hands it to a decode replica
(specplan.simulator.engine.cluster.replica), whose first step emits its first token. So

    TTFT = queueing + prefill steps + KV transfer + queueing at decode + the first decode step

(requests.csv gives each part: records.ttft_parts).

A prefill replica is one SimPy process, one event per prefill step:

    loop:  take prompts FIFO until max_batch_tokens (the head prompt is cut into chunks when it
           does not fit, and stays at the head)  →  price the step at T new tokens and
           C = Σ n(n + 2p) (n new tokens over p tokens already in the request's cache: its cached
           prefix and its earlier chunks; the prefill profile's axes)  →  wait the step  →
           prompts that are complete insert their blocks in the prefix cache and start their transfer

A prompt's first chunk asks the replica's prefix cache (specplan.simulator.engine.cluster.prefix_cache)
how many leading tokens it holds; only the rest is computed. The KV of the
whole prompt (and of tokens generated before a preemption) then moves over
the replica's link, FIFO: bytes = tokens × KV bytes per token (from the
model's shape), time = bytes / bandwidth + latency.

Routing within the pool: round_robin, least_loaded (fewest queued prompt
tokens), random (its own named stream), cache_aware (the longest cached
prefix, ties to the least loaded, then the lowest index: Dynamo's KV router
and llm-d's prefix scorer without their load weights), or pull: one shared
FIFO queue that idle replicas take from (Dynamo's prefill queue; with a
fixed step time and one prompt per step the pool is then an M/D/c queue).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Generator, Sequence
from typing import Any

import numpy as np
import pandas as pd
import simpy

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.modelshape import load_shape
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.core.streams import stream
from specplan.simulator.engine.cluster.prefix_cache import BlockCache, cache_fields
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.scenario.deployment import PrefillPoolSpec

PREFILL_STEP_FIELDS = ("end_s", "prefill_replica", "requests", "prompt_tokens", "pairs", "step_ms")
NO_BLOCKS: tuple[int, ...] = ()


class PrefillJob:
    """A prompt in a prefill replica: tokens left to compute and tokens its cache holds already."""

    __slots__ = ("blocks", "computed", "first", "left", "prefilled_s", "rid")

    def __init__(self, rid: int, tokens: int, blocks: Sequence[int], first: bool) -> None:
        self.rid, self.left, self.computed, self.blocks, self.first = rid, tokens, 0, blocks, first
        self.prefilled_s = 0.0  # when its last chunk was computed (its transfer starts)


class PrefillReplica:
    """One prefill engine in simulated time, taking prompts from `queue` (its own, or the pool's shared one).

    A prompt cut at the batch's token budget is carried to this replica's next
    step (`carry`) and finishes there; it is never split across replicas.
    """

    def __init__(self, env: simpy.Environment, index: int, pool: PrefillPool, queue: deque[PrefillJob]) -> None:
        self.env, self.index, self.pool, self.queue = env, index, pool, queue
        self.carry: PrefillJob | None = None
        self.queued_tokens = 0
        self.link_free_at = 0.0
        self.cache = pool.new_cache()
        self.wake: simpy.Event | None = None
        env.process(self.run())

    def submit(self, job: PrefillJob) -> None:
        self.queue.append(job)
        self.queued_tokens += job.left
        self.notify()

    def notify(self) -> None:
        if self.wake is not None and not self.wake.triggered:
            self.wake.succeed()

    def run(self) -> Generator[simpy.Event, Any, None]:
        env = self.env
        while True:
            if self.carry is None and not self.queue:
                self.wake = env.event()
                yield self.wake
                self.wake = None
                continue
            jobs, new, cached = self.take_batch()
            tokens, pairs = int(new.sum()), float((new * (new + 2 * cached)).sum())
            step_ms = float(self.pool.profile.step_ms(tokens, pairs))
            yield env.timeout(step_ms / 1000.0)
            self.pool.steps.append((env.now, self.index, len(jobs), tokens, pairs, step_ms))
            self.commit(jobs, new)

    def take_batch(self) -> tuple[list[PrefillJob], np.ndarray, np.ndarray]:
        """The carried chunk, then prompts from the queue's head, FIFO, up to max_batch_tokens new tokens."""
        budget = self.pool.max_batch_tokens
        jobs, new, cached = [], [], []
        job, self.carry = self.carry, None
        while budget > 0 and (job is not None or self.queue):
            if job is None:
                job = self.queue.popleft()
                self.open(job)
            take = min(job.left, budget)
            jobs.append(job)
            new.append(take)
            cached.append(job.computed)
            budget -= take
            job = None
        return jobs, np.array(new, dtype=np.int64), np.array(cached, dtype=np.int64)

    def open(self, job: PrefillJob) -> None:
        """A prompt's first chunk, in the step starting now: the tokens its prefix cache holds are not computed
        again."""
        self.pool.log.prefill(job.rid)
        self.pool.log.prefill_started(job.rid, self.env.now)
        self.pool.prefill_replica[job.rid] = self.index
        if self.cache is None or not job.blocks:
            return
        hit = self.cache.lookup(job.blocks, job.left)
        self.pool.looked_up_tokens += job.left
        self.pool.saved_tokens += hit
        self.pool.cached_tokens[job.rid] = self.pool.cached_tokens.get(job.rid, 0) + hit
        job.computed, job.left = hit, job.left - hit
        self.queued_tokens -= hit

    def commit(self, jobs: list[PrefillJob], new: np.ndarray) -> None:
        for job, take in zip(jobs, new.tolist(), strict=True):
            job.computed += take
            job.left -= take
            self.queued_tokens -= take
            if job.left:
                self.carry = job
            else:
                self.finish(job)

    def finish(self, job: PrefillJob) -> None:
        """A complete prompt: its blocks join the cache, its KV starts for the decode pool."""
        if self.cache is not None and job.blocks:
            self.cache.insert(job.blocks)
        pool, now = self.pool, self.env.now
        pool.log.transfer(job.rid, now)
        job.prefilled_s = now
        start = max(now, self.link_free_at)
        self.link_free_at = start + job.computed * pool.kv_bytes_per_token * 8 / (pool.link_gbps * 1e9)
        ready_s = self.link_free_at + pool.link_latency_s
        event = self.env.timeout(ready_s - now)
        event.callbacks.append(lambda _e: pool.ready(job))


class PrefillPool:
    """The prefill replicas, their router, and what the summary reads from them."""

    def __init__(self, env: simpy.Environment, spec: PrefillPoolSpec, seed: int, log: RequestLog,
                 on_ready: Callable[[int, bool], None]) -> None:
        self.env, self.spec, self.log, self.on_ready = env, spec, log, on_ready
        self.profile = load_profile(spec.profile)
        self.max_batch_tokens = spec.max_batch_tokens
        self.kv_bytes_per_token = kv_bytes_per_token(spec)
        self.link_gbps, self.link_latency_s = spec.link.gbps, spec.link.latency_ms / 1000.0
        self.steps: list[tuple] = []
        self.blocks: dict[int, Sequence[int]] = {}
        self.prefill_replica: dict[int, int] = {}
        self.cached_tokens: dict[int, int] = {}
        self.looked_up_tokens = self.saved_tokens = 0
        self.transfers, self.transfer_s = 0, 0.0   # KV transfers that arrived, and their time summed
        self.shared: deque[PrefillJob] = deque()   # the `pull` router's one queue
        self.replicas = [PrefillReplica(env, i, self, self.shared if spec.router == "pull" else deque())
                         for i in range(spec.replicas)]
        self.rng = stream(seed, "prefill_router")
        self.next_index = 0

    def new_cache(self) -> BlockCache | None:
        cache = self.spec.prefix_cache
        if cache is None:
            return None
        capacity = cache.capacity_tokens or default_cache_tokens(self.profile, self.max_batch_tokens)
        return BlockCache(capacity // cache.block_tokens, cache.block_tokens)

    def submit(self, rid: int, tokens: int, blocks: Sequence[int] | None, first: bool) -> None:
        """A prompt (first) or a preempted request's prompt + generated tokens, to a prefill replica."""
        if blocks:
            self.blocks[rid] = blocks
        blocks = self.blocks.get(rid, NO_BLOCKS)
        job = PrefillJob(rid, tokens, blocks, first)
        self.log.prefill(rid)
        if self.spec.router == "pull":
            self.shared.append(job)
            for replica in self.replicas:
                replica.notify()
            return
        self.replicas[self.choose(blocks)].submit(job)

    def choose(self, blocks: Sequence[int]) -> int:
        kind, n = self.spec.router, len(self.replicas)
        if kind == "round_robin":
            i, self.next_index = self.next_index, (self.next_index + 1) % n
            return i
        if kind == "random":
            return int(self.rng.integers(n))
        loads = [r.queued_tokens for r in self.replicas]
        if kind == "cache_aware" and blocks:
            matches = [r.cache.match(blocks) if r.cache is not None else 0 for r in self.replicas]
            return min(range(n), key=lambda i: (-matches[i], loads[i], i))
        return loads.index(min(loads))

    def ready(self, job: PrefillJob) -> None:
        self.log.kv_ready(job.rid, self.env.now)
        self.transfers += 1
        self.transfer_s += self.env.now - job.prefilled_s
        self.on_ready(job.rid, job.first)

    # ---- records -----------------------------------------------------------------------------
    def step_frame(self) -> pd.DataFrame:
        frame = pd.DataFrame(self.steps, columns=list(PREFILL_STEP_FIELDS))
        return frame.astype({"prefill_replica": np.int64, "requests": np.int64, "prompt_tokens": np.int64})

    def request_columns(self, n: int) -> dict[str, np.ndarray]:
        """Per-request pool columns for requests.csv (-1 / 0 where a request never got there); the stage marks
        (prefill_start_s, prefill_end_s, kv_ready_s) are the request log's, as in every mode."""
        return {"prefill_replica": column(self.prefill_replica, n, -1, np.int64),
                "cached_prompt_tokens": column(self.cached_tokens, n, 0, np.int64)}

    def cache_fields(self) -> dict[str, Any]:
        caches = [r.cache for r in self.replicas if r.cache is not None]
        return cache_fields(caches, self.looked_up_tokens, self.saved_tokens) if caches else {}


def kv_bytes_per_token(spec: PrefillPoolSpec) -> int:
    """Bytes of KV one token moves over the link: given, or from the model's shape (the spec has one of the two)."""
    if spec.kv_bytes_per_token is not None:
        return spec.kv_bytes_per_token
    assert spec.model is not None  # PrefillPoolSpec.validate: a model or kv_bytes_per_token
    return int(load_shape(spec.model).kv_bytes_per_token(spec.kv_value_bytes))


def column(values: dict[int, Any], n: int, fill: Any, kind: type) -> np.ndarray:
    out: np.ndarray = np.full(n, fill, dtype=kind)
    if values:
        out[np.fromiter(values.keys(), dtype=np.int64)] = np.fromiter(values.values(), dtype=kind)
    return out


def default_cache_tokens(profile: StepProfile, max_batch_tokens: int) -> int:
    """The KV a prefill replica can keep: the profile's KV capacity less one batch being computed."""
    stated = str(profile.provenance.get("kv_capacity_tokens", "")).split()
    if not stated or not stated[0].isdigit():
        raise ScenarioError("cluster.prefill.prefix_cache.capacity_tokens",
                            f"profile {profile.name} states no KV capacity; give capacity_tokens")
    return max(int(stated[0]) - max_batch_tokens, 0)


def prefill_summary(pool: PrefillPool, steps: pd.DataFrame, warmup_s: float, window_s: float) -> dict[str, Any]:
    """The pool's figures over the measurement window, and its prefix cache's over the run."""
    spec = pool.spec
    busy = steps[steps["end_s"] > warmup_s]
    return {
        "prefill_replicas": spec.replicas,
        "prefill_steps": len(steps),
        "mean_prefill_step_ms": float(busy["step_ms"].mean()) if len(busy) else float("nan"),
        "mean_prefill_batch_tokens": float(busy["prompt_tokens"].mean()) if len(busy) else float("nan"),
        "prefill_busy_share": float(busy["step_ms"].sum()) / 1000.0 / window_s / spec.replicas,
        "mean_kv_transfer_ms": pool.transfer_s / pool.transfers * 1000.0 if pool.transfers else float("nan"),
        "kv_bytes_per_token": int(pool.kv_bytes_per_token),
        **pool.cache_fields(),
    }
