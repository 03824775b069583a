"""The step as named parts: each part against the table row it comes from, the overlap, the FP4/FP8 choice,
the provenance header, and the public-microbenchmark rule.

Tests that call aiconfigurator-core skip without it (the `aic` extra); the
ones about the committed files and the rule's arithmetic run everywhere.
"""

from __future__ import annotations

import importlib.util
import math
import re

import numpy as np
import pytest

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.aiconfigurator.deepep import DEEPEP_SOURCE
from specplan.hwprofiles.aiconfigurator.parts import LeafCurves
from specplan.hwprofiles.aiconfigurator.physical_rule import CLAMPED
from specplan.hwprofiles.aiconfigurator.public import (
    PUBLIC_SOURCE,
    Measurement,
    ProfileKey,
    apply_public_rule,
    load_measurements,
)
from specplan.hwprofiles.builtins import AIC_BUILTINS
from specplan.hwprofiles.errors import ProfileError

needs_aic = pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                               reason="aiconfigurator-core (the 'aic' extra) is not installed")
FLASH, FLASH_FP8 = "deepseek-ai/DeepSeek-V4-Flash", "sgl-project/DeepSeek-V4-Flash-FP8"
V4 = sorted(name for name in AIC_BUILTINS if "deepseek-v4" in name)
# the database's own, a public measurement, or the physical rule's (physical_rule.py): the twin table, or the band
TWINS = ("sglang 0.5.14 table", "vllm 0.24.0 table")
SOURCES = {"silicon", "empirical", PUBLIC_SOURCE, CLAMPED, DEEPEP_SOURCE, *TWINS,
           *(f"{t} clamped into the band" for t in TWINS)}


def pricer(model: str, system: str, backend: str, q: int = 4, **parallel):
    from specplan.hwprofiles.aiconfigurator import AicTarget, VerifyPricer, compile_target

    version = {"vllm": "0.24.0", "sglang": "0.5.14"}[backend]
    compiled = compile_target(AicTarget(model, system, backend, version, **parallel), 512, q, 0.9)
    return compiled, VerifyPricer(compiled, list(compiled.ops), q)


def row(view: dict, *keys):
    """A table view's cell, enum keys matched by their name (the package keys some levels by enum)."""
    for key in keys:
        view = view[next(k for k in view if str(k) == str(key) or str(k).endswith(f".{key}"))]
    return view


# --- each part against the row it comes from ------------------------------------------------------


@needs_aic
def test_each_part_is_its_table_row_times_the_layers() -> None:
    """SGLang 0.5.14 on 8 x B200, the released FP4 checkpoint, B = 8 (2 requests of 4 tokens), 43 layers."""
    from specplan.hwprofiles.aiconfigurator import table_view

    _, verify = pricer(FLASH, "b200_sxm", "sglang", tp=8, ep=8)
    parts = {e[0].removeprefix("generation_"): e[1] for e in verify.leaf_entries(8)}
    moe = table_view("b200_sxm", "sglang", "0.5.14", "_moe_data")
    gemm = table_view("b200_sxm", "sglang", "0.5.14", "_gemm_data")
    # routed experts: FP4 x FP8 FlashInfer TRT-LLM MoE, power law 1.01, top-6 of 256, 4096 -> 2048, TP1 EP8, 8 tokens
    experts = row(moe, "w4a8_mxfp4_mxfp8_trtllm", "power_law_1.01", 6, 256, 4096, 2048, 1, 8, 8)["latency"]
    assert parts["moe"] == pytest.approx(43 * experts, rel=1e-9)
    # shared expert: FP8 block GEMMs at m = 8 tokens, gate/up 4096 -> 2 x 2048 / TP8, down 2048 / TP8 -> 4096
    assert parts["shared_gate_up_gemm"] == pytest.approx(43 * row(gemm, "fp8_block", 8, 512, 4096)["latency"], rel=1e-9)
    assert parts["shared_ffn2_gemm"] == pytest.approx(43 * row(gemm, "fp8_block", 8, 4096, 256)["latency"], rel=1e-9)
    # the router GEMM in bf16 (4096 -> 256 experts)
    assert parts["router_gemm"] == pytest.approx(43 * row(gemm, "bfloat16", 8, 256, 4096)["latency"], rel=1e-9)


@needs_aic
def test_the_overlap_charges_the_longer_group_and_the_parts_sum_to_the_estimators_step() -> None:
    """vLLM 0.24 on 8 x B200: the shared expert's FP8 GEMMs are the longer group at one token, not at 512."""
    from specplan.hwprofiles.aiconfigurator import engine_handle, kind_of

    compiled, verify = pricer(FLASH, "b200_sxm", "vllm", q=1, tp=8, ep=8)
    ops = list(compiled.ops)
    overlap = next(i for i, op in enumerate(ops) if kind_of(op) == "Overlap")
    handle = engine_handle(compiled, ops)
    leaves = verify.leaf_curves(512)
    (group_a, group_b), = leaves.overlaps
    for b in (1, 128, 512):
        routed, shared = leaves.ms[b - 1, list(group_a)].sum(), leaves.ms[b - 1, list(group_b)].sum()
        engine = handle.evaluate_generation_ops([overlap], batch_size=b, s=1, x=b)[0][1]
        assert engine == pytest.approx(max(routed, shared), rel=1e-9)
        assert leaves.hidden_ms()[b - 1] == pytest.approx(min(routed, shared), rel=1e-9)
        whole = sum(e[1] for e in handle.evaluate_generation_ops(list(range(len(ops))), batch_size=b, s=1025, x=None))
        assert leaves.charged_ms()[b - 1] + verify.attention_ms(b, b * 1024) == pytest.approx(whole, rel=1e-9)
    shared_first = leaves.ms[0, list(group_b)].sum() > leaves.ms[0, list(group_a)].sum()
    assert shared_first and leaves.part_names()[:3] == ["embedding", "mhc", "norms"]


# --- the routed experts' precision per checkpoint and engine --------------------------------------


@needs_aic
@pytest.mark.parametrize(("model", "system", "backend", "moe_quant", "expected"), [
    (FLASH, "b200_sxm", "sglang", "", "w4a8_mxfp4_mxfp8_trtllm"),   # FP4 checkpoint, SGLang on Blackwell
    (FLASH, "gb300", "sglang", "", "w4a8_mxfp4_mxfp8_trtllm"),
    (FLASH, "b200_sxm", "vllm", "", "w4a8_mxfp4_mxfp8"),            # FP4 checkpoint, vLLM on Blackwell
    (FLASH_FP8, "b200_sxm", "sglang", "", "fp8_block"),             # the FP8 checkpoint, either engine
    (FLASH_FP8, "h200_sxm", "vllm", "", "fp8_block"),
    (FLASH, "h200_sxm", "sglang", "", "w4a16_mxfp4_cutlass"),       # FP4 on Hopper: named, but no rows (below)
    (FLASH, "b200_sxm", "vllm", "nvfp4", "nvfp4"),                  # NVFP4 experts, as a target names them
])
def test_the_experts_precision_follows_the_checkpoint_and_the_engine(model, system, backend, moe_quant,
                                                                      expected) -> None:
    from specplan.hwprofiles.aiconfigurator import AicTarget, compile_target

    version = {"vllm": "0.24.0", "sglang": "0.5.14"}[backend]
    target = AicTarget(model, system, backend, version, tp=4, ep=4, moe_quant=moe_quant)
    assert compile_target(target, 64, 4, 0.9).engine["moe_dtype"] == expected


@needs_aic
def test_fp4_experts_on_hopper_are_refused_not_priced_with_others() -> None:
    with pytest.raises(ProfileError, match=r"MoE data missing .*w4a16_mxfp4_cutlass"):
        pricer(FLASH, "h200_sxm", "sglang", tp=4, ep=1)[1].plain_ms(8)


@needs_aic
def test_bad_moe_options_are_one_line_and_exit_2(cli, tmp_path) -> None:
    base = ("profile", "--source", "aiconfigurator", "--model", FLASH, "--system", "b200_sxm", "--backend",
            "sglang", "--tp", "1", "--ep", "4", "--dp", "4", "--out", tmp_path / "x.csv")
    status, _, err = cli(*base, "--moe-quant", "fp4_magic")
    assert status == 2 and err.count("\n") == 1 and "--moe-quant: 'fp4_magic' is not a MoE precision" in err
    # GB200: no MegaMoE row at any EP, and no GPU of equal peaks whose rows the carry rule may take
    gb200 = [str(a).replace("b200_sxm", "gb200") for a in base]
    status, _, err = cli(*gb200, "--moe-backend", "megamoe")
    assert status == 2 and err.count("\n") == 1 and "--moe-backend megamoe: no public MegaMoE measurement" in err
    assert not (tmp_path / "x.csv").exists()


# --- the provenance header and the parts table of every committed V4 file --------------------------


@pytest.mark.parametrize("name", V4)
def test_every_v4_file_lists_every_part_with_its_share_and_source(name: str) -> None:
    profile = load_profile(f"builtin:{name}")
    meta, parts = profile.provenance, profile.extra["parts"]
    lines = {k.removeprefix("part."): v for k, v in meta.items() if k.startswith("part.")}
    table = {k.removesuffix("_ms") for k in parts} - {"overlap_hidden"}
    assert table | {"attention"} <= set(lines) <= table | {"attention", "indexer"}
    step = float(re.search(r"step ([\d.]+) ms", meta["provenance"]).group(1))
    hidden = float(re.search(r"overlap hides ([\d.]+) ms", meta["provenance"]).group(1))
    total = 0.0
    for part, line in lines.items():
        ms, share, source = re.match(r"([\d.]+) ms, ([\d.]+)% of the step, ([^;]+);", line).groups()
        assert set(source.split("/")) <= SOURCES, (part, source)
        assert float(share) == pytest.approx(100 * float(ms) / step, abs=0.06 + 0.01 / step)
        total += float(ms)
    assert total - hidden == pytest.approx(step, abs=0.002 * len(lines))
    set_here = re.search(r"set here: (.*?)(; GEMMs no public|$)", meta["public_rule"]).group(1)
    assert set_here == expected_set(name), name


def expected_set(name: str) -> str:
    """What the public rules set in a committed V4 file: the MegaMoE block where measured, the shared expert's
    FP8 GEMMs where the public B200 GEMM rows reach their shape (N x K within 2x of 2048 x 1024), else nothing."""
    if name.endswith("-megamoe"):
        return "combine, dispatch, routed_experts"
    if name.startswith("b200-") and "-vllm" in name and "-dp8ep8-" not in name:
        return "shared_down" if "-pro-" in name else "shared_down, shared_gate_up"
    return "no part"


@pytest.mark.parametrize("name", [n for n in V4 if n.endswith(("-tp4ep4-sglang", "-dp8ep8-vllm", "-megamoe"))])
def test_the_step_is_the_sum_of_its_parts_at_every_point(name: str) -> None:
    profile = load_profile(f"builtin:{name}")
    parts, columns = dict(profile.extra["parts"]), profile.extra["columns"]
    hidden = parts.pop("overlap_hidden_ms", 0.0)
    kv = columns["attention_ms"] + columns.get("indexer_ms", 0.0)
    np.testing.assert_allclose(sum(parts.values()) - hidden + kv, profile.step_ms_table, atol=2e-5 * len(parts))


# --- the public-microbenchmark rule ---------------------------------------------------------------


def curves(experts_ms: np.ndarray, shared_ms: float = 0.1) -> LeafCurves:
    """Toy curves of an 8-layer MoE, B = 1..len: router, dispatch, experts, combine beside a shared expert."""
    n = experts_ms.size
    ms = np.column_stack([np.full(n, 0.01), np.full(n, 0.02), experts_ms, np.full(n, 0.02), np.full(n, shared_ms)])
    names = ("router_gemm", "moe_pre_dispatch", "moe", "moe_post_dispatch", "shared_gate_up_gemm")
    return LeafCurves(names, ("silicon",) * 5, ms, (((0, 1, 2, 3), (4,)),))


def measured(tokens_per_rank: int, us: float, kernel: str = "deep_gemm_megamoe", ep: int = 4) -> Measurement:
    return Measurement("toy", "gb300", "deepseek-v4-flash", "moe_block", kernel, "w4a8", ep, tokens_per_rank, us,
                       "p50", "")


KEY = ProfileKey("gb300", 4, 4, "deepseek-v4-flash", ("deep_gemm_megamoe", "w4a8"), 4096)


def test_a_measurement_within_20_percent_leaves_the_part_to_the_database() -> None:
    leaves = curves(np.linspace(0.4, 2.0, 4096))        # 8 layers: 50 us per layer per rank at B = 1
    block = lambda b: 1000 * (0.02 + leaves.ms[b - 1, 2] + 0.02) / 8   # noqa: E731 (the database's block, us)
    rows = [measured(t, 1.15 * block(4 * t)) for t in (8, 64, 512)]
    kept, checks = apply_public_rule(leaves, KEY, rows, layers=8)
    assert kept is leaves and all(c.applies and not c.off for c in checks)


def test_an_off_measurement_sets_the_block_at_its_counts_between_them_and_beyond() -> None:
    leaves = curves(np.linspace(0.4, 2.0, 4096))
    block = lambda lv, b: 1000 * lv.ms[b - 1, 1:4].sum() / 8   # noqa: E731
    rows = [measured(8, 2.0 * block(leaves, 32)), measured(64, 1.0 * block(leaves, 256))]
    kept, _ = apply_public_rule(leaves, KEY, rows, layers=8)
    assert kept.part_source("routed_experts") == kept.part_source("dispatch") == PUBLIC_SOURCE
    assert kept.part_source("router") == "silicon" and kept.part_source("shared_gate_up") == "silicon"
    assert block(kept, 32) == pytest.approx(rows[0].latency_us) and block(kept, 256) == pytest.approx(rows[1].latency_us)
    ratio = lambda b: block(kept, b) / block(leaves, b)   # noqa: E731
    assert ratio(4) == pytest.approx(2.0) and ratio(4096) == pytest.approx(1.0)         # held beyond the counts
    middle = 2.0 + (1.0 - 2.0) * (math.log(16) - math.log(8)) / (math.log(64) - math.log(8))
    assert ratio(64) == pytest.approx(middle)                                           # log tokens in between
    assert np.all(kept.charged_ms() >= kept.ms[:, :4].sum(axis=1) - 1e-12)              # still max of the groups


@pytest.mark.parametrize(("key", "measurement", "why"), [
    (KEY, measured(8, 999.0, kernel="cutedsl_nvfp4"), "the engine runs another"),
    (ProfileKey("gb300", 4, 1, "deepseek-v4-flash", ("deep_gemm_megamoe", "w4a8"), 4096), measured(8, 999.0),
     "tensor-parallel (no all-to-all)"),
    (KEY, measured(2048, 999.0), "beyond the profile's largest B"),
    (KEY, measured(8, 999.0, ep=8), None),          # another EP degree: not even compared
])
def test_a_row_of_another_kernel_topology_or_range_does_not_set_a_part(key, measurement, why) -> None:
    leaves = curves(np.linspace(0.4, 2.0, 4096))
    kept, checks = apply_public_rule(leaves, key, [measurement], layers=8)
    assert kept is leaves
    assert [c.why_not for c in checks] == [] if why is None else (len(checks) == 1 and why in checks[0].why_not)


def test_the_committed_megamoe_block_meets_its_public_measurement() -> None:
    """GB300 DP4/EP4 MegaMoE: dispatch + routed experts + combine, per layer per rank, at B = 4 x t."""
    profile = load_profile("builtin:gb300-deepseek-v4-flash-dp4ep4-sglang-megamoe")
    parts = profile.extra["parts"]
    rows = [r for r in load_measurements() if (r.source, r.kernel, r.model) ==
            ("moe_ep_benchmark_ep4_gb300", "deep_gemm_megamoe", "deepseek-v4-flash")]
    assert len(rows) == 7
    for r in rows:
        b = 4 * r.tokens_per_rank
        if b in profile.tokens:
            j = int(np.flatnonzero(profile.tokens == b)[0])
            block = parts["dispatch_ms"][j] + parts["routed_experts_ms"][j] + parts["combine_ms"][j]
            assert 1000 * block / 43 == pytest.approx(r.latency_us, rel=1e-4), b
    assert "public microbenchmark: moe_ep_benchmark_ep4_gb300 deep_gemm_megamoe w4a8 p50" in \
        profile.provenance["part.routed_experts"]


# --- the picture ---------------------------------------------------------------------------------


def test_profile_plot_parts_draws_the_stack_and_refuses_a_file_without_parts(cli, tmp_path) -> None:
    status, out, err = cli("profile-plot", "--parts", "builtin:b200-deepseek-v4-flash-tp8ep8-vllm",
                           "builtin:gb300-deepseek-v4-flash-dp4ep4-sglang-megamoe", "--context", "65536",
                           "--out", tmp_path / "parts.png")
    assert status == 0 and "parts.png" in out, err
    assert (tmp_path / "parts.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    status, _, err = cli("profile-plot", "--parts", "builtin:cpu-tiny", "--out", tmp_path / "tiny.png")
    assert status == 2 and err.count("\n") == 1 and "no parts" in err
    assert "gemm_ms" in err and "specplan profile --parts" in err  # both ways to have parts, not database advice


HARNESS_PARTS_FILE = """# device: CPU
# model: tiny-cpu
# source: specplan profile --parts
# statistic: median
tokens,step_ms,p10_ms,gemm_ms,attention_ms
1,2.0,1.9,0.8,0.5
8,3.0,2.9,1.2,1.0
64,6.0,5.8,2.5,2.0
"""


def test_a_harness_parts_file_stacks_its_timed_parts_and_the_rest_of_the_step(tmp_path) -> None:
    """`specplan profile --parts` (the torch harness) writes gemm_ms and attention_ms columns, no parts table."""
    from specplan.hwprofiles.fileformat import read_profile_csv
    from specplan.hwprofiles.plot import part_curves

    path = tmp_path / "harness.csv"
    path.write_text(HARNESS_PARTS_FILE)
    _b, curves = part_curves(read_profile_csv(path), 64, None)
    assert set(curves) == {"gemm", "attention", "rest of the step"}  # the statistics columns are no parts
    total = curves["gemm"] + curves["attention"] + curves["rest of the step"]
    assert total[[0, 7, 63]] == pytest.approx([2.0, 3.0, 6.0])


def test_the_parts_view_shows_the_small_batches_on_their_own_scale(tmp_path) -> None:
    """Issue 39: on a linear axis to 8,192 tokens the parts of B <= 256 were a sliver at the bottom."""
    from matplotlib.figure import Figure

    from specplan.hwprofiles import load_profile
    from specplan.hwprofiles.plot import plot_parts

    axes = Figure().subplots(1, 2)
    plot_parts(load_profile("builtin:h200-llama3.1-8b-vllm"), axes)
    zoom, whole = axes
    assert zoom.get_xlim()[1] <= 256 * 1.05 and whole.get_xlim()[1] >= 8192
    assert zoom.get_ylim()[1] < whole.get_ylim()[1] / 5


def test_profile_plot_marks_the_cliffs() -> None:
    """Issue 39: the profiles page says profile-plot marks cliffs; it drew none. A jump of more than 2% of the step
    in one token is marked where it is."""
    from matplotlib.figure import Figure

    from specplan.hwprofiles.plot import plot_profiles
    from specplan.hwprofiles.profile import table_profile

    profile = table_profile([1, 32, 33, 64, 65, 256], [8.0, 8.4, 10.5, 10.8, 13.0, 16.0], "none")
    axes = Figure().subplots(1, 2)
    plot_profiles([profile], axes)
    marks = [line for line in axes[0].get_lines() if line.get_label().startswith("cliff")]
    assert len(marks) == 1 and list(marks[0].get_xdata()) == [33, 65]


# --- the parts table of the file format -------------------------------------------------------------


PARTS_FILE = """# device: d
# model: m
# source: s
# statistic: t
tokens,step_ms,attention_ms
1,2.0,0.5
8,3.0,1.0
# table: parts
tokens,routed_experts_ms,shared_down_ms,overlap_hidden_ms
1,1.5,0.5,0.5
8,2.5,0.5,0.5
"""


def test_a_parts_table_reads_back_and_writes_the_same_text() -> None:
    from specplan.hwprofiles.fileformat import format_profile, parse_profile

    profile = parse_profile(PARTS_FILE, "p.csv")
    assert list(profile.extra["parts"]) == ["routed_experts_ms", "shared_down_ms", "overlap_hidden_ms"]
    np.testing.assert_array_equal(profile.extra["parts"]["routed_experts_ms"], [1.5, 2.5])
    assert parse_profile(format_profile(profile), "q.csv").extra["parts"].keys() == profile.extra["parts"].keys()
    plain = parse_profile(PARTS_FILE.split("# table: parts")[0], "old.csv")     # a file without parts, as before
    assert "parts" not in plain.extra and np.array_equal(plain.step_ms_table, profile.step_ms_table)


@pytest.mark.parametrize(("edit", "message"), [
    (("8,2.5,0.5,0.5", "16,2.5,0.5,0.5"), "p.csv:10: the parts table must list the main table's token counts"),
    (("tokens,routed_experts_ms,shared_down_ms,overlap_hidden_ms\n1,1.5,0.5,0.5\n8,2.5,0.5,0.5",
      "tokens,context_tokens,routed_experts_ms\n1,0,1.5\n8,0,2.5"), "p.csv:9: the parts table has no context_tokens"),
    (("8,2.5,0.5,0.5", "8,2.5,-0.5,0.5"), "p.csv:11: shared_down_ms must not be negative"),
    (("tokens,routed_experts_ms", "tokens,routed_experts"), "p.csv:9: unknown column 'routed_experts'"),
])
def test_a_bad_parts_table_is_one_error_naming_the_line(edit, message) -> None:
    from specplan.hwprofiles.fileformat import parse_profile

    with pytest.raises(ProfileError, match=re.escape(message)):
        parse_profile(PARTS_FILE.replace(*edit), "p.csv")
