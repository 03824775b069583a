"""SGLang's own caps (specplan.engines.caps): request slots, the SWA pool, graph batch, all-to-all tokens.

Sources (sgl-project/sglang, read in its stored main; the 0.5.12.post1 - 0.5.15 rows take them):

    max_running_requests   DeepSeek-V4: 256 server-wide when unset (arg_groups/deepseek_v4_hook.py,
                           apply_deepseek_v4_defaults), split over the DP ranks (model_runner:
                           max_running_requests // dp_size); others: the request pool, at most 4,096
                           (kv_cache_configurator resolve_max_num_reqs: the pool's tokens / context length x 512
                           clamped to 2,048 - 4,096, the upper end taken here as the context length is not
                           known) and at most max_total_num_tokens // 2, per rank
    swa pool               DeepSeek-V4: swa_full_tokens_ratio 0.1 when unset (the same hook; default 0.8);
                           the SWA pool is the full pool x the ratio (the hybrid-SWA pool configurator).
                           A running request holds its sliding window (128 tokens, V4's config) plus the
                           step's tokens, page-rounded, plus one page where the window straddles a page
                           edge (pages of 128 tokens): assumed, not read; a rank's prefill chunk also
                           takes its tokens from the pool
    cuda_graph_max_bs      by GPU memory and TP (handle_gpu_memory_settings): < 20 GiB 8; < 35 GiB 48
                           (TP < 4) or 160; < 60 GiB 32 or 160; < 90 and < 160 GiB 256 or 512; else 512;
                           per rank, and no graph is captured past the rank's request slots
    chunked_prefill_size   by GPU memory: 2048, 4096, 4096, 8192, 8192, 16384 in the same classes;
                           divided by dp under DP attention
    KV pool                mem_fraction_static x GPU − weights (model_runner profile_max_num_token: the
                           memory free after loading less the free memory before it x (1 − f)); activations
                           and CUDA graphs live in the reserve outside the fraction
    mem_fraction_static    (GPU − reserved) / GPU, reserved MB = 512 + 1.5 x max(chunk, 2048) + TP/8 x 1024
                           + 2 x max_bs (decode graphs) [+ 3 x max_bs x dp, + 1.5 x max_bs x dp past
                           max_bs 300, under DP attention], at least 10 GiB on GPUs over 60 GiB, + 2 GiB
                           for DeepEP's buffers (sgl-project/sglang PR #10975's rule as main has it;
                           prefill graphs off, as these rows run DeepSeek-V4)
    DeepEP tokens          SGLANG_DEEPEP_NUM_MAX_DISPATCH_TOKENS_PER_RANK = 128 (environ.py): the most
                           tokens a rank's low-latency dispatch carries
    MegaMoE tokens         SGLANG_OPT_DEEPGEMM_MEGA_MOE_NUM_MAX_TOKENS_PER_RANK = 1024 (environ.py, the
                           opt-in MegaMoE of these versions; later main: 8192); sgl-project/sglang
                           PR #31373 sets it to the per-rank prefill chunk (32768 / DP8 = 4096)
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from specplan.engines.caps import (
    GIB_MB,
    CapFacts,
    CapReport,
    CapValue,
    MemoryRule,
    knob,
    kv_pool_cap,
)

KNOBS = ("max_running_requests", "cuda_graph_max_bs", "chunked_prefill_size", "deepep_tokens_per_rank",
         "megamoe_tokens_per_rank", "swa_full_tokens_ratio", "mem_fraction_static")
# (GPU memory below, GiB) -> (chunked_prefill_size, cuda_graph_max_bs at TP < 4, at TP >= 4)
GPU_CLASSES = ((20, 2048, 8, 8), (35, 4096, 48, 160), (60, 4096, 32, 160), (90, 8192, 256, 512),
               (160, 8192, 256, 512), (math.inf, 16384, 512, 512))
HOOK = "sglang arg_groups/deepseek_v4_hook.py apply_deepseek_v4_defaults"
MEMORY = "sglang arg_groups handle_gpu_memory_settings"
ENVIRON = "sglang environ.py"
# --mem-fraction-static covers the weights and the KV pool; activations and CUDA graphs live outside it
WEIGHTS_AND_KV = MemoryRule("weights", "sglang model_executor model_runner profile_max_num_token: the KV pool is "
                            "the memory free after loading less the free memory before it x (1 - "
                            "mem_fraction_static), i.e. f x GPU - weights")


@dataclass(frozen=True)
class SGLangCaps:
    """SGLang's caps (module docstring for each figure's source)."""

    v4_max_running_requests: int = 256
    v4_swa_full_tokens_ratio: float = 0.1
    swa_window_tokens: int = 128
    swa_page_tokens: int = 128
    deepep_tokens_per_rank: int = 128
    megamoe_tokens_per_rank: int = 1024
    request_pool: int = 4096
    knobs: tuple[str, ...] = KNOBS
    memory_rule: MemoryRule = WEIGHTS_AND_KV

    def gpu_class(self, facts: CapFacts) -> tuple[int, int]:
        """(chunked_prefill_size, cuda_graph_max_bs) SGLang picks for this GPU and TP."""
        _, chunk, small_tp, large_tp = next(c for c in GPU_CLASSES if facts.gpu_memory_gib < c[0])
        return chunk, small_tp if facts.tp < 4 else large_tp

    def settings(self, facts: CapFacts) -> tuple[int, int]:
        """(chunked_prefill_size, cuda_graph_max_bs) as launched: the overrides, else the GPU's class."""
        chunk, max_bs = self.gpu_class(facts)
        return (int(knob(facts, "chunked_prefill_size", chunk, self.knobs)),
                int(knob(facts, "cuda_graph_max_bs", max_bs, self.knobs)))

    def running_cap(self, facts: CapFacts) -> list[CapValue]:
        """max_running_requests per rank: V4's 256 split over DP, else the request pool (module docstring)."""
        if facts.model == "deepseek-v4" or "max_running_requests" in facts.overrides:
            server = int(knob(facts, "max_running_requests", self.v4_max_running_requests, self.knobs))
            return [CapValue("max_running_requests", server, "requests (server)", server // facts.dp, "admission",
                             HOOK)]
        if facts.kv_pool_tokens is None:
            return []
        per_rank = min(self.request_pool, facts.kv_pool_tokens // 2)
        return [CapValue("max_running_requests", per_rank, "requests (rank)", per_rank, "admission",
                         "sglang resolve_max_num_reqs: min(4096, max_total_num_tokens // 2)")]

    def request_slots(self, facts: CapFacts) -> int | None:
        running = self.running_cap(facts)
        return running[0].requests_per_rank if running else None

    def swa_cap(self, facts: CapFacts) -> list[CapValue]:
        """DeepSeek-V4's SWA pool as requests: (pool − one chunk) over each request's window pages."""
        if facts.model != "deepseek-v4" or facts.kv_pool_tokens is None:
            return []
        ratio = knob(facts, "swa_full_tokens_ratio", self.v4_swa_full_tokens_ratio, self.knobs)
        pool = math.floor(facts.kv_pool_tokens * ratio)
        page = self.swa_page_tokens
        per_request = page * (math.ceil((self.swa_window_tokens + facts.query_tokens) / page) + 1)
        chunk = self.settings(facts)[0] // facts.dp
        return [CapValue("swa_pool", pool, "tokens", max(0, (pool - chunk) // per_request), "admission",
                         f"{HOOK} (swa_full_tokens_ratio {ratio:g})")]

    def all_to_all_caps(self, facts: CapFacts) -> list[CapValue]:
        """The all-to-all's tokens per rank as decode requests of `query_tokens` each."""
        if facts.all_to_all == "none":
            return []
        name = "deepep_tokens_per_rank" if facts.all_to_all == "deepep" else "megamoe_tokens_per_rank"
        default = self.deepep_tokens_per_rank if facts.all_to_all == "deepep" else self.megamoe_tokens_per_rank
        tokens = int(knob(facts, name, default, self.knobs))
        return [CapValue(name, tokens, "tokens", tokens // facts.query_tokens, "admission", ENVIRON)]

    def report(self, facts: CapFacts) -> CapReport:
        running = self.running_cap(facts)
        slots = running[0].requests_per_rank if running else None
        max_bs = self.settings(facts)[1]
        graph = CapValue("cuda_graph_max_bs", max_bs, "requests (rank)", min(max_bs, slots or max_bs), "graph",
                         MEMORY)
        caps = [*running, *kv_pool_cap(facts, "the profile's memory model at mem_fraction_static"),
                *self.swa_cap(facts), *self.all_to_all_caps(facts), graph]
        return CapReport(tuple(caps))

    def mem_fraction_static(self, facts: CapFacts) -> float:
        """The fraction of GPU memory for weights and KV (module docstring's rule)."""
        if "mem_fraction_static" in facts.overrides:
            return float(knob(facts, "mem_fraction_static", 0.0, self.knobs))
        chunk, max_bs = self.settings(facts)
        reserved = 512 + 1.5 * max(chunk, 2048) + facts.tp / 8 * GIB_MB + 2 * max_bs
        if facts.dp > 1:
            reserved += 3 * max_bs * facts.dp + (1.5 * max_bs * facts.dp if max_bs > 300 else 0.0)
        gpu_mb = facts.gpu_memory_gib * GIB_MB
        if gpu_mb > 60 * GIB_MB:
            reserved = max(reserved, 10 * GIB_MB)
        if facts.all_to_all == "deepep":
            reserved += 2 * GIB_MB
        return round((gpu_mb - reserved) / gpu_mb, 3)
