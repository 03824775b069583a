"""How an engine's scheduler runs data-parallel attention ranks together: SGLang's rules, read at the source.

Place in the data flow: an engine's row (specplan.engines.traits) carries a
`DpScheduler`; the engine model reads it when its core is assembled
(specplan.simulator.engine.phases: the prefill schedule) and nowhere else.
Under DP attention every rank runs each forward together (the MoE all-to-all
meets them), so what one rank schedules decides the step of all.

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
    budget interval   SGLANG_DATA_PARALLEL_BUDGET_INTERVAL (default 1): how often the DP controller's
                      `DPBudget` is refreshed from the ranks' loads, read only by the load-balance
                      methods that count (total_requests, total_tokens); the default round_robin never
                      reads it, and at 1 the counts are a step old at most, as the engine model's
                      dispatch reads them (specplan.simulator.engine.cluster.ranks)
    mixed chunk       --enable-mixed-chunk puts prompt chunks into decode batches (engine.prefill.schedule:
                      mixed); SGLang turns it off under EAGLE-family and DFlash speculative decoding
                      (server_args: "Mixed chunked prefill is disabled because of using ... speculative
                      decoding"); a scenario that mixes chunks under speculation asks for what SGLang
                      does not run
    breakable graphs  sgl-project/sglang PR #25195 (breakable prefill CUDA graphs for DeepSeek-V4):
                      DeepSeek-V4 prefill stays eager under DP attention in the rows here
                      (specplan.engines.modes.RankVote.eager_prefill_models)
"""

from __future__ import annotations

from dataclasses import dataclass

DELAYER_SOURCE = ("sglang python/sglang/srt/managers/prefill_delayer.py (PrefillDelayer._negotiate_should_allow_"
                  "prefill: 'mixed' ranks delay up to max_delay_passes - 1 passes, then wait_timeout); server_args "
                  "enable_prefill_delayer=False, prefill_delayer_max_delay_passes=30 (sgl-project/sglang issue #23602)")
DEFAULT_DELAY_PASSES = 30


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


SGLANG_DP_SCHEDULER = DpScheduler(
    delayer=PrefillDelayerRule(max_delay_passes=DEFAULT_DELAY_PASSES, source=DELAYER_SOURCE),
    sources={"budget_interval": "sglang environ.py SGLANG_DATA_PARALLEL_BUDGET_INTERVAL = EnvInt(1); "
                                "data_parallel_controller.py DPBudget (total_requests / total_tokens only)",
             "decode_while_extending": "sglang scheduler_components/dp_attn.py prepare_mlp_sync_batch",
             "mixed_chunk": "sglang server_args: --enable-mixed-chunk turned off under EAGLE / DFlash speculation",
             "breakable_graphs": "sgl-project/sglang PR #25195"},
)
