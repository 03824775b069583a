"""Step-time profiles: file format, validation, lookup, built-ins and their derivations, plots."""

from __future__ import annotations

import csv
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np
import pytest

from specplan.engines.vllm import capture_sizes as vllm_capture_sizes
from specplan.hwprofiles import load_profile
from specplan.hwprofiles.builtins import derived_builtins, regenerate
from specplan.hwprofiles.derive_vidur import LAYER_OPS, AttentionEstimate
from specplan.hwprofiles.fileformat import (
    DATA_DIR,
    builtin_names,
    format_profile,
    parse_profile,
    read_profile_csv,
    write_profile_csv,
)
from specplan.hwprofiles.grid import pad_to_bucket, parse_tokens, staircase
from specplan.hwprofiles.modelshape import drafter_shape, load_shape
from specplan.hwprofiles.profile import StepProfile
from specplan.hwprofiles.roofline import GPUS, roofline_profile
from specplan.simulator.core.errors import SpecplanError
from tests.conftest import REPO, SHARED, make_scenario

VIDUR = SHARED / "profiles" / "vidur"
SPLITWISE = SHARED / "profiles" / "splitwise" / "perf_model.csv"
needs_shared = pytest.mark.skipif(not VIDUR.is_dir(), reason="../shared/profiles (vidur, splitwise) is not beside the repo")

HEADER = "# device: test rig\n# model: toy\n# source: hand-written\n# statistic: median\n"


def profile_text(rows: str, header: str = HEADER, columns: str = "tokens,step_ms") -> str:
    return header + columns + "\n" + rows


def parse(text: str) -> StepProfile:
    return parse_profile(text, "prof.csv")


# --- format ---------------------------------------------------------------------------------


def test_round_trip_keeps_table_spread_and_provenance(tmp_path: Path) -> None:
    original = StepProfile(
        name="rt", tokens=np.array([1, 8, 64]), step_ms_table=np.array([[5.0, 5.5, 7.25], [6.0, 6.5, 8.125]]),
        context_tokens=np.array([0, 4096]), provenance={"device": "gpu", "model": "m", "source": "s",
                                                          "statistic": "median", "buckets": [1, 8, 64]},
        extra={"columns": {"p90_ms": np.array([[5.1, 5.6, 7.3], [6.1, 6.6, 8.2]])}}, extrapolation="linear",
    )
    path = write_profile_csv(original, tmp_path / "sub" / "rt.csv")
    back = read_profile_csv(path)
    assert back.name == "rt" and back.extrapolation == "linear"
    np.testing.assert_array_equal(back.tokens, original.tokens)
    np.testing.assert_array_equal(back.context_tokens, original.context_tokens)
    np.testing.assert_array_equal(back.step_ms_table, original.step_ms_table)
    np.testing.assert_array_equal(back.extra["columns"]["p90_ms"], original.extra["columns"]["p90_ms"])
    assert back.provenance["buckets"] == "1 8 64"
    assert format_profile(back) == path.read_text()


def test_every_builtin_loads_and_round_trips() -> None:
    names = builtin_names()
    assert {"h100-llama2-7b", "h100-llama2-70b-tp4", "splitwise-h100-llama2-70b-tp4",
            "synthetic-h200-llama3-8b", "synthetic-b200-llama3-8b", "cpu-tiny"} <= set(names)
    for name in names:
        profile = load_profile(f"builtin:{name}")
        assert format_profile(profile) == (DATA_DIR / f"{name}.csv").read_text()
        assert {"device", "model", "source", "statistic"} <= set(profile.provenance)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (profile_text("1,5\n8,6\n4,7\n"), r"prof\.csv:8: token counts must be sorted ascending \(4 after 8\)"),
        (profile_text("1,5\n8,6\n8,7\n"), r"prof\.csv:8: duplicate token count 8"),
        (profile_text("1,5\n8,-6\n"), r"prof\.csv:7: step_ms must be positive, got -6"),
        (profile_text("1,5\n8,0\n"), r"prof\.csv:7: step_ms must be positive"),
        (profile_text("1,5\n8,nan\n"), r"prof\.csv:7: step_ms must be finite, got nan"),
        (profile_text("1,5\n8,inf\n"), r"prof\.csv:7: step_ms must be finite"),
        (profile_text("1,5\n2.5,6\n"), r"prof\.csv:7: tokens must be a whole number"),
        (profile_text("1,5\n-2,6\n"), r"prof\.csv:7: tokens must be positive"),
        (profile_text("1,5\n8,six\n"), r"prof\.csv:7: step_ms is not a number: 'six'"),
        (profile_text("1,5\n8\n"), r"prof\.csv:7: expected 2 values, got 1"),
        (profile_text("1,5\n", header="# device: x\n# model: m\n"), r"provenance is missing: source, statistic"),
        (profile_text("1,5\n", columns="tokens,time"), r"prof\.csv:5: column 'step_ms' is missing"),
        (profile_text("1,5,1\n", columns="tokens,step_ms,spread"), r"unknown column 'spread'"),
        (profile_text("1,5,-1\n", columns="tokens,step_ms,p10_ms"), r"prof\.csv:6: p10_ms must not be negative"),
        (profile_text(""), r"the table has no rows"),
        (HEADER, r"no table"),
        (profile_text("1,5\n", header=HEADER + "# extrapolation: cubic\n"), r"extrapolation must be one of none, linear"),
        (profile_text("1,5\n", header=HEADER + "# just words\n"), r"prof\.csv:5: header lines must read"),
        (profile_text("1,0,5\n8,0,6\n1,100,7\n2,100,8\n", columns="tokens,context_tokens,step_ms"),
         r"prof\.csv:8: every context_tokens group must list the same token counts"),
        (profile_text("1,100,5\n8,100,6\n1,0,7\n8,0,8\n", columns="tokens,context_tokens,step_ms"),
         r"prof\.csv:8: rows must be grouped by context_tokens in ascending order"),
    ],
)
def test_malformed_files_are_rejected_with_file_and_line(text: str, message: str) -> None:
    with pytest.raises(SpecplanError, match=message):
        parse(text)


def test_unreadable_file_and_unknown_builtin_are_clear(tmp_path: Path) -> None:
    with pytest.raises(SpecplanError, match=r"missing\.csv: cannot read profile"):
        load_profile(str(tmp_path / "missing.csv"))
    with pytest.raises(SpecplanError, match=r"builtin:h300: no such built-in profile \(nearest: "):
        load_profile("builtin:h300")


def test_an_unknown_builtin_names_the_three_nearest_and_the_table_in_one_short_line(cli) -> None:
    """Issue 45 item 8: the whole list of built-ins was one line of ~9,000 characters."""
    status, _, err = cli("check", REPO / "scenarios" / "default.yaml", "--set",
                         "hardware.profile=builtin:b200-deepseek-v4-flash-tp8ep4-sglang")
    assert status == 2 and err.count("\n") == 1 and len(err) < 500
    nearest = err.split("(nearest: ", 1)[1].split(";", 1)[0].split(", ")
    assert len(nearest) == 3 and "b200-deepseek-v4-flash-tp8ep8-sglang" in nearest
    assert "docs/reference/profile-format.md#the-built-ins" in err


# --- lookup ---------------------------------------------------------------------------------


def test_lookup_returns_measured_points_exactly_and_interpolates_linearly_between() -> None:
    profile = parse(profile_text("1,8\n64,8.3\n65,10.5\n128,10.8\n"))
    np.testing.assert_array_equal(profile.step_ms([1, 64, 65, 128]), [8.0, 8.3, 10.5, 10.8])
    assert profile.step_ms(96.5) == pytest.approx(10.65)
    assert profile.step_ms(np.array([[1, 65], [64, 128]])).shape == (2, 2)
    assert profile.steps_per_s(65) == pytest.approx(1000 / 10.5)


def test_lookup_beyond_the_last_point_needs_an_extrapolation_rule() -> None:
    strict = parse(profile_text("1,8\n64,9\n"))
    with pytest.raises(SpecplanError, match="65 tokens is beyond its last measured point"):
        strict.step_ms([1, 65])
    linear = parse(profile_text("1,8\n64,9\n", header=HEADER + "# extrapolation: linear\n"))
    assert linear.step_ms(127) == pytest.approx(10.0)


def test_context_axis_lookup_is_bilinear_and_exact_on_the_grid() -> None:
    profile = parse(profile_text("1,0,5\n8,0,6\n1,1000,7\n8,1000,10\n", columns="tokens,context_tokens,step_ms"))
    assert profile.step_ms(8, 1000) == 10.0
    assert profile.step_ms(1, 500) == pytest.approx(6.0)
    assert profile.step_ms(4.5, 500) == pytest.approx((5.5 + 8.5) / 2)
    np.testing.assert_allclose(profile.step_ms([1, 8], [0, 1000]), [5.0, 10.0])


def test_builtin_and_csv_path_both_work_in_scenarios(tmp_path: Path) -> None:
    builtin = make_scenario(hardware={"profile": "builtin:synthetic-h200-llama3-8b"})
    assert load_profile(builtin.hardware.profile).max_tokens == 512
    write_profile_csv(parse(profile_text("1,8\n256,12\n")), tmp_path / "mine.csv")
    from specplan.simulator.scenario import scenario_from_mapping
    from tests.conftest import BASE, merged

    scenario = scenario_from_mapping(merged(BASE, {"hardware": {"profile": "mine.csv"}}), tmp_path)
    assert load_profile(scenario.hardware.profile).step_ms(256) == 12.0
    with pytest.raises(SpecplanError, match=r"hardware\.profile: .*nope\.csv: cannot read profile"):
        scenario_from_mapping(merged(BASE, {"hardware": {"profile": "nope.csv"}}), tmp_path)


# --- grids and padding ----------------------------------------------------------------------


def test_token_grid_arguments() -> None:
    grid = parse_tokens("1:512")
    assert grid[:17] == [*range(1, 17), 24] and grid[-1] == 512 and 256 in grid and 272 in grid
    assert parse_tokens("1:512:8") == [1, *range(9, 512, 8), 512]
    assert parse_tokens("1,2,4,8") == [1, 2, 4, 8]
    for bad in ("8:1", "0:4", "1,1", "4,2", "a:b", "1:8:0", ""):
        with pytest.raises(SpecplanError, match="--tokens"):
            parse_tokens(bad)


def test_staircase_reproduces_cuda_graph_padding() -> None:
    buckets = vllm_capture_sizes(512)
    assert buckets[:5] == [1, 2, 4, 8, 16] and buckets[-2:] == [496, 512] and 256 in buckets
    bucket_ms = np.arange(1, len(buckets) + 1, dtype=float)
    tokens, table = staircase(buckets, bucket_ms)
    profile = StepProfile("pad", tokens, table, {"source": "t"})
    b = np.arange(1, 513)
    expected = bucket_ms[np.searchsorted(buckets, pad_to_bucket(b, buckets))]
    np.testing.assert_array_equal(profile.step_ms(b), expected)


# --- derived built-ins ----------------------------------------------------------------------


def vidur_medians(path: Path, tp: int) -> dict[str, dict[int, float]]:
    """Independent re-reading of a vidur file: per token count, Σ per-layer op medians, emb, up_proj."""
    seen: dict[str, dict[int, list[float]]] = {k: defaultdict(list) for k in ("layer", "emb", "up")}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            if int(row["num_tensor_parallel_workers"]) != tp:
                continue
            b = int(row["num_tokens"])
            seen["layer"][b].append(sum(float(row[f"time_stats.{op}.median"]) for op in LAYER_OPS))
            seen["emb"][b].append(float(row["time_stats.emb.median"]))
            seen["up"][b].append(float(row["time_stats.mlp_up_proj.median"]))
    return {k: {b: statistics.fmean(v) for b, v in by_tokens.items()} for k, by_tokens in seen.items()}


@needs_shared
@pytest.mark.parametrize(("name", "file", "shape", "tp"), [
    ("h100-llama2-7b", "h100_meta-llama_Llama-2-7b-hf_mlp.csv", "llama2-7b", 1),
    ("h100-llama2-70b-tp4", "h100_meta-llama_Llama-2-70b-hf_mlp.csv", "llama2-70b", 4),
])
def test_derived_h100_profile_is_the_sum_of_per_op_medians(name: str, file: str, shape: str, tp: int) -> None:
    """step(B, context 0) − the documented estimates = layers × Σ op medians + emb + scaled up_proj."""
    profile = load_profile(f"builtin:{name}")
    model = load_shape(shape)
    med = vidur_medians(VIDUR / file, tp)
    tokens = np.array(sorted(med["layer"]))
    np.testing.assert_array_equal(profile.tokens, tokens)
    est = AttentionEstimate()
    measured = profile.step_ms(tokens, 0) - est.attention_ms(model, tp, tokens, 0) - est.allreduce_ms(model, tp, tokens)
    expected = [model.layers * med["layer"][b] + med["emb"][b] + med["up"][b] * model.vocab / (2 * model.ffn)
                for b in tokens]
    np.testing.assert_allclose(measured, expected, atol=2e-6)
    assert np.all(profile.step_ms(tokens, 65536) > profile.step_ms(tokens, 0))


@needs_shared
def test_vidur_cliff_survives_llama2_7b_104_to_128_beats_72_to_96() -> None:
    profile = load_profile("builtin:h100-llama2-7b")
    slow = profile.step_ms([72, 80, 88, 96])
    fast = profile.step_ms([104, 112, 120, 128])
    assert fast.max() < slow.min()


@needs_shared
def test_splitwise_import_is_the_median_decode_step_per_batch_size() -> None:
    profile = load_profile("builtin:splitwise-h100-llama2-70b-tp4")
    runs: dict[int, list[float]] = defaultdict(list)
    with open(SPLITWISE, newline="") as f:
        for row in csv.DictReader(f):
            if (row["model"], row["hardware"], row["tensor_parallel"], row["prompt_size"], row["token_size"]) == (
                    "llama2-70b", "h100-80gb", "4", "512", "128"):
                runs[int(row["batch_size"])].append(float(row["token_time"]))
    np.testing.assert_array_equal(profile.tokens, sorted(runs))
    np.testing.assert_allclose(profile.step_ms(profile.tokens), [statistics.median(runs[b]) for b in sorted(runs)],
                               atol=1e-6)


@needs_shared
def test_committed_derived_builtins_are_reproducible(tmp_path: Path) -> None:
    for path in regenerate(SHARED, tmp_path):
        assert path.read_text() == (DATA_DIR / path.name).read_text(), path.name
    assert set(derived_builtins(SHARED)) <= set(builtin_names())


def test_roofline_h200_8b_never_beats_its_weight_read() -> None:
    profile = load_profile("builtin:synthetic-h200-llama3-8b")
    shape = load_shape("llama3-8b")
    floor_ms = shape.params() * 2 / (GPUS["h200"].hbm_tb_per_s * 1e12) * 1e3
    assert floor_ms == pytest.approx(3.35, abs=0.01)
    assert profile.step_ms_table.min() >= 3.35
    b = np.arange(1, 513)
    for ctx in profile.context_tokens:
        assert np.all(profile.step_ms(b, ctx) >= 3.35)
        assert np.all(np.diff(profile.step_ms(b, ctx)) >= 0)
    assert profile.provenance["synthetic"] == "yes" and "SYNTHETIC" in profile.provenance["device"]


def test_roofline_shape_memory_bound_then_compute_bound_and_padded() -> None:
    h200 = load_profile("builtin:synthetic-h200-llama3-8b")
    b200 = load_profile("builtin:synthetic-b200-llama3-8b")
    b = np.arange(1, 513)
    assert np.all(b200.step_ms(b) < h200.step_ms(b))
    assert h200.step_ms(64) / h200.step_ms(1) < 1.01          # memory bound: flat
    flop_ms = 2 * load_shape("llama3-8b").params(active=True) * 512 / GPUS["h200"].flop_per_ms
    assert h200.step_ms(512) == pytest.approx(GPUS["h200"].step_overhead_ms + flop_ms, rel=0.02)
    assert h200.step_ms(257) == h200.step_ms(272)              # padded to the 272 graph
    assert h200.step_ms(1, 262144) - h200.step_ms(1, 0) == pytest.approx(
        load_shape("llama3-8b").kv_bytes_per_token() * 262144 / GPUS["h200"].bytes_per_ms, rel=1e-3)


def test_roofline_moe_reads_more_experts_as_the_batch_grows() -> None:
    profile = roofline_profile(load_shape("moe-small"), "h200")
    ms = profile.step_ms([1, 8, 64])
    assert ms[0] < ms[1] < ms[2]


# --- shapes ---------------------------------------------------------------------------------


def test_shipped_shapes_load_with_expected_sizes() -> None:
    assert load_shape("llama3-8b").params() == pytest.approx(8.03e9, rel=0.01)
    assert load_shape("qwen3-8b").params() == pytest.approx(8.2e9, rel=0.02)
    moe = load_shape("moe-small")
    assert moe.params() == pytest.approx(6.9e9, rel=0.02) and moe.params(active=True) == pytest.approx(1.3e9, rel=0.05)
    assert load_shape("llama2-70b").params() == pytest.approx(69e9, rel=0.01)
    with pytest.raises(SpecplanError, match=r"unknown shape 'llama9'.*valid: .*tiny-cpu"):
        load_shape("llama9")


def test_shape_files_are_validated(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nhiden: 4\n")
    with pytest.raises(SpecplanError, match="unknown key 'hiden' \\(did you mean 'hidden'\\?\\)"):
        load_shape(str(bad))
    bad.write_text("name: x\nhidden: 64\nlayers: 1\nheads: 3\nkv_heads: 2\nffn: 8\nvocab: 10\n")
    with pytest.raises(SpecplanError, match="multiple of kv_heads"):
        load_shape(str(bad))


def test_drafter_shapes() -> None:
    target = load_shape("llama3-8b")
    assert drafter_shape(target, "ar").layers == 1
    assert drafter_shape(target, "parallel", 5).layers == 5
    head = drafter_shape(target, "markov", markov_rank=256)
    assert head.params() == 2 * target.vocab * 256
    with pytest.raises(SpecplanError, match="--drafter"):
        drafter_shape(target, "tree")


# --- plotting and the CLI -------------------------------------------------------------------


def test_profile_plot_writes_a_png(cli, tmp_path: Path) -> None:
    path = write_profile_csv(parse(profile_text("1,8\n64,8.3\n65,10.5\n128,10.8\n")), tmp_path / "saw.csv")
    status, out, _ = cli("profile-plot", path, "builtin:synthetic-h200-llama3-8b", "--out", tmp_path / "p.png",
                         "--max-tokens", "128")
    assert status == 0 and "p.png" in out
    assert (tmp_path / "p.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    status, _, err = cli("profile-plot", "builtin:nope", "--out", tmp_path / "q.png")
    assert status == 2 and "no such built-in profile" in err


def test_plot_function_draws_every_profile_on_both_axes() -> None:
    from matplotlib.figure import Figure

    from specplan.hwprofiles.plot import plot_profiles

    axes = Figure().subplots(1, 2)
    plot_profiles([load_profile("builtin:cpu-tiny"), load_profile("builtin:synthetic-h200-llama3-8b")], axes, max_tokens=100)
    curves = [line for line in axes[0].lines if not line.get_label().startswith("cliff")]  # cliffs are marked too
    assert len(curves) == 4 and len(axes[1].lines) == 4
    np.testing.assert_array_equal(axes[0].lines[0].get_xdata(), np.arange(1, 101))


@pytest.mark.slow("starts a real specplan process (interpreter start and imports)")
def test_specplan_imports_and_loads_profiles_without_torch() -> None:
    code = (
        "import sys\n"
        "class NoTorch:\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'torch':\n"
        "            raise ImportError('torch is not installed')\n"
        "sys.meta_path.insert(0, NoTorch())\n"
        "from specplan.cli.main import parser, main\n"
        "from hwprofiles import load_profile\n"
        "parser(); print(load_profile('builtin:synthetic-h200-llama3-8b').max_tokens)\n"
        "status = main(['profile', '--model', 'tiny-cpu', '--out', '/dev/null'])\n"
        "assert 'torch' not in sys.modules\n"
        "sys.exit(status)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "512"
    assert done.returncode == 2 and "needs torch" in done.stderr
