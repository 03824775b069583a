"""How an engine's scheduler runs data-parallel attention ranks together: SGLang's and vLLM's rules, read at the source.

Place in the data flow: an engine's row (specplan.engines.traits) carries a
`DpScheduler`; the engine model reads it when its core is assembled
(specplan.simulator.engine.phases: the prefill schedule; specplan.simulator.engine.price.pricer:
which steps are priced per rank) and nowhere else.
Under DP attention every rank runs each forward together (the MoE all-to-all
meets them), so what one rank schedules decides the step of all.

SGLang's rules:

    prefill delayer   python/sglang/srt/managers/prefill_delayer.py (`PrefillDelayer`,
                      `_negotiate_should_allow_prefill`): every scheduler pass the ranks all-gather
                      whether each has a new request it could prefill; where some can and others
                      cannot ("mixed") no rank admits one, up to `--prefill-delayer-max-delay-passes`
                      passes in a row (30 by default; SGLANG_PREFILL_DELAYER_MAX_DELAY_PASSES), after
                      which it lets them through ("wait_timeout"); where all or none can, it allows
                      and the count restarts. Off by default (`--enable-prefill-delayer`, or
                      SGLANG_SCHEDULER_DECREASE_PREFILL_IDLE=1); asked from `PrefillAdder.add_one_req`
                      for requests taken from the waiting queue, so a chunked request already
                      under way goes on. Its KV watermark (`--prefill-delayer-token-usage-low-
                      watermark`, None by default) is not modelled. The SGLang versions of the V4
                      cells print `enable_prefill_delayer=False, prefill_delayer_max_delay_passes=30`
                      in their server arguments (sgl-project/sglang issue #23602); InferenceX's
                      DP-attention MegaMoE recipes turn it on (SemiAnalysisAI/InferenceX PR #2145);
                      none of the replication suite's cells does.
    decode while      scheduler_components/dp_attn.py (`prepare_mlp_sync_batch`): a rank with an
    another extends   extend batch does not stop the others: a rank with decode work runs its decode
                      batch in the same forward (an idle batch where it has none), eager, because the
                      graph votes are min-reduced (specplan.engines.modes.RankVote). The engine model's
                      separate schedule does that (specplan.simulator.engine.phases.Separate)
    ... unless it     scheduler.py `get_next_batch_to_run`: with a speculative algorithm and DP attention
    speculates        the ranks all-gather their new prefill batches *before* building a decode batch
                      ("prefill batches and decode batches cannot be processed in the same DP attention
                      group"): where any rank has a prefill batch, every other rank runs an idle batch
                      and its decoding requests wait for the next step (`spec_prefill_idle`). In the
                      0.4-0.5 schedulers (scheduler.py, then the same branch through
                      `dp_attn_adapter.maybe_prepare_mlp_sync_batch`); later versions add opt-outs
                      (--speculative-skip-dp-mlp-sync, SGLANG_ENABLE_DP_SPEC_PREFILL_COORDINATION) that
                      none of the replication suite's cells sets. `engine.dp_attention.decode_during_prefill`
                      names it (auto: the engine's rule; idle or decode to ask for one)
    per-rank prefill  server_args `_handle_data_parallelism`: under DP attention `chunked_prefill_size //= dp_size`
    budgets           (each rank's PrefillAdder takes a chunk of that); `engine.dp_attention.chunk_tokens` defaults
                      to engine.prefill.chunk_tokens / ranks. --max-prefill-tokens (16384) is per rank and does
                      not bind beside 4,096-token chunks; the same block's `schedule_conservativeness * 0.3`
                      (admission's new-token ratio) is not modelled
    budget interval   SGLANG_DATA_PARALLEL_BUDGET_INTERVAL (default 1): how often the DP controller's
                      `DPBudget` is refreshed from the ranks' loads, read only by the load-balance
                      methods that count (total_requests, total_tokens); the default round_robin never
                      reads it, and at 1 the counts are a step old at most, as the engine model's
                      dispatch reads them (specplan.simulator.engine.cluster.ranks)
    mixed chunk       --enable-mixed-chunk puts prompt chunks into decode batches (engine.prefill.schedule:
                      mixed); SGLang turns it off under EAGLE-family and DFlash speculative decoding
                      (server_args: "Mixed chunked prefill is disabled because of using ... speculative
                      decoding"); a scenario that mixes chunks under speculation asks for what SGLang
                      does not run. No cell of the replication suite passes the flag
    breakable graphs  sgl-project/sglang PR #25195 (merged May 2026): breakable piecewise CUDA graphs for
                      DeepSeek-V4 mixed/extend batches under DP attention, opt-in (a prefill graph backend)
                      and asked with mixed chunk; the later decode-to-extend conversion
                      (scheduler_components/dp_attn.py `maybe_convert_decode_to_extend`) needs breakable
                      prefill graphs, no speculation and no all-to-all backend (`get_moe_a2a_backend().is_none()`),
                      so no MegaMoE or DeepEP cell takes it. DeepSeek-V4 prefill stays eager under DP
                      attention in the rows here (specplan.engines.modes.RankVote.eager_prefill_models)

vLLM's rule (`chunks_per_rank`):

    ranks in lockstep vllm/v1/engine/core.py (`DPEngineCoreProc`, vllm-project/vllm at commit
    with prompt chunks 00080ee13c7a451fce071ccb8d0e94d395acf5a7): each DP rank is its own engine core with
                      its own scheduler, so its own token budget (--max-num-batched-tokens per rank) and its
                      own prompt chunks; `run_busy_loop` steps every rank together, a rank that ran no
                      request running `execute_dummy_batch`; attention runs on the rank's own tokens and the
                      MoE's all-to-all spans every rank's (vllm/v1/worker/dp_utils.py
                      `coordinate_batch_across_dp`: the ranks all-reduce their token counts each forward,
                      padded to the largest only where the step runs a CUDA graph). So a step whose ranks
                      hold prompt chunks lasts its busiest rank, as a decoding step does: the per-rank
                      forward (specplan.simulator.engine.price.forwards.PerRank) prices it whether or not
                      any row decodes. SGLang's mixed chunks (--enable-mixed-chunk, which no cell passes)
                      are not read here: its chunk-only steps keep the balanced forward
"""

from __future__ import annotations

from dataclasses import dataclass

DELAYER_SOURCE = ("sglang python/sglang/srt/managers/prefill_delayer.py (PrefillDelayer._negotiate_should_allow_"
                  "prefill: 'mixed' ranks delay up to max_delay_passes - 1 passes, then wait_timeout); server_args "
                  "enable_prefill_delayer=False, prefill_delayer_max_delay_passes=30 (sgl-project/sglang issue #23602)")
DEFAULT_DELAY_PASSES = 30
SPEC_IDLE_SOURCE = ("sglang python/sglang/srt/managers/scheduler.py get_next_batch_to_run: with a speculative "
                    "algorithm and DP attention, prepare_mlp_sync_batch runs on the new prefill batch first, so a "
                    "rank with none runs an idle batch while any rank prefills (decode waits)")


@dataclass(frozen=True)
class PrefillDelayerRule:
    """SGLang's prefill delayer: off unless asked for; `max_delay_passes` consecutive passes at most."""

    max_delay_passes: int
    source: str


@dataclass(frozen=True)
class DpScheduler:
    """The engine's rules for running DP-attention ranks together (module docstring); `delayer` None: the
    engine has no prefill delayer."""

    delayer: PrefillDelayerRule | None
    sources: dict[str, str]
    spec_prefill_idle: bool = False   # under speculative decoding, ranks without a prefill batch idle while one runs
    chunks_per_rank: bool = False     # a step with prompt chunks (and no decoding row) is priced at its busiest rank


SGLANG_DP_SCHEDULER = DpScheduler(
    delayer=PrefillDelayerRule(max_delay_passes=DEFAULT_DELAY_PASSES, source=DELAYER_SOURCE),
    spec_prefill_idle=True,
    sources={"spec_prefill_idle": SPEC_IDLE_SOURCE,
             "budget_interval": "sglang environ.py SGLANG_DATA_PARALLEL_BUDGET_INTERVAL = EnvInt(1); "
                                "data_parallel_controller.py DPBudget (total_requests / total_tokens only)",
             "decode_while_extending": "sglang scheduler_components/dp_attn.py prepare_mlp_sync_batch",
             "mixed_chunk": "sglang server_args: --enable-mixed-chunk turned off under EAGLE / DFlash speculation",
             "breakable_graphs": "sgl-project/sglang PR #25195"},
)

VLLM_LOCKSTEP_SOURCE = ("vllm/v1/engine/core.py DPEngineCoreProc.run_busy_loop (vllm-project/vllm at commit "
                        "00080ee13c7a451fce071ccb8d0e94d395acf5a7): one engine core and scheduler per DP rank, every "
                        "rank steps together, a rank with no request runs execute_dummy_batch; "
                        "vllm/v1/worker/dp_utils.py coordinate_batch_across_dp (token counts all-reduced per forward)")

VLLM_DP_SCHEDULER = DpScheduler(delayer=None, chunks_per_rank=True, sources={"chunks_per_rank": VLLM_LOCKSTEP_SOURCE})
