"""Prefill as the engines schedule it, and data-parallel steps at their busiest rank: small stories.

SGLang runs a prefill batch apart from decode (a decoding request's next token
waits for it), vLLM mixes prompt chunks into decode steps; under
data-parallel attention a request goes to the rank the engine's dispatch
picks, each rank prefills or decodes on its own, and the step lasts as long
as its busiest rank: the MoE block over every rank's tokens plus the
slowest rank's own part. The summary counts prefill steps, the decode time
held by them and how unevenly the ranks were loaded; every request still
ends completed or rejected.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from specplan.hwprofiles import load_profile
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.engine.assembly import assemble
from specplan.simulator.engine.cluster.ranks import RankRouter
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.phases import Mixed, Separate
from specplan.simulator.engine.price.forwards import RankQuote
from specplan.simulator.engine.price.pricer import StepPricer
from specplan.simulator.engine.price.rank_load import StepLoad
from specplan.simulator.study.replication.step_price import StaticBatch
from tests.conftest import REPO, make_scenario
from tests.drive import drive

NO_DRAFTS = {"policy": {"name": "none"}}


def chunked(schedule: str, **engine) -> dict:
    return {"engine": {"max_batch_requests": 4, "prefill": {"mode": "chunked", "chunk_tokens": 1000,
                                                            "schedule": schedule}, **engine}, **NO_DRAFTS}


def two_requests(schedule: str):
    """A 10-token prompt and a 4,000-token one, both queued at t = 0, prompts in chunks of 1,000 (FIFO: the first
    chunk holds the short prompt and 990 of the long one)."""
    plans = []
    driven = drive(make_scenario(**chunked(schedule)), np.array([10, 4000]), np.array([30, 5]),
                   on_plan=lambda core, plan: plans.append(plan))
    return driven, plans


def test_a_separate_prefill_batch_holds_decode_and_a_mixed_one_does_not():
    separate, held_plans = two_requests("separate")
    mixed, mixed_plans = two_requests("mixed")
    # separate: while the long prompt is computed, the short request (its first token out) decodes nothing
    prefilling = [p for p in held_plans if p.prefill_tokens]
    assert [p.prefill_tokens for p in prefilling] == [1000, 1000, 1000, 1000, 10]
    assert all(p.decode_requests == 0 for p in prefilling)
    assert [p.held_requests for p in prefilling] == [0, 1, 1, 1, 1]
    # mixed: the same chunks ride in decode steps with the short request
    assert [p.decode_requests for p in mixed_plans if p.prefill_tokens] == [0, 1, 1, 1, 1]
    # the short request's next token waits for the four prefill batches (it decodes in step 6, not step 2)
    frames = {name: run.steps.frame() for name, run in (("separate", separate), ("mixed", mixed))}
    first_decode = {name: int((frame["decode_requests"] > 0).to_numpy().argmax()) for name, frame in frames.items()}
    assert first_decode == {"separate": 5, "mixed": 1}
    waited = frames["separate"]["end_s"][5] - frames["separate"]["end_s"][0]
    assert waited > frames["mixed"]["end_s"][1] - frames["mixed"]["end_s"][0]
    first = {name: float(run.log["first_token_s"][0]) for name, run in (("separate", separate), ("mixed", mixed))}
    assert first["separate"] == pytest.approx(first["mixed"])  # its own prompt was in the first step either way


def test_auto_is_separate_for_sglang_profiles_and_mixed_otherwise():
    linear = assemble(make_scenario(**chunked("auto")))
    assert linear.config.prefill_schedule == "mixed"
    sglang = assemble(make_scenario(hardware={"profile": "builtin:b200-deepseek-v4-flash-tp4-sglang"},
                                    engine={"max_batch_requests": 4, "kv_capacity_tokens": 100_000,
                                            "prefill": {"mode": "chunked", "chunk_tokens": 1000}}, **NO_DRAFTS))
    assert sglang.config.prefill_schedule == "separate"


def dp_parts_profile(tmp_path: Path) -> str:
    """A profile of 2 attention ranks: the MoE block costs 1 + 0.01·B at the step's B, a rank's own part
    2 + 0.02·B at B = 2 × its tokens (the file's layout), no context axis."""
    tokens = [1, 512, 1024]
    shared = [1 + 0.01 * b for b in tokens]
    own = [2 + 0.02 * b for b in tokens]
    lines = ["# format: specplan-profile/1", "# name: dp2-parts", "# source: a hand-made test table",
             "# device: none", "# model: none", "# statistic: exact", "# extrapolation: none", "tokens,step_ms",
             *(f"{b},{s + o:.6f}" for b, s, o in zip(tokens, shared, own, strict=True)),
             "# table: parts", "tokens,dispatch_ms,routed_experts_ms,combine_ms,norms_ms",
             *(f"{b},0,{s:.6f},0,{o:.6f}" for b, s, o in zip(tokens, shared, own, strict=True))]
    path = tmp_path / "dp2.csv"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def dp_pricer(tmp_path: Path, **engine) -> StepPricer:
    scenario = make_scenario(hardware={"profile": dp_parts_profile(tmp_path)},
                             engine={"max_batch_requests": 16, "max_step_tokens": 512,
                                     "dp_attention": {"ranks": 2}, **engine}, **NO_DRAFTS)
    profile = load_profile(scenario.hardware.profile)
    config = EngineConfig.from_scenario(scenario, profile, 0)
    return StepPricer(profile, lambda r, c, n, positions=None: 0.0, config, pays_scheduling=False)


def load(anchors, prefill=(0, 0), pairs=(0, 0)) -> StepLoad:
    zero = np.zeros(2, dtype=np.int64)
    return StepLoad(np.array(anchors), zero, zero.astype(float), np.array(prefill), np.array(pairs, dtype=float),
                    zero.astype(float))


def test_a_data_parallel_step_lasts_its_busiest_rank(tmp_path):
    pricer = dp_pricer(tmp_path)
    even = pricer.quote(40, 40, 0, 0, 0, load=load([20, 20]))
    skewed = pricer.quote(40, 40, 0, 0, 0, load=load([30, 10]))
    assert isinstance(skewed, RankQuote)
    # an even split is the file's step at B = 40; a 30/10 split is the MoE block at 40 + rank 0's own part at 2 × 30
    assert even.verify_ms(40) == pytest.approx(1 + 0.01 * 40 + 2 + 0.02 * 40)
    assert skewed.verify_ms(40) == pytest.approx(1 + 0.01 * 40 + 2 + 0.02 * 60)
    assert skewed.excess_ms(40) == pytest.approx((0.02 * 60 - 0.02 * 20) / 2)
    # Θ reads the same price: the policy's steps/s at B is the clock's
    assert skewed.steps_per_s(np.array([40]))[0] == pytest.approx(1000.0 / skewed.step_ms(40))


def test_a_rank_that_prefills_holds_the_whole_step(tmp_path):
    """Rank 0 prefills 300 tokens while rank 1 decodes 10: the step is the MoE block over all 310 tokens and
    rank 0's prefill (priced, without a prefill profile, on the decode profile at 2 × 300)."""
    pricer = dp_pricer(tmp_path, prefill={"mode": "chunked", "chunk_tokens": 600, "schedule": "separate"})
    quote = pricer.quote(11, 10, 0, 0, 0, load=load([0, 10], prefill=[300, 0], pairs=[300 * 300, 0]))
    assert quote.verify_ms(310) == pytest.approx(1 + 0.01 * 310 + 2 + 0.02 * 600)


def test_a_step_with_a_prefill_batch_pays_the_sampler_per_verified_token(tmp_path):
    """Issue 46: the same step with the sampler at 0.01 ms per token reads 18.1 + 3.1 = 21.2 ms at B = 310 (the
    per-rank forward used to drop the term: 18.1 with and without it)."""
    args = (11, 10, 0, 0, 0)
    step = load([0, 10], prefill=[300, 0], pairs=[300 * 300, 0])
    separate = {"mode": "chunked", "chunk_tokens": 600, "schedule": "separate"}
    plain = dp_pricer(tmp_path, prefill=separate).quote(*args, load=step)
    sampled = dp_pricer(tmp_path, prefill=separate, sampling_ms_per_token=0.01).quote(*args, load=step)
    assert plain.step_ms(310) == pytest.approx(18.1)
    assert sampled.step_ms(310) == pytest.approx(21.2)
    assert sampled.steps_per_s(np.array([310]))[0] == pytest.approx(1000.0 / 21.2)


def chunk_load(chunks) -> StepLoad:
    """Prompt chunks per rank in a mixed step, no row decoding, nothing cached."""
    zero = np.zeros(2, dtype=np.int64)
    return StepLoad(zero, np.array(chunks), zero.astype(float), zero, zero.astype(float), zero.astype(float))


@pytest.mark.parametrize(("engine", "expected"), [
    ("vllm", 1 + 0.01 * 310 + 2 + 0.02 * 600),      # the MoE block over 310 tokens + rank 0's own part at 2 x 300
    ("none", 1 + 0.01 * 310 + 2 + 0.02 * 310),      # no lockstep rule: the 310 tokens as one even forward
])
def test_a_vllm_dp_step_of_prompt_chunks_lasts_its_busiest_rank(tmp_path, engine, expected):
    """vLLM's DP ranks each run their own engine core and step in lockstep (engines/dp_scheduler.py: vLLM's
    rule): rank 0 computing a 300-token prompt chunk while rank 1 computes 10, no row decoding, lasts rank 0's
    forward: 18.1 ms, not 12.3 (the step's 310 tokens spread evenly, as it was priced before)."""
    mixed = {"mode": "chunked", "chunk_tokens": 600, "schedule": "mixed"}
    pricer = dp_pricer(tmp_path, name=engine, prefill=mixed)
    quote = pricer.quote(2, 0, 0, 0, 0, load=chunk_load([300, 10]), prefill_tokens=310)
    assert quote.step_ms(310) == pytest.approx(expected)
    even = pricer.quote(2, 0, 0, 0, 0, load=chunk_load([155, 155]), prefill_tokens=310)
    assert even.step_ms(310) == pytest.approx(1 + 0.01 * 310 + 2 + 0.02 * 310)
    if engine == "vllm":
        assert isinstance(quote, RankQuote)
        assert quote.excess_ms(310) == pytest.approx((0.02 * 600 - 0.02 * 20) / 2)


def test_a_static_batch_on_vllm_dp_ranks_prefills_at_the_busiest_rank(tmp_path):
    """Three 300-token prompts on two vLLM DP ranks, 300 prompt tokens per rank per step (rank 0 holds prompts 0
    and 2): step 1 is even (600 tokens: 7 + 14 = 21 ms), step 2 is rank 0 alone with prompt 2: the MoE block at
    300 tokens and rank 0's own part at 2 x 300, 4 + 14 = 18 ms (12 ms when priced as one even forward)."""
    scenario = make_scenario(hardware={"profile": dp_parts_profile(tmp_path)},
                             engine={"name": "vllm", "max_batch_requests": 16, "max_step_tokens": 600,
                                     "prefill": {"mode": "chunked", "chunk_tokens": 600, "schedule": "mixed"},
                                     "dp_attention": {"ranks": 2, "balance": "round_robin", "max_step_tokens": 300,
                                                      "chunk_tokens": 300}}, **NO_DRAFTS)
    first_tokens = StaticBatch.of(scenario).first_tokens_ms(3, 300)
    assert first_tokens == pytest.approx([21.0, 21.0, 39.0])


def test_vllm_dp_chunks_past_the_profiles_steps_are_refused_in_one_line(tmp_path):
    """Two ranks of 600 chunk tokens each read the hand-made table at 1,200 tokens together and at 2 x 600 for a
    rank, past the 1,024 it prices: refused when the engine is built (it used to fail mid-run on an index)."""
    with pytest.raises(ScenarioError, match=r"engine.dp_attention.max_step_tokens: .*2 DP ranks each compute up to "
                                            r"600 .*1,200 together.*at most 512 per rank"):
        dp_pricer(tmp_path, name="vllm", max_step_tokens=1024,
                  prefill={"mode": "chunked", "chunk_tokens": 1200, "schedule": "mixed"},
                  dp_attention={"ranks": 2, "max_step_tokens": 600, "chunk_tokens": 600})


def test_vllm_51454s_dp8_step_case_names_the_table_it_lacks():
    """vLLM #51454's DP8 step: each rank computes 8,192 prompt tokens a step, priced per rank at 8 x 8,192 on the
    DP8 built-in, whose steps stop at 8,192 tokens: its engine is refused in one line, and every workload of the
    case says which table is missing instead of a figure."""
    from specplan.simulator.scenario import load_scenario
    from specplan.simulator.study.replication.published import read_case

    folder = REPO / "benchmarks" / "published" / "vllm-51454-v4-flash-b200-dp8-step"
    with pytest.raises(ScenarioError, match=r"8 DP ranks each compute up to 8,192 .*65,536 together.*"
                                            r"b200-deepseek-v4-flash-dp8ep8-vllm .*at most 1,024 per rank"):
        StaticBatch.of(load_scenario(folder / "scenario.yaml"))
    workloads = read_case(folder).source["workloads"]
    assert all("a B200 DP8 EP8 context-phase table to 65,536 tokens" in w["unavailable"] for w in workloads.values())


def test_the_engines_dispatch_sends_requests_to_ranks():
    turn = RankRouter("round_robin", 3)
    assert [turn.send(rid, np.array([], dtype=np.int64)) for rid in range(5)] == [0, 1, 2, 0, 1]
    assert turn.send(1, np.array([], dtype=np.int64)) == 1          # a preempted request keeps its rank
    least = RankRouter("least_loaded", 2)  # vLLM: 4 x waiting + running
    assert least.send(0, np.array([0, 0, 0])) == 1                  # 3 running on rank 0, none on rank 1
    assert least.send(1, np.array([0, 0, 0])) == 0                  # 3 running beat 1 waiting (4 x 1)
    assert least.send(2, np.array([0, 0, 0])) == 1                  # 4 x 1 + 3 against 4 x 1
    fewest = RankRouter("fewest_requests", 2)   # SGLang total_requests: running + waiting
    assert [fewest.send(rid, np.array([0, 0, 0])) for rid in range(4)] == [1, 1, 1, 0]


SEPARATE_DP = {
    "hardware": {"profile": "builtin:b200-deepseek-v4-flash-dp4ep4-sglang", "gpus_per_replica": 4},
    "horizon": {"duration_s": 6, "warmup_s": 1},
    "engine": {"max_batch_requests": 64, "kv_capacity_tokens": 400_000, "max_step_tokens": 1024,
               "prefill": {"mode": "chunked", "chunk_tokens": 4096, "schedule": "separate",
                           "profile": "builtin:b200-deepseek-v4-flash-dp4ep4-sglang-prefill"},
               "dp_attention": {"ranks": 4, "balance": "round_robin"}},
    "workload": {"arrivals": {"kind": "poisson", "rate_per_s": 6},
                 "prompt_tokens": {"kind": "lognormal", "median": 2000, "sigma": 0.8, "max": 30_000},
                 "output_tokens": {"kind": "lognormal", "median": 100, "sigma": 0.6, "max": 500}},
    **NO_DRAFTS,
}


def test_separate_prefill_on_data_parallel_ranks_counts_and_conserves():
    result = simulate(make_scenario(**SEPARATE_DP))
    summary, steps = result.summary, result.steps
    assert summary["engine_prefill_steps"] == int((steps["prefill_tokens"] > 0).sum()) > 0
    assert 0 < summary["engine_prefill_step_share"] < 1
    assert summary["decode_request_steps_held"] > 0 and summary["decode_held_request_s"] > 0
    assert summary["dp_busiest_over_mean_tokens"] > 1 and 0 < summary["dp_imbalance_share_of_step"] < 1
    # every arrived request is completed, still running, or rejected with its reason
    assert summary["requests_arrived"] == (summary["requests_completed"] + summary["requests_running"]
                                           + summary["requests_rejected"])
    assert summary["requests_rejected"] == summary["requests_rejected_kv_capacity"]
    # a 30,000-token prompt beyond one rank's 100,000 tokens of KV is fine; the engine's caps hold per rank
    assert steps["batch_requests"].max() <= 64


def test_a_bench_client_on_separate_dp_ranks_completes_every_request():
    bench = {"arrivals": {"kind": "bench_client", "num_prompts": 24, "max_concurrency": 8, "warmup_requests": 2,
                          "client": "sglang"},
             "prompt_tokens": {"kind": "fixed", "value": 3000}, "output_tokens": {"kind": "fixed", "value": 40}}
    result = simulate(make_scenario(**{**SEPARATE_DP, "horizon": {"requests": 26}, "workload": bench}))
    assert result.summary["requests_completed"] == result.summary["requests_arrived"] == 26


def test_the_engine_assembles_each_schedule_once():
    assert isinstance(assemble(make_scenario(**chunked("mixed"))).core(*log_and_steps()).rules.phases, Mixed)
    assert isinstance(assemble(make_scenario(**chunked("separate"))).core(*log_and_steps()).rules.phases, Separate)


def log_and_steps():
    from specplan.simulator.engine.core.request_log import RequestLog
    from specplan.simulator.engine.records.step_log import StepLog

    return RequestLog(), StepLog()


def test_bad_prefill_settings_are_refused_in_one_line():
    with pytest.raises(ScenarioError, match=r"engine\.prefill\.profile: .*not a prefill-step profile"):
        make_scenario(engine={"prefill": {"mode": "chunked", "chunk_tokens": 512,
                                          "profile": "builtin:h200-llama3.1-8b-vllm"}})
    with pytest.raises(ScenarioError, match=r"engine\.dp_attention\.chunk_tokens: .*needs chunked prefill"):
        make_scenario(engine={"dp_attention": {"ranks": 2, "chunk_tokens": 256}})
    with pytest.raises(ScenarioError, match=r"engine\.prefill\.chunk_tokens: 32768 .*beyond the prefill profile"):
        make_scenario(engine={"prefill": {"mode": "chunked", "chunk_tokens": 32768, "schedule": "separate",
                                          "profile": "builtin:h200-llama3.1-8b-vllm-prefill"}})
    with pytest.raises(ScenarioError, match=r"engine\.prefill\.schedule"):
        make_scenario(engine={"prefill": {"mode": "chunked", "chunk_tokens": 512, "schedule": "apart"}})


def test_a_v4_prefill_builtin_splits_into_the_moe_block_and_each_ranks_own_part():
    profile = load_profile("builtin:b200-deepseek-v4-flash-dp4ep4-sglang-prefill")
    assert profile.provenance["phase"] == "prefill" and "Dsv4Context" in profile.provenance["composition"]
    parts, attention = profile.extra["parts"], profile.extra["columns"]["attention_ms"]
    assert {"dispatch_ms", "routed_experts_ms", "combine_ms", "mhc_ms"} <= set(parts)
    # the parts are the non-attention time: step = Σ parts + attention + the LM head (its R tokens' share)
    remainder = profile.step_ms_table - attention - sum(parts.values())[None, :]
    assert np.all(remainder > 0)
    # 16,384 prompt tokens over 4 ranks with no prefix cost more than 4,096 do, and less than 4x as much
    small, large = (float(profile.step_ms(t, t * 4096)) for t in (4096, 16384))
    assert small < large < 4 * small
