"""The torch decoder (flattened verify batches, KV cache, MoE) and the profiling harness on CPU."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch (the 'profile' extra) is not installed")

from specplan.hwprofiles import harness  # noqa: E402
from specplan.hwprofiles.fileformat import read_profile_csv  # noqa: E402
from specplan.hwprofiles.harness import HarnessConfig, request_split, run_harness, spread_tokens  # noqa: E402
from specplan.hwprofiles.modelshape import ModelShape, load_shape  # noqa: E402
from specplan.hwprofiles.torch_model import DecoderModel, MarkovHead, MoEMLP, VerifyLayout  # noqa: E402
from specplan.simulator.core.errors import SpecplanError  # noqa: E402

MICRO = ModelShape(name="micro", hidden=64, layers=2, heads=4, kv_heads=2, ffn=96, vocab=300)
MICRO_MOE = dataclasses.replace(MICRO, name="micro-moe", moe_experts=6, moe_top_k=2, ffn=32)


def ids(n: int, seed: int) -> torch.Tensor:
    return torch.randint(0, MICRO.vocab, (n,), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("shape", [MICRO, dataclasses.replace(MICRO, rope=False), MICRO_MOE])
def test_flattened_incremental_verify_equals_each_request_alone(shape: ModelShape) -> None:
    """Prefill part of three sequences, commit, verify the rest as one flat batch: same logits as whole."""
    model = DecoderModel(shape, seed=3)
    seqs = [ids(n, i) for i, n in enumerate((9, 5, 12))]
    alone = []
    for seq in seqs:
        alone.append(model.verify(seq, [len(seq)], model.new_cache(1, 16)))
    cut = [4, 1, 7]
    cache = model.new_cache(3, 16)
    model.verify(torch.cat([s[:k] for s, k in zip(seqs, cut, strict=True)]), cut, cache)
    cache.commit(cut)
    rest = [len(s) - k for s, k in zip(seqs, cut, strict=True)]
    logits = model.verify(torch.cat([s[k:] for s, k in zip(seqs, cut, strict=True)]), rest, cache)
    for r, part in enumerate(logits.split(rest)):
        torch.testing.assert_close(part, alone[r][cut[r]:], atol=1e-4, rtol=1e-4)


def test_rejected_drafts_are_overwritten_and_cache_slots_can_be_reordered() -> None:
    model = DecoderModel(MICRO, seed=1)
    prompt, good, bad = ids(6, 0), ids(3, 1), ids(3, 2)
    reference = model.verify(torch.cat([prompt, good]), [9], model.new_cache(1, 16))
    cache = model.new_cache(2, 16)
    model.verify(prompt, [6], cache, cache_slots=[1])
    cache.commit([6], slots=[1])
    model.verify(torch.cat([good[:1], bad[1:]]), [3], cache, cache_slots=[1])   # drafts rejected after 1
    cache.commit([1], slots=[1])
    again = model.verify(good[1:], [2], cache, cache_slots=[1])
    torch.testing.assert_close(again, reference[7:], atol=1e-4, rtol=1e-4)
    assert cache.lengths.tolist() == [0, 7]


def test_moe_matches_a_per_token_loop_over_experts() -> None:
    mlp = MoEMLP(MICRO_MOE, torch.Generator().manual_seed(0), torch.device("cpu"), torch.float32)
    x = torch.randn(7, MICRO_MOE.hidden, generator=torch.Generator().manual_seed(1))
    expected = torch.zeros_like(x)
    probs = torch.softmax(x @ mlp.router.T, dim=-1)
    for t in range(x.shape[0]):
        top = torch.topk(probs[t], mlp.top_k)
        for w, e in zip(top.values / top.values.sum(), top.indices, strict=True):
            gate, up = (x[t] @ mlp.gate_up[e].T).chunk(2)
            expected[t] += w * ((torch.nn.functional.silu(gate) * up) @ mlp.down[e].T)
    torch.testing.assert_close(mlp(x), expected, atol=1e-5, rtol=1e-4)


def test_layout_and_cache_errors_are_specplan_errors() -> None:
    model = DecoderModel(MICRO)
    cache = model.new_cache(2, 8)
    with pytest.raises(SpecplanError, match="exceed the KV cache capacity"):
        VerifyLayout.build([9, 1], cache)
    with pytest.raises(SpecplanError, match="at least one new token"):
        VerifyLayout.build([0, 1], cache)
    with pytest.raises(SpecplanError, match="3 token ids for 4 new tokens"):
        model.verify(ids(3, 0), [2, 2], cache)


def test_markov_head_picks_one_token_per_request() -> None:
    head = MarkovHead(dataclasses.replace(MICRO, layers=0, markov_rank=8))
    unary = torch.zeros(5, MICRO.vocab)
    unary[:, 17] = 100.0
    assert head(ids(5, 0), unary).tolist() == [17] * 5


def test_spreading_tokens_over_requests() -> None:
    assert spread_tokens(10, 4) == [3, 3, 2, 2]
    shape = load_shape("tiny-cpu")
    assert request_split(HarnessConfig(shape, [1]), 9) == [3, 3, 3]
    assert request_split(HarnessConfig(shape, [1], requests=2), 9) == [5, 4]
    assert request_split(HarnessConfig(shape, [1], drafter="parallel", block_size=5), 15) == [5, 5, 5]
    assert request_split(HarnessConfig(shape, [1], drafter="ar"), 3) == [1, 1, 1]


def test_harness_cli_profiles_the_tiny_shape_on_cpu(cli, tmp_path: Path) -> None:
    out = tmp_path / "tiny.csv"
    threads = torch.get_num_threads()
    status, stdout, _ = cli("profile", "--model", "tiny-cpu", "--device", "cpu", "--tokens", "1,2,8,24",
                            "--context", "64", "--repeats", "4", "--warmup", "1", "--rounds", "2", "--out", out)
    assert status == 0, stdout
    profile = read_profile_csv(out)
    assert profile.tokens.tolist() == [1, 2, 8, 24] and profile.context_tokens is None
    assert np.all(profile.step_ms_table > 0)
    columns = profile.extra["columns"]
    assert np.all(columns["p10_ms"] <= profile.step_ms_table) and np.all(profile.step_ms_table <= columns["p90_ms"])
    prov = profile.provenance
    assert prov["device"].startswith("CPU ") and prov["torch"] == torch.__version__ and prov["dtype"] == "float32"
    assert "--tokens 1,2,8,24" in prov["source"] and prov["capture_mode"] == "eager"
    assert "R = ceil(B / 4)" in prov["batch_layout"] and "64 KV context tokens per request" in prov["batch_layout"]
    assert "4 timed runs per point in 2 sweep(s)" in prov["repeats"]
    assert "--threads 1" in prov["source"] and "1 torch threads" in prov["device"]
    assert torch.get_num_threads() == threads


def test_harness_layer_scaling_and_context_axis_are_recorded() -> None:
    cfg = HarnessConfig(load_shape("tiny-cpu"), [1, 4], total_context=(0, 256), layers=1, repeats=2, warmup=0)
    profile = run_harness(cfg, "scaled")
    assert profile.context_tokens.tolist() == [0, 256] and profile.step_ms_table.shape == (2, 2)
    assert "1 of 2; scaled" in profile.provenance["layers_timed"]
    assert "layers 2" in profile.provenance["model"]


@pytest.mark.parametrize(("kind", "usage"), [("ar", "γ x step_ms(R)"), ("parallel", "step_ms(R x γ)"),
                                              ("markov", "Markov head")])
def test_harness_profiles_drafter_shapes(kind: str, usage: str) -> None:
    tokens = [3, 6] if kind == "parallel" else [1, 2]
    cfg = HarnessConfig(load_shape("tiny-cpu"), tokens, drafter=kind, block_size=3, markov_rank=16,
                        context_tokens=32, repeats=2, warmup=0)
    profile = run_harness(cfg, f"draft-{kind}")
    assert usage in profile.provenance["usage"] and np.all(profile.step_ms_table > 0)


def test_harness_rejects_impossible_requests(cli, tmp_path: Path) -> None:
    status, _, err = cli("profile", "--model", "tiny-cpu", "--mode", "cudagraph", "--out", tmp_path / "x.csv")
    assert status == 2 and "cudagraph needs --device cuda" in err
    status, _, err = cli("profile", "--model", "tiny-cpu", "--tokens", "2,4", "--requests", "3", "--out", tmp_path / "x.csv")
    assert status == 2 and "more requests than the smallest token count" in err
    status, _, err = cli("profile", "--model", "tiny-cpu", "--layers", "9", "--out", tmp_path / "x.csv")
    assert status == 2 and "--layers: must be in 1..2" in err


def test_moe_falls_back_to_a_loop_where_grouped_gemm_is_missing(monkeypatch) -> None:
    mlp = MoEMLP(MICRO_MOE, torch.Generator().manual_seed(0), torch.device("cpu"), torch.float32)
    x = torch.randn(5, MICRO_MOE.hidden, generator=torch.Generator().manual_seed(2))
    grouped = mlp(x)

    def unsupported(*args, **kwargs):
        raise RuntimeError("grouped_mm: not supported for this device")

    monkeypatch.setattr(torch.nn.functional, "grouped_mm", unsupported)
    torch.testing.assert_close(mlp(x), grouped, atol=1e-5, rtol=1e-4)


def test_folding_grouped_query_heads_matches_torchs_grouped_attention() -> None:
    """The folded call (g query heads per KV head in the query axis) equals SDPA's own GQA with the block mask."""
    model = DecoderModel(MICRO, seed=4)
    cache = model.new_cache(3, 16)
    cache.fill_random([5, 0, 9], torch.Generator().manual_seed(5))
    layout = VerifyLayout.build([3, 1, 4], cache)
    attn, group = model.layers[0].attn, layout.groups[0]
    q = torch.randn(8, MICRO.heads, MICRO.head_dim, generator=torch.Generator().manual_seed(6))
    folded = attn.attend(q, group, cache.k[0], cache.v[0])
    q_pad = q.new_zeros(3, group.mask.shape[2], MICRO.heads, MICRO.head_dim)
    q_pad[group.request, group.slot] = q
    reference = torch.nn.functional.scaled_dot_product_attention(
        q_pad.transpose(1, 2), group.cached(cache.k[0]), group.cached(cache.v[0]), attn_mask=group.mask,
        enable_gqa=True).transpose(1, 2)[group.request, group.slot]
    torch.testing.assert_close(folded, reference, atol=1e-5, rtol=1e-5)
    assert group.folded_mask(2, torch.float32).stride(2) % 16 == 0  # rows padded to the kernels' alignment


def test_a_time_limit_keeps_the_token_counts_timed_at_every_context(monkeypatch) -> None:
    clock = iter(range(1000))
    monkeypatch.setattr(harness.time, "monotonic", lambda: float(next(clock)))
    cfg = HarnessConfig(load_shape("tiny-cpu"), [1, 2, 4, 8], total_context=(0, 64), repeats=2, warmup=0)
    profile = run_harness(cfg, "cut", stop_at=4.5)  # points (token-major) start at 0..4: B = 1, 2 and B = 4 at C = 0
    assert profile.tokens.tolist() == [1, 2] and profile.step_ms_table.shape == (2, 2)
    assert profile.provenance["time_limit"].startswith("stopped by its time limit in sweep 1 of 1, before B = 4")
    assert "2 of 4 token counts kept (planned up to 8), at least 2 of 2 timed runs each" in profile.provenance["time_limit"]
    with pytest.raises(SpecplanError, match="the time limit came before the first token count"):
        run_harness(cfg, "none", stop_at=-1.0)


def test_the_parts_are_timed_for_dense_decoders_only(cli, tmp_path: Path) -> None:
    status, _, _ = cli("profile", "--model", "tiny-cpu", "--tokens", "2,8", "--repeats", "2", "--warmup", "0",
                       "--parts", "--quiet", "--out", tmp_path / "parts.csv")
    profile = read_profile_csv(tmp_path / "parts.csv")
    assert status == 0 and {"gemm_ms", "attention_ms"} <= set(profile.extra["columns"])
    assert "--parts" in profile.provenance["source"] and "gemm_ms: every projection GEMM" in profile.provenance["parts"]
    status, _, err = cli("profile", "--model", "moe-small", "--tokens", "2", "--parts", "--out", tmp_path / "moe.csv")
    assert status == 2 and "parts: timed for dense decoders only" in err
    # issue 39: the file `profile --parts` writes was refused by `profile-plot --parts`, with database advice
    status, _out, err = cli("profile-plot", "--parts", tmp_path / "parts.csv", "--out", tmp_path / "parts.png")
    assert status == 0 and (tmp_path / "parts.png").is_file(), err
