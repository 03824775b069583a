"""Engines on their own terms: CUDA-graph padding, host time by engine, the token budget's rule, DP-attention caps.

Each rule is a small story checked by hand (docs/model/engine-terms.md): a 121-token
step pays for the 128-token graph; past the largest graph a step pays the
eager surcharge; greedy's early stop is trapped by the graph staircase
where async crosses it; a measured built-in pays its engine's host time on
speculating steps, in the clock and in Θ alike; vLLM's budget truncates a
request's drafts at the edge where the other rule defers whole requests,
each counted; and an attention rank's own token cap binds while the
step's total does not. Which rules an engine runs by is chosen once, when
its core is assembled.
"""

from __future__ import annotations

import ast

import numpy as np
import pytest

from specplan.engines.sglang import capture_sizes as sglang_capture_sizes
from specplan.engines.vllm import capture_sizes as vllm_capture_sizes
from specplan.hwprofiles import load_profile
from specplan.simulator.core.errors import ScenarioError
from specplan.simulator.engine.assembly import assemble
from specplan.simulator.engine.batch import RANK
from specplan.simulator.engine.budget import Defer, RankCaps, Truncate
from specplan.simulator.engine.caches import OneCache, RankCaches
from specplan.simulator.engine.cluster.simulation import simulate
from specplan.simulator.engine.config import EngineConfig
from specplan.simulator.engine.core.request_log import RequestLog
from specplan.simulator.engine.price.pricer import StepPricer
from specplan.simulator.engine.price.terms import SpeculationTerm
from specplan.simulator.engine.records.step_log import StepLog
from tests.conftest import REPO, make_scenario
from tests.drive import drive
from tests.price_grid import dp_parts_profile, load, step_load

LINEAR = {"kind": "linear", "base_ms": 10.0, "per_token_ms": 0.05}


def pricer(engine: dict, profile=LINEAR, block_size: int = 3) -> tuple[StepPricer, object]:
    scenario = make_scenario(hardware={"profile": profile}, engine=engine)
    loaded = load_profile(scenario.hardware.profile)
    config = EngineConfig.from_scenario(scenario, loaded, block_size)
    return StepPricer(loaded, lambda r, c, n, positions=None: 0.0, config, pays_scheduling=False), loaded


def spec_fraction(priced: StepPricer) -> float:
    """The share of a plain step a speculating step's host time adds (0: the engine's terms have none)."""
    return next((term.fraction for term in priced.terms if isinstance(term, SpeculationTerm)), 0.0)


def test_the_engines_default_capture_lists_are_their_sources():
    sizes = vllm_capture_sizes(512)
    assert sizes[:5] == [1, 2, 4, 8, 16] and 248 in sizes and 256 in sizes and 264 not in sizes and 272 in sizes
    assert sizes[-1] == 512
    spec = sglang_capture_sizes(256, True)
    assert spec[:9] == [1, 2, 3, 4, 5, 6, 7, 8, 10] and 34 not in spec and 40 in spec and spec[-1] == 256
    assert sglang_capture_sizes(64, False) == [1, 2, 4, 8, 16, 24, 32, 40, 48, 56, 64]


def test_a_121_token_step_is_priced_at_the_128_token_graph():
    quotes, profile = pricer({"cuda_graph": {"engine": "vllm"}, "max_step_tokens": 1024, "max_batch_requests": 64})
    quote = quotes.quote(30, 30, 0, 0, 0)
    assert quote.verify_ms(121) == pytest.approx(float(profile.step_ms(128)))
    assert quote.verify_ms(128) == pytest.approx(float(profile.step_ms(128)))
    assert quote.verify_ms(129) == pytest.approx(float(profile.step_ms(136)))
    # vLLM's default largest graph: min(max_num_seqs · (1 + k) · 2, 512): 16 requests, k = 3 → 128 tokens
    small, _ = pricer({"cuda_graph": {"engine": "vllm"}, "max_step_tokens": 1024})
    assert small.graphs.largest == 128
    assert small.quote(30, 30, 0, 0, 0).verify_ms(129) == pytest.approx(float(profile.step_ms(129)) + 2.0)
    # Θ's table is the same padded price
    assert quote.steps_per_s_range(121, 122)[0] == pytest.approx(1000.0 / quote.step_ms(128))


def test_past_the_largest_graph_a_step_runs_eager_and_pays_the_surcharge():
    quotes, profile = pricer({"cuda_graph": {"engine": "vllm", "max_capture_size": 256, "eager_overhead_ms": 1.5},
                              "max_step_tokens": 1024})
    quote = quotes.quote(64, 64, 0, 0, 0)
    assert quote.verify_ms(256) == pytest.approx(float(profile.step_ms(256)))
    assert quote.verify_ms(257) == pytest.approx(float(profile.step_ms(257)) + 1.5)


def test_sglang_pads_requests_and_each_padded_row_carries_the_steps_width():
    quotes, profile = pricer({"cuda_graph": {"engine": "sglang", "max_capture_size": 12, "eager_overhead_ms": 1.0},
                              "max_batch_requests": 16, "max_step_tokens": 256})
    nine = quotes.quote(9, 9, 9, 0, 3)  # 9 requests pad to the 10-request graph
    assert nine.verify_ms(36) == pytest.approx(float(profile.step_ms(40)))
    assert nine.steps_per_s(np.array([36]))[0] == pytest.approx(1000.0 / nine.step_ms(36))
    beyond = quotes.quote(13, 13, 13, 0, 3)  # past cuda_graph_max_bs: eager, unpadded
    assert beyond.verify_ms(52) == pytest.approx(float(profile.step_ms(52)) + 1.0)


def staircase_run(policy: str):
    """4 users, γ = 7, near-certain drafts; graphs at 8 and 16 tokens only, eager past 16 costs 4 ms."""
    return simulate(make_scenario(
        horizon={"duration_s": 4, "warmup_s": 0.5},
        engine={"max_batch_requests": 4, "max_step_tokens": 64,
                "cuda_graph": {"engine": "vllm", "capture_sizes": [8, 16], "eager_overhead_ms": 4.0}},
        drafter={"family": "dspark", "block_size": 7,
                 "acceptance": {"per_position": {"chat": [0.95] * 7}, "domains": {"chat": 1.0}},
                 "confidence": {"kind": "perfect"}, "latency": {"kind": "fixed", "ms": 0.5}},
        policy={"name": policy},
        workload={"arrivals": {"kind": "closed_loop", "users": 4, "think_s": 0},
                  "prompt_tokens": {"kind": "fixed", "value": 100}, "output_tokens": {"kind": "fixed", "value": 200}},
    ))


def test_greedy_is_trapped_at_the_graph_cliff_and_async_crosses_it():
    greedy, asynchronous = staircase_run("dspark-greedy"), staircase_run("dspark-async")
    # greedy never leaves the 16-token graph: the 17th token costs 4 ms more, Θ drops there and it stops;
    # async's global search sees that 32 tokens pay for the jump and verifies past it
    assert greedy.steps["verify_tokens"].max() <= 16
    assert (asynchronous.steps["verify_tokens"] > 16).mean() > 0.5
    g, a = greedy.summary, asynchronous.summary
    assert a["mean_verify_tokens_per_request_step"] > g["mean_verify_tokens_per_request_step"] + 2
    assert a["throughput_tokens_per_s"] > g["throughput_tokens_per_s"]


def test_a_measured_builtin_pays_its_engines_host_time_on_speculating_steps_only():
    engine = {"max_batch_requests": 8, "kv_capacity_tokens": 100_000}
    builtin = "builtin:h200-llama3.1-8b-vllm"
    vllm, profile = pricer(engine, builtin)
    assert spec_fraction(vllm) == pytest.approx(0.084)
    quote = vllm.quote(8, 8, 8, 8000, 3)
    plain = vllm.quote(8, 8, 0, 8000, 0)
    assert plain.host_ms == 0.0
    assert quote.host_ms == pytest.approx(0.084 * float(profile.step_ms(8, 8000)))
    assert quote.steps_per_s(np.array([32]))[0] == pytest.approx(1000.0 / quote.step_ms(32))
    sglang, _ = pricer({**engine, "host": {"engine": "sglang"}}, builtin)
    assert spec_fraction(sglang) == pytest.approx(0.049)
    off, _ = pricer({**engine, "host": {"engine": "none"}}, builtin)
    assert spec_fraction(off) == 0.0
    inline, _ = pricer(engine)  # not a measured built-in: no engine's host time unless asked
    assert spec_fraction(inline) == 0.0


def budget_story(rule: str):
    """10 requests, static length 3 (4 tokens each), a 30-token budget."""
    scenario = make_scenario(engine={"max_batch_requests": 16, "max_step_tokens": 30, "budget": rule})
    plans = []
    driven = drive(scenario, np.full(10, 50), np.full(10, 20), on_plan=lambda core, plan: plans.append(plan))
    return plans[0], driven


def test_vllms_budget_truncates_drafts_at_the_edge_where_defer_waits_whole_requests():
    truncate, driven = budget_story("truncate")
    # 7 requests take 4 tokens (28); the 8th keeps its anchor and 1 draft; 2 requests have no budget left
    assert truncate.verify_tokens == 30 and truncate.decode_requests == 8
    assert list(truncate.lengths) == [3] * 7 + [1]
    assert truncate.truncated_drafts == 2 and truncate.deferred_requests == 2
    defer, _ = budget_story("defer")
    assert defer.verify_tokens == 28 and defer.decode_requests == 7
    assert defer.truncated_drafts == 0 and defer.deferred_requests == 3
    assert int(driven.log["generated_tokens"][:10].sum()) == 200


def test_truncations_and_deferrals_are_counted_in_the_summary():
    def run(rule: str) -> dict:
        return simulate(make_scenario(
            horizon={"duration_s": 6, "warmup_s": 1},
            engine={"max_batch_requests": 16, "max_step_tokens": 30, "budget": rule},
            workload={"arrivals": {"kind": "closed_loop", "users": 10, "think_s": 0}})).summary

    truncate, defer = run("truncate"), run("defer")
    assert truncate["draft_tokens_truncated"] > 0 and defer["draft_tokens_truncated"] == 0
    assert defer["request_steps_deferred"] > truncate["request_steps_deferred"] > 0


def test_an_attention_ranks_own_token_cap_binds_while_the_steps_total_does_not():
    scenario = make_scenario(engine={"max_batch_requests": 16, "max_step_tokens": 256, "budget": "defer",
                                     "dp_attention": {"ranks": 2, "max_step_tokens": 8}})
    plans, ranks = [], []

    def look(core, plan):
        plans.append(plan)
        ranks.append(core.state.batch.ints[RANK][plan.rows.index].copy())

    drive(scenario, np.full(8, 50), np.full(8, 20), on_plan=look)
    first = plans[0]
    # admission spread the 8 requests 4 + 4; each rank runs the 2 whose 4 tokens fit its 8-token cap
    assert np.bincount(ranks[0]).tolist() == [2, 2]
    assert first.decode_requests == 4 and first.deferred_requests == 4 and first.verify_tokens == 16
    for plan, rows_rank in zip(plans, ranks, strict=True):
        tokens = 1 + np.broadcast_to(plan.lengths, rows_rank.shape)
        assert (np.bincount(rows_rank, weights=tokens, minlength=2) <= 8).all()


def test_each_attention_rank_holds_its_own_kv_cache():
    """Footprints of 304 tokens at admission: a 500-token rank holds one; one 1000-token cache holds three."""
    workload = {"arrivals": {"kind": "closed_loop", "users": 8, "think_s": 0},
                "prompt_tokens": {"kind": "fixed", "value": 300}, "output_tokens": {"kind": "fixed", "value": 50}}

    def run(**engine) -> object:
        return simulate(make_scenario(horizon={"duration_s": 5, "warmup_s": 0}, workload=workload,
                                      engine={"max_batch_requests": 16, "kv_capacity_tokens": 1000, **engine}))

    assert run(dp_attention={"ranks": 2}).steps["batch_requests"].max() == 2
    assert run().steps["batch_requests"].max() == 3
    scenario = make_scenario(engine={"max_batch_requests": 16, "kv_capacity_tokens": 1000,
                                     "dp_attention": {"ranks": 2}})

    def per_rank_kv_fits(core):
        ranks = core.state.batch.ints[RANK]
        held = np.bincount(ranks, weights=core.state.footprints(), minlength=2)
        rows = np.bincount(ranks, minlength=2)
        assert ((held <= 500) | (rows == 1)).all()

    driven = drive(scenario, np.full(6, 300), np.full(6, 120), on_step=per_rank_kv_fits)
    assert int(driven.log["generated_tokens"][:6].sum()) == 720


def test_a_rank_cap_below_one_block_is_refused():
    with pytest.raises(ScenarioError, match=r"dp_attention\.max_step_tokens"):
        make_scenario(engine={"max_batch_requests": 16, "dp_attention": {"ranks": 2, "max_step_tokens": 3}})


def test_async_pays_drafting_only_for_the_positions_its_capacity_can_verify():
    """Cold start: K = 4 (1 per request) < γ = 7, so no request can verify more than 4 drafts and the
    DSpark backbone runs over R·(4 + 1) positions with 4 head steps, not R·(7 + 1) and 7."""
    scenario = make_scenario(
        drafter={"family": "dspark", "block_size": 7,
                 "acceptance": {"per_position": {"chat": [0.9] * 7}, "domains": {"chat": 1.0}},
                 "confidence": {"kind": "perfect"},
                 "latency": {"kind": "layers", "target_layers": 32, "drafter_layers": 2}},
        policy={"name": "dspark-async"})
    plans = []
    drive(scenario, np.full(4, 50), np.full(4, 30), on_plan=lambda core, plan: plans.append(plan))
    drafter = assemble(scenario).drafter
    assert plans[0].quote.draft_ms == pytest.approx(drafter.draft_ms(4, 0.0, 4))
    assert plans[0].quote.draft_ms < drafter.draft_ms(4, 0.0, 7)
    assert max(int(np.max(p.lengths)) for p in plans) > 1  # later steps plan past one draft and draft the block


@pytest.mark.parametrize("name", ["dspark-greedy", "dspark-async"])
def test_a_policy_that_fits_the_budget_is_held_to_each_ranks_cap_without_deferring(name):
    """Each rank's candidates are cut to what its cap can verify before the policy chooses: no request waits."""
    scenario = make_scenario(
        engine={"max_batch_requests": 16, "max_step_tokens": 256, "dp_attention": {"ranks": 2, "max_step_tokens": 12}},
        drafter={"family": "dspark", "block_size": 5,
                 "acceptance": {"per_position": {"chat": [0.95] * 5}, "domains": {"chat": 1.0}},
                 "confidence": {"kind": "perfect"}, "latency": {"kind": "fixed", "ms": 0.5}},
        policy={"name": name})
    seen = []

    def look(core, plan):
        ranks = core.state.batch.ints[RANK][plan.rows.index]
        tokens = 1 + np.broadcast_to(plan.lengths, ranks.shape)
        seen.append((plan.deferred_requests, np.bincount(ranks, weights=tokens, minlength=2).max()))

    drive(scenario, np.full(8, 50), np.full(8, 40), on_plan=look)
    assert all(deferred == 0 for deferred, _ in seen)
    assert max(tokens for _, tokens in seen) == 12  # the cap binds, and holds


def test_under_dp_attention_each_rank_pads_to_its_own_graph():
    # 4 ranks of 64 tokens: each rank captures vLLM's list up to 64, the step pads to 4 × pad(⌈B / 4⌉)
    quotes, profile = pricer({"cuda_graph": {"engine": "vllm"}, "max_step_tokens": 1024, "max_batch_requests": 256,
                              "dp_attention": {"ranks": 4, "max_step_tokens": 64}})
    assert quotes.graphs.largest == 256
    quote = quotes.quote(30, 30, 0, 0, 0)
    assert quote.verify_ms(121) == pytest.approx(float(profile.step_ms(128)))   # 31 per rank → 32
    assert quote.verify_ms(130) == pytest.approx(float(profile.step_ms(160)))   # 33 per rank → 40
    assert quote.verify_ms(256) == pytest.approx(float(profile.step_ms(256)))   # no eager step below the caps


@pytest.mark.parametrize(("engine", "policy", "rule", "caches"), [
    ({"budget": "defer"}, {"name": "static", "params": {"length": 3}}, Defer, OneCache),
    ({"budget": "truncate"}, {"name": "static", "params": {"length": 3}}, Truncate, OneCache),
    ({"budget": "truncate"}, {"name": "dspark-greedy"}, Defer, OneCache),  # it chooses within the budget
    ({"budget": "defer", "dp_attention": {"ranks": 2}}, {"name": "static", "params": {"length": 3}}, RankCaps,
     RankCaches),
])
def test_each_engines_rules_are_chosen_once_when_its_core_is_assembled(engine, policy, rule, caches):
    """The budget rule and the KV caches are objects the core is built with, not branches in its step."""
    parts = assemble(make_scenario(engine=engine, policy=policy))
    core = parts.core(RequestLog(), StepLog())
    assert type(core.rules.budget) is rule and type(core.rules.kv) is caches
    assert not hasattr(core, "ranked") and not hasattr(core, "truncates")


def test_a_per_verified_token_term_is_priced_once_for_the_clock_and_every_policy():
    """The worked example of CONTRIBUTING's "an engine term": the sampler's time per verified token.

    A step of B tokens costs sampling_ms_per_token · B more, in the quote the policy's Θ reads and in
    what the clock charges, and the term lives in two source files: its key and one term class of the price.
    """
    plain, _ = pricer({"max_step_tokens": 512})
    sampled, _ = pricer({"max_step_tokens": 512, "sampling_ms_per_token": 0.01})
    for tokens in (1, 64, 300):
        extra = sampled.quote(8, 8, 0, 0, 0).step_ms(tokens) - plain.quote(8, 8, 0, 0, 0).step_ms(tokens)
        assert extra == pytest.approx(0.01 * tokens)
    lines = {path.relative_to(REPO).as_posix() for folder in ("simulator", "policies", "hwprofiles", "engines")
             for path in (REPO / folder).rglob("*.py") if "sampling_ms_per_token" in path.read_text()}
    assert lines == {"simulator/scenario/spec.py", "simulator/engine/price/terms.py"}
    terms = REPO / "simulator/engine/price/terms.py"
    text = terms.read_text()
    naming = [node.name for node in ast.walk(ast.parse(text)) if isinstance(node, ast.ClassDef)
              and "sampling_ms_per_token" in (ast.get_source_segment(text, node) or "")]
    assert naming == ["SamplerTerm"]


@pytest.mark.parametrize("engine", [
    {"max_step_tokens": 512},                                                                   # token-dense
    {"max_step_tokens": 512, "cuda_graph": {"engine": "vllm", "max_capture_size": 64}},         # token-dense, graphs
    {"max_step_tokens": 256, "cuda_graph": {"engine": "sglang", "max_capture_size": 12}},       # request-padded
    {"max_step_tokens": 512, "dp_attention": {"ranks": 2},                                      # per rank
     "prefill": {"mode": "chunked", "chunk_tokens": 600, "schedule": "separate"}},
])
def test_the_sampler_is_paid_per_verified_token_whichever_forward_prices_the_step(engine, tmp_path):
    """Issue 46: the one term on every forward, a separate prefill batch on DP ranks included (it was dropped)."""
    parts = {"hardware": {"profile": dp_parts_profile(tmp_path)}} if "dp_attention" in engine else {}
    plain, sampled = (pricer_of(make_scenario(engine={"max_batch_requests": 16, **engine, **extra}, **parts))
                      for extra in ({}, {"sampling_ms_per_token": 0.01}))
    loads = [None] if "dp_attention" not in engine else [
        step_load(load(2, [30, 10])), step_load(load(2, [0, 10], [300, 0], [90_000, 0]))]
    for given in loads:
        for tokens in (40, 121, 250):
            with_sampler = sampled.quote(10, 10, 10, 0, 3, load=given).step_ms(tokens)
            assert with_sampler - plain.quote(10, 10, 10, 0, 3, load=given).step_ms(tokens) == \
                pytest.approx(0.01 * tokens)


def pricer_of(scenario) -> StepPricer:
    loaded = load_profile(scenario.hardware.profile)
    return StepPricer(loaded, lambda r, c, n, positions=None: 0.0, EngineConfig.from_scenario(scenario, loaded, 3),
                      pays_scheduling=False)
