"""The reference engine: real forwards with per-request KV caches, driven by the simulator's models.

Model-level checks (flattened variable-length verification equals verifying
each request alone; chunked prefill equals one prefill; rejected drafts
leave no trace) use a micro decoder shape; engine stories run each policy
for about a second of wall-clock time and assert only what holds at any
machine speed (how many requests finish in that second does not).
"""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="the reference engine needs torch (the 'profile' extra)")

from specplan.hwprofiles.modelshape import ModelShape  # noqa: E402
from specplan.hwprofiles.profile import linear_profile  # noqa: E402
from specplan.simulator.core.errors import SpecplanError  # noqa: E402
from specplan.simulator.engine.cluster.simulation import simulate  # noqa: E402
from specplan.simulator.scenario import scenario_from_mapping  # noqa: E402
from specplan.validation.engine import ReferenceEngine, check_engine_scenario  # noqa: E402
from specplan.validation.runner import TorchRunner  # noqa: E402
from tests.conftest import REPO  # noqa: E402

MICRO = ModelShape(name="micro", hidden=64, layers=2, heads=4, kv_heads=2, ffn=128, vocab=512)
PROFILE = linear_profile(2.0, 0.05, max_tokens=64)


def runner_with(requests: int, seed: int = 3) -> TorchRunner:
    runner = TorchRunner(MICRO, max_requests=requests, capacity_tokens=96, block_size=3, seed=seed, threads=1)
    for rid in range(requests):
        runner.open(rid)
    return runner


def prefill(runner: TorchRunner, rids: np.ndarray, prompts: list[torch.Tensor]) -> None:
    counts = np.array([p.numel() for p in prompts])
    runner.forward(rids, counts, torch.cat(prompts))
    runner.keep(rids, counts)


def ids(*lengths: int, seed: int = 0) -> list[torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(0, MICRO.vocab, (n,), generator=g) for n in lengths]


# ---- the model as the engine drives it --------------------------------------------
@pytest.mark.slow("real torch forwards in wall-clock time (the reference engine)")
def test_flattened_verify_equals_each_request_alone() -> None:
    prompts, new = ids(7, 12, 3, seed=1), ids(4, 1, 3, seed=2)
    together = runner_with(3)
    rids = np.arange(3)
    prefill(together, rids, prompts)
    flat, _ = together.forward(rids, np.array([4, 1, 3]), torch.cat(new))
    alone = []
    for r in range(3):
        solo = runner_with(1)
        prefill(solo, np.array([0]), [prompts[r]])
        alone.append(solo.forward(np.array([0]), np.array([new[r].numel()]), new[r])[0])
    torch.testing.assert_close(flat, torch.cat(alone), rtol=1e-4, atol=1e-4)


def test_flattened_verify_respects_cache_slots_out_of_order() -> None:
    prompts, new = ids(5, 9, seed=3), ids(2, 3, seed=4)
    runner = runner_with(2)
    prefill(runner, np.array([0, 1]), prompts)
    forward, _ = runner.forward(np.array([0, 1]), np.array([2, 3]), torch.cat(new))
    runner_b = runner_with(2)
    prefill(runner_b, np.array([0, 1]), prompts)
    backward, _ = runner_b.forward(np.array([1, 0]), np.array([3, 2]), torch.cat([new[1], new[0]]))
    torch.testing.assert_close(forward, torch.cat([backward[3:], backward[:3]]), rtol=1e-4, atol=1e-4)


def test_prompt_chunks_in_their_own_attention_call_change_no_logit() -> None:
    prompts, new = ids(5, 9, 4, seed=12), ids(2, 11, 3, seed=13)
    rids, counts, flat = np.arange(3), np.array([2, 11, 3]), torch.cat(new)
    one, split = runner_with(3), runner_with(3)
    prefill(one, rids, prompts)
    prefill(split, rids, prompts)
    together, _ = one.forward(rids, counts, flat)
    phased, _ = split.forward(rids, counts, flat, phases=np.array([0, 1, 0]))
    torch.testing.assert_close(phased, together, rtol=1e-4, atol=1e-4)


def test_chunked_prefill_equals_one_prefill() -> None:
    (prompt,), (nxt,) = ids(20, seed=5), ids(2, seed=6)
    whole, chunked = runner_with(1), runner_with(1)
    one = np.array([0])
    prefill(whole, one, [prompt])
    for chunk in prompt.split(8):
        prefill(chunked, one, [chunk])
    a, _ = whole.forward(one, np.array([2]), nxt)
    b, _ = chunked.forward(one, np.array([2]), nxt)
    torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4)


def test_rejected_drafts_leave_no_trace_in_the_cache() -> None:
    (prompt,), (block,), (bonus,) = ids(6, seed=7), ids(4, seed=8), ids(1, seed=9)
    one = np.array([0])
    spec = runner_with(1)
    prefill(spec, one, [prompt])
    spec.forward(one, np.array([4]), block)
    spec.keep(one, np.array([2]))  # anchor + 1 accepted draft; drafts 2 and 3 rejected
    after, _ = spec.forward(one, np.array([1]), bonus)
    plain = runner_with(1)
    prefill(plain, one, [torch.cat([prompt, block[:2]])])
    expected, _ = plain.forward(one, np.array([1]), bonus)
    torch.testing.assert_close(after, expected, rtol=1e-4, atol=1e-4)


def test_released_slots_are_reused_and_overflow_is_an_error() -> None:
    runner = TorchRunner(MICRO, max_requests=2, capacity_tokens=16, block_size=2)
    runner.open(10)
    runner.open(11)
    with pytest.raises(SpecplanError, match="KV-cache slots"):
        runner.open(12)
    runner.release(np.array([10]))
    runner.open(12)
    assert sorted(runner.slot_of) == [11, 12]


def test_releases_keep_slots_compact_and_moved_caches_intact() -> None:
    prompts, new = ids(5, 9, 7, 4, seed=10), ids(2, 3, 1, 2, seed=11)
    runner = runner_with(4)
    rids = np.arange(4)
    prefill(runner, rids, prompts)
    before, _ = runner.forward(rids, np.array([2, 3, 1, 2]), torch.cat(new))
    runner.release(np.array([0, 2]))  # request 3's KV moves into slot 0; request 1 keeps slot 1
    assert runner.slot_of == {3: 0, 1: 1}
    after, _ = runner.forward(np.array([1, 3]), np.array([3, 2]), torch.cat([new[1], new[3]]))
    torch.testing.assert_close(after, torch.cat([before[2:5], before[6:8]]), rtol=1e-4, atol=1e-4)
    runner.open(9)
    assert runner.slot_of[9] == 2


# ---- the engine ---------------------------------------------------------------------
def engine_mapping(policy: dict, **changes: object) -> dict:
    raw = {
        "name": "engine-test", "seed": 5, "horizon": {"duration_s": 1.2, "warmup_s": 0.2},
        "hardware": {"profile": {"kind": "linear", "base_ms": 2.0, "per_token_ms": 0.05, "max_tokens": 64}},
        "engine": {"max_batch_requests": 4, "kv_capacity_tokens": 100000,
                   "prefill": {"mode": "chunked", "chunk_tokens": 16}, "max_step_tokens": 64},
        "drafter": {"family": "dflash", "block_size": 3,
                    "acceptance": {"per_position": {"chat": [0.8, 0.7, 0.6]}, "domains": {"chat": 1.0}}},
        "policy": policy,
        "workload": {"arrivals": {"kind": "closed_loop", "users": 3, "think_s": 0.05},
                     "prompt_tokens": {"kind": "fixed", "value": 20},
                     "output_tokens": {"kind": "fixed", "value": 12}},
    }
    raw.update(changes)
    return raw


def run_engine(raw: dict):
    scenario = scenario_from_mapping(raw, REPO)
    runner = TorchRunner(MICRO, scenario.engine.max_batch_requests, 64, block_size=3, seed=scenario.seed,
                         threads=1)
    return ReferenceEngine(scenario, runner, PROFILE).run()


@pytest.mark.parametrize("policy", [{"name": "mtp-1"}, {"name": "static", "params": {"length": 3}},
                                    {"name": "dspark-async"}, {"name": "none"}])
@pytest.mark.slow("real torch forwards in wall-clock time (the reference engine)")
def test_each_policy_serves_requests_with_real_steps(policy: dict) -> None:
    raw = engine_mapping(policy)
    if policy["name"] == "none":
        raw["drafter"] = {"family": "none"}
    result = run_engine(raw)
    s, steps, req = result.summary, result.steps, result.requests
    assert len(steps) > 0 and s["requests_arrived"] >= 3  # 3 closed-loop users arrive at t = 0
    assert s["requests_arrived"] == s["requests_completed"] + s["requests_running"] + s["requests_rejected"]
    done = req[req["status"] == "completed"]
    assert (done["generated_tokens"] == done["output_tokens"]).all()
    assert (done["first_token_s"] >= done["arrival_s"]).all() and (done["finish_s"] > done["first_token_s"]).all()
    assert (steps["verify_ms"] > 0).all() and np.all(np.diff(steps["end_s"]) > 0)
    draft_tokens = steps["verify_tokens"] - steps["prefill_tokens"] - steps["decode_requests"]
    assert (draft_tokens >= 0).all() and (draft_tokens <= 3 * steps["decode_requests"]).all()
    assert (steps["draft_ms"][steps["drafting_requests"] == 0] == 0).all()


@pytest.mark.parametrize(("policy", "verify_per_request"), [({"name": "mtp-1"}, 2.0),
                                                            ({"name": "static", "params": {"length": 3}}, 4.0)])
@pytest.mark.slow("real torch forwards in wall-clock time (the reference engine)")
def test_fixed_policies_verify_their_length(policy: dict, verify_per_request: float) -> None:
    summary = run_engine(engine_mapping(policy)).summary
    assert summary["mean_verify_tokens_per_request_step"] == pytest.approx(verify_per_request)


@pytest.mark.slow("real torch forwards in wall-clock time (the reference engine)")
@pytest.mark.parametrize(("p", "tau"), [(1.0, 4.0), (0.0, 1.0)])
def test_acceptance_comes_from_the_simulators_model(p: float, tau: float) -> None:
    raw = engine_mapping({"name": "static", "params": {"length": 3}})
    raw["drafter"]["acceptance"]["per_position"] = {"chat": [p, p, p]}
    assert run_engine(raw).summary["mean_accepted_per_step"] == pytest.approx(tau)


@pytest.mark.slow("real torch forwards in wall-clock time (the reference engine)")
def test_poisson_arrivals_come_in_wall_clock_time() -> None:
    raw = engine_mapping({"name": "mtp-1"}, workload={
        "arrivals": {"kind": "poisson", "rate_per_s": 8.0},
        "prompt_tokens": {"kind": "fixed", "value": 10}, "output_tokens": {"kind": "fixed", "value": 6}})
    result = run_engine(raw)
    arrivals = result.requests["arrival_s"].to_numpy()
    assert arrivals.size >= 2 and np.all(np.diff(arrivals) > 0) and arrivals[-1] < 1.2  # seeded times
    s = result.summary
    assert s["requests_arrived"] == s["requests_completed"] + s["requests_running"] + s["requests_rejected"]


@pytest.mark.parametrize(("change", "message"), [
    ({"cluster": {"replicas": 2}}, "replicas must be 1"),
    ({"engine": {"max_batch_requests": 4, "kv_capacity_tokens": 1000,
                 "prefill": {"mode": "disaggregated", "tokens_per_s": 1000}}}, "chunked"),
    ({"horizon": {"requests": 5}}, "duration_s is required"),
])
def test_scenarios_the_engine_cannot_run_are_refused(change: dict, message: str) -> None:
    scenario = scenario_from_mapping(engine_mapping({"name": "mtp-1"}, **change), REPO)
    with pytest.raises(SpecplanError, match=message):
        check_engine_scenario(scenario)


def test_sequential_drafter_families_are_refused() -> None:
    raw = engine_mapping({"name": "mtp-1"})
    raw["drafter"]["family"] = "mtp"
    with pytest.raises(SpecplanError, match="dflash or none"):
        check_engine_scenario(scenario_from_mapping(raw, REPO))


@pytest.mark.slow("real torch forwards in wall-clock time (the reference engine)")
def test_the_reference_engines_summary_has_every_counter_the_simulators_has() -> None:
    """Both read one engine's recorders the same way (recorders.merged_counts): the same keys, the simulator's
    own wall-clock figure and the engine line apart."""
    raw = engine_mapping({"name": "dspark-async"})
    measured = run_engine(raw).summary
    simulated = simulate(scenario_from_mapping(raw, REPO)).summary
    assert set(simulated) - set(measured) == set()
    assert set(measured) - set(simulated) == {"engine"}
