"""The prepared GPU capture (benchmarks/profile_gpu.py), its cross-check against the database, and its staircase.

The script runs here on the CPU at a tiny size exactly as the device runs it: a python that
has torch, numpy and yaml but no installed specplan (`-S`, the venv's site-packages on
PYTHONPATH, so no editable-install hook), from the repository root. The GPU plan itself is
checked as data: its grid, its captures, its time limits and what it sends back. The launch
capture's counting is checked on hand-made ops and hand-made profiler events, and its reader
(benchmarks/eager_graph.py) on a hand-made eager/graph pair and on the CPU run's own files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
from pathlib import Path
from types import ModuleType, SimpleNamespace

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch (the 'profile' extra) is not installed")

from specplan.hwprofiles.fileformat import read_profile_csv, write_profile_csv  # noqa: E402
from specplan.hwprofiles.harness import HarnessConfig, profile_from_table  # noqa: E402
from specplan.hwprofiles.modelshape import load_shape  # noqa: E402
from tests.conftest import REPO  # noqa: E402
from tests.test_engine_terms import pricer  # noqa: E402

SCRIPT = REPO / "benchmarks" / "profile_gpu.py"
FORWARDS = "runs the tiny-cpu plan: torch forwards in child processes"
needs_aic = pytest.mark.skipif(importlib.util.find_spec("aiconfigurator_core") is None,
                               reason="aiconfigurator-core (the 'aic' extra) is not installed")


def load_script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, REPO / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def bare_python(*args: str | Path, cwd: Path = REPO) -> subprocess.CompletedProcess:
    """This interpreter as the device has one: torch, numpy and yaml importable, specplan not installed."""
    env = {**os.environ, "PYTHONPATH": sysconfig.get_paths()["purelib"]}
    return subprocess.run([sys.executable, "-S", *map(str, args)], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=120)


@pytest.fixture(scope="module")
def cpu_run(tmp_path_factory) -> tuple[subprocess.CompletedProcess, Path, dict[str, Path]]:
    """The tiny-cpu plan, run once: (the process, its output folder, its curves unpacked by name)."""
    root = tmp_path_factory.mktemp("profile_gpu")
    done = bare_python(SCRIPT, "--plan", "tiny-cpu", "--out", root / "out", "--work", root / "work")
    curves = {}
    if (root / "out" / "curves.tar").is_file():
        with tarfile.open(root / "out" / "curves.tar") as tar:
            tar.extractall(root / "curves", filter="data")
        curves = {p.stem: p for p in (root / "curves").iterdir()}
    return done, root / "out", curves


@pytest.mark.slow(FORWARDS)
def test_the_prepared_gpu_script_runs_on_cpu_as_the_device_runs_it(cpu_run):
    # a plain path cannot import the tree (its folders install as specplan.<folder>): the script does
    assert "No module named 'specplan.hwprofiles'" in bare_python("-c", "import specplan.hwprofiles").stderr
    done, out, curves = cpu_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["curves.tar", "run.log", "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    assert [(c["name"], c["status"], c["points"], c["file"]) for c in summary["captures"]] == [
        ("cpu-tiny-torch-eager", "ok", 3, "cpu-tiny-torch-eager.csv"),
        ("cpu-tiny-torch-launch", "ok", 3, "cpu-tiny-torch-launch.json"),
        ("cpu-tiny-torch-drafter-dspark", "ok", 3, "cpu-tiny-torch-drafter-dspark.csv")]
    assert summary["environment"]["torch"] == torch.__version__
    log = (out / "run.log").read_text()
    assert "ok      cpu-tiny-torch-eager: 3 of 3 token counts" in log and "B=   24:" in log
    assert sorted(p.name for p in curves.values()) == [
        "cpu-tiny-torch-drafter-dspark.csv", "cpu-tiny-torch-eager.csv", "cpu-tiny-torch-launch.json"]
    assert read_profile_csv(curves["cpu-tiny-torch-eager"]).tokens.tolist() == [1, 8, 24]


@pytest.mark.slow(FORWARDS)
def test_a_captured_file_carries_its_provenance_and_spread(cpu_run):
    curve = read_profile_csv(cpu_run[2]["cpu-tiny-torch-eager"])
    prov = curve.provenance
    assert prov["device"].startswith("CPU ") and "1 torch threads" in prov["device"]
    assert prov["torch"] == torch.__version__ and prov["dtype"] == "float32"
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", prov["date"])
    assert prov["repeats"].startswith("5 timed runs per point") and prov["statistic"].startswith("median of 5 runs")
    assert prov["source"].endswith("benchmarks/profile_gpu.py --plan tiny-cpu --capture tiny-torch-eager "
                                   "--tokens 1,8,24")
    assert prov["capture_mode"] == "eager" and prov["layers_timed"].startswith("1 of 2; scaled")
    assert (prov["tokens_per_request"], prov["context_per_request"]) == ("4", "64")
    assert "step_ms - gemm_ms - attention_ms" in prov["parts"] and prov["attention_backend"]
    columns = curve.extra["columns"]
    assert list(columns) == ["p10_ms", "p90_ms", "min_ms", "max_ms", "gemm_ms", "attention_ms"]
    assert np.all(columns["min_ms"] <= columns["p10_ms"]) and np.all(columns["p90_ms"] <= columns["max_ms"])
    assert np.all(columns["p10_ms"] <= curve.step_ms_table) and np.all(curve.step_ms_table <= columns["p90_ms"])
    assert np.all(columns["gemm_ms"] > 0) and np.all(columns["attention_ms"] > 0)
    drafter = read_profile_csv(cpu_run[2]["cpu-tiny-torch-drafter-dspark"]).provenance
    assert "step_ms(R x γ)" in drafter["usage"] and drafter["tokens_per_request"] == "8"


def test_the_gpu_plan_captures_what_the_issue_asks_within_the_devices_limits():
    gpu = load_script("profile_gpu")
    plan = gpu.PLANS["gpu"]
    assert gpu.BUCKETS[:16] == tuple(range(1, 17)) and gpu.BUCKETS[16:22] == (24, 32, 40, 48, 56, 64)
    assert gpu.BUCKETS[-1] == 512 and 128 in gpu.BUCKETS and set(gpu.TILE_EDGES) <= set(gpu.EAGER_TOKENS)
    names = [c.suffix for c in plan.captures]
    assert len(set(names)) == len(names)
    llama = [c for c in plan.captures if c.shape == "llama3-8b" and c.drafter is None and c.mode != "launch"]
    assert {(c.mode, c.context) for c in llama} == {(m, k) for m in ("eager", "cudagraph") for k in (1024, 8192)}
    assert {c.drafter for c in plan.captures if c.shape == "llama3-8b"} == {None, "ar", "parallel", "markov"}
    assert {c.mode for c in plan.captures if c.shape == "qwen3-8b"} == {"eager", "cudagraph"}
    assert all(c.parts for c in plan.captures if c.mode == "cudagraph" and c.drafter is None)
    assert plan.device == "cuda" and plan.dtype == "bfloat16"
    assert sum(c.limit_s for c in plan.captures) <= plan.budget_s <= 8 * 60
    assert "timeout_s=570" in gpu.__doc__ and "python3 benchmarks/profile_gpu.py --out $OUT" in gpu.__doc__


def test_the_eager_graph_pair_and_its_launch_figures_come_first_and_match():
    """Issue 40: the 8B step eager and replayed, 1..512 tokens, the same step; its launch figures beside them."""
    plan = load_script("profile_gpu").PLANS["gpu"]
    graph, eager, launch = plan.captures[:3]
    assert (graph.suffix, eager.suffix, launch.suffix) == (
        "llama3.1-8b-torch-cudagraph", "llama3.1-8b-torch-eager", "llama3.1-8b-torch-launch")
    assert (graph.mode, eager.mode, launch.mode) == ("cudagraph", "eager", "launch")
    same = {(c.shape, c.context, c.drafter, c.layers, c.repeats) for c in (graph, eager, launch)}
    assert same == {("llama3-8b", 1024, None, None, 20)}
    assert set(graph.tokens) <= set(eager.tokens) and (eager.tokens[0], eager.tokens[-1]) == (1, 512)
    assert {64, 65, 128, 129, 256, 257} <= set(eager.tokens)  # both sides of the tile and graph edges
    assert set(launch.tokens) <= set(eager.tokens) and {1, 64, 65, 512} <= set(launch.tokens)


def test_the_8k_context_grid_stops_where_the_kv_cache_no_longer_fits():
    gpu = load_script("profile_gpu")
    plan = gpu.PLANS["gpu"]
    free = 139 * gpu.GIB
    long = plan.capture("llama3.1-8b-torch-cudagraph-ctx8k")
    tokens, note = gpu.fitting_tokens(long, free)
    # budget 0.85 x 139 - 15 GiB of weights - 4 = 99 GiB; 8,196 tokens x 128 KiB of KV per request:
    # 96 requests (B = 384) need 96.1 GiB, 112 (B = 448) 112.1 GiB
    assert tokens[-1] == 384 and "above 384 left out: the KV cache of B = 448 (112.1 GiB)" in note
    assert gpu.fitting_tokens(plan.capture("llama3.1-8b-torch-cudagraph"), free) == (long.tokens, "")
    assert gpu.gpu_slug("NVIDIA H200") == "h200" and gpu.gpu_slug("NVIDIA H100 80GB HBM3") == "h100"
    assert gpu.gpu_slug("NVIDIA A100-SXM4-80GB") == "a100" and gpu.gpu_slug("Some Accelerator") == "gpu"


def test_the_gpu_plan_refuses_a_machine_without_cuda_in_one_line(tmp_path):
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    done = bare_python(SCRIPT, "--out", tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1
    assert "sees no CUDA device and this plan needs one" in done.stderr


def test_a_captured_staircase_is_priced_at_its_padded_graph(tmp_path):
    """A CUDA-graph capture at the plan's buckets, written and read back: a 121-token step pays the 128 graph."""
    buckets = list(load_script("profile_gpu").BUCKETS)
    measured = 4.0 + 0.01 * np.array(buckets, dtype=float)  # each bucket its own time
    cfg = HarnessConfig(load_shape("llama3-8b"), buckets, mode="cudagraph")
    columns = {"step_ms": measured[None, :], "p10_ms": measured[None, :] * 0.99}
    curve = profile_from_table(cfg, "graphs", buckets, [None], columns, {"device": "d", "model": "m",
                                                                        "source": "s", "statistic": "median"})
    path = write_profile_csv(curve, tmp_path / "graphs.csv")
    quotes, loaded = pricer({"max_step_tokens": 512, "max_batch_requests": 64}, str(path))
    quote = quotes.quote(30, 30, 0, 0, 0)
    at = dict(zip(buckets, measured, strict=True))
    assert quote.verify_ms(121) == pytest.approx(at[128]) == pytest.approx(float(loaded.step_ms(128)))
    assert quote.verify_ms(113) == pytest.approx(at[128]) and quote.verify_ms(112) == pytest.approx(at[112])
    assert quote.verify_ms(129) == pytest.approx(at[160])
    assert quote.steps_per_s_range(121, 122)[0] == pytest.approx(1000.0 / quote.step_ms(128))
    assert loaded.extra["columns"]["p10_ms"][list(loaded.tokens).index(113)] == pytest.approx(at[128] * 0.99)


# --- the launch capture and the eager/graph reader ------------------------------------------------

H200 = "NVIDIA H200 (driver 570.86, CUDA 12.8)"
STEP = {"device": H200, "model": "llama3-8b (hidden 4096, layers 32, heads 32/8 kv, head_dim 128, ffn 14336, "
        "vocab 128256; 8.03B params)", "dtype": "bfloat16", "source": "hand-made", "statistic": "median",
        "batch_layout": "B tokens spread evenly over R = ceil(B / 4) requests; 1024 KV context tokens per request",
        "tokens_per_request": "4", "context_per_request": "1024"}
GRAPH_BUCKETS = [1, 8, 64, 72, 128]
EAGER_TOKENS = [1, 8, 64, 65, 128]


def graph_ms(b):
    return 4.0 + 0.01 * b


def eager_ms(b):
    return 2.0 * graph_ms(b)  # eager = 2 x graph at the same B


def pair_files(tmp_path: Path, eager_changes=None, graph_changes=None, launch_changes=None) -> dict[str, Path]:
    """A hand-made eager/graph pair of the 8B step and its launch figures (800 kernels, 5 µs per launch)."""
    shape = load_shape("llama3-8b")
    curves = {}
    for mode, tokens, ms, changes in (("eager", EAGER_TOKENS, eager_ms, eager_changes),
                                       ("cudagraph", GRAPH_BUCKETS, graph_ms, graph_changes)):
        prov = {**STEP, "capture_mode": mode, **({"buckets": " ".join(map(str, tokens))} if mode != "eager" else {}),
                **(changes or {})}
        table = {"step_ms": np.array([[ms(b) for b in tokens]])}
        curve = profile_from_table(HarnessConfig(shape, tokens, mode=mode), f"h200-llama3.1-8b-torch-{mode}", tokens,
                                   [None], table, prov)
        curves[mode] = write_profile_csv(curve, tmp_path / f"{mode}.csv")
    tokens = [1, 64, 65, 128]
    document = {"format": "specplan-launch/1", "name": "h200-llama3.1-8b-torch-launch",
                "provenance": {**STEP, "capture_mode": "eager; each step profiled", **(launch_changes or {})},
                "per_launch": {"op": "x.add_(1)", "launches": 2000, "rounds": 7, "eager_host_us": 5.0,
                               "eager_device_us": 5.1, "graph_device_us": 1.2, "graph_replay_host_us": 40.0},
                "steps": {"tokens": tokens, "kernels": [800] * 4, "copies": [2] * 4, "launch_calls": [800] * 4,
                          "kernel_busy_ms": [3.9] * 4, "host_issue_ms": [4.2] * 4,
                          "step_ms": [eager_ms(b) for b in tokens], "launch_bound_ms": [4.0] * 4}}
    curves["launch"] = tmp_path / "launch.json"
    curves["launch"].write_text(json.dumps(document))
    return curves


def test_the_reader_gives_the_ratio_per_token_count_kernels_and_the_launch_bound(tmp_path):
    reader = load_script("eager_graph")
    files = pair_files(tmp_path)
    pair = reader.read_pair(files["launch"], files["eager"], files["cudagraph"])
    r = pair.ratios()
    assert r["tokens"].tolist() == EAGER_TOKENS and r["bucket"].tolist() == [1, 8, 64, 72, 128]
    at_bucket = r["tokens"] == r["bucket"]
    assert np.allclose(r["ratio"][at_bucket], 2.0)
    # past a bucket the graph pays its padded size: B = 65 replays the 72 graph
    assert r["ratio"][3] == pytest.approx(eager_ms(65) / graph_ms(72))
    assert pair.launch.steps["kernels"].tolist() == [800] * 4 and pair.launch.per_launch["eager_host_us"] == 5.0
    assert np.allclose(pair.launch.launch_bound_ms, 800 * 5.0 / 1e3) and pair.layers == 32
    text = reader.report(pair)
    assert "| 65 | 9.300 | 4.720 (72) | 1.97 |" in text
    # the max rule: max(graph 4.01 ms, launch-bound 4.0 ms) / eager 8.02 ms at B = 1
    assert "| 1 | 800 | 2 | 4.000 | 4.200 | 3.900 | 8.020 | 4.010 | 0.50 |" in text
    assert "| kernels per eager decode step | 800 at B = 1: 25 per layer of 32 | 12,508" in text
    assert "| eager / graph step | x2.00 at B = 1 | ~240 ms / 97.5 ms TPOT = x2.46" in text
    assert "sgl-project/sglang PR #24047" in text and "meta-pytorch/tritonbench PR #1017" in text
    assert "| what an eager step pays on top of its graph | 4.01 ms at B = 1 |" in text


@pytest.mark.parametrize(("changes", "message"), [
    ({"graph_changes": {"context_per_request": "8192"}}, "context_per_request differs, launch '1024', graph '8192'"),
    ({"eager_changes": {"model": "qwen3-8b (...)"}}, "model differs, launch 'llama3-8b"),
    ({"launch_changes": {"dtype": "float16"}}, "dtype differs, launch 'float16', eager 'bfloat16'"),
    ({"graph_changes": {"layers_timed": "1 of 32"}}, "layers_timed differs, eager None, graph '1 of 32'"),
    ({"graph_changes": {"capture_mode": "eager"}}, "h200-llama3.1-8b-torch-cudagraph was captured 'eager', not cudagraph"),
])
def test_the_reader_refuses_a_mismatched_pair_in_one_line(tmp_path, changes, message):
    reader = load_script("eager_graph")
    files = pair_files(tmp_path, **changes)
    with pytest.raises(reader.ProfileError, match=r"^not one eager/graph pair: ") as refused:
        reader.read_pair(files["launch"], files["eager"], files["cudagraph"])
    assert message in str(refused.value) and "\n" not in str(refused.value)
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "eager_graph.py"), "--launch", files["launch"],
                           "--eager", files["eager"], "--graph", files["cudagraph"]],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and done.stdout == "" and done.stderr.count("\n") == 1 and message in done.stderr


def test_the_reader_refuses_a_file_that_is_not_launch_figures(tmp_path):
    reader = load_script("eager_graph")
    files = pair_files(tmp_path)
    with pytest.raises(reader.ProfileError, match="not a launch-figures file"):
        reader.read_pair(files["eager"])
    broken = json.loads(files["launch"].read_text())
    del broken["steps"]["kernels"]
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    with pytest.raises(reader.ProfileError, match=r"broken\.json: missing kernels$"):
        reader.read_pair(tmp_path / "broken.json")


def test_a_profiled_step_counts_the_ops_that_do_work_on_a_cpu():
    gpu = load_script("profile_gpu")
    a, b = torch.randn(8, 8), torch.randn(8, 8)

    def ops():
        torch.add(a, b)
        torch.relu(a)  # relu calls clamp_min: one op that does work
        a.view(64)  # a view: no work
        torch.nn.functional.linear(a, b)  # linear -> t (a view) and matmul -> mm: one op that does work

    with torch.inference_mode():
        ops()
        counted = gpu.count_launches(torch, gpu.profiled_events(torch, ops, False), False)
    assert counted["kernels"] == 3 and counted["copies"] == 0 and counted["kernel_busy_ms"] > 0


def test_cuda_kernel_events_are_counted_apart_from_copies_and_launch_calls():
    gpu = load_script("profile_gpu")
    cpu, cuda = torch.autograd.DeviceType.CPU, torch.autograd.DeviceType.CUDA

    def event(name, device, us=0.0):
        return SimpleNamespace(name=name, device_type=device, cpu_children=[],
                               time_range=SimpleNamespace(elapsed_us=lambda: us))

    trace = [event("aten::mm", cpu, 9.0), event("cudaLaunchKernel", cpu, 4.0), event("cuLaunchKernelEx", cpu, 4.0),
             event("nvjet_hsh_64x8_gemm", cuda, 2.5), event("void at::native::elementwise_kernel", cuda, 1.5),
             event("Memcpy HtoD (Pageable -> Device)", cuda, 1.0), event("Memset (Device)", cuda, 0.5)]
    counted = gpu.count_launches(torch, trace, True)
    assert counted == {"kernels": 2, "copies": 2, "launch_calls": 2, "kernel_busy_ms": pytest.approx(0.004)}
    with pytest.raises(gpu.ProfileError, match="no CUDA kernel events \\(2 launch calls seen\\): is CUPTI missing"):
        gpu.count_launches(torch, trace[:3], True)


@pytest.mark.slow(FORWARDS)
def test_the_launch_capture_writes_its_figures_with_provenance(cpu_run):
    reader = load_script("eager_graph")
    launch = reader.read_launches(cpu_run[2]["cpu-tiny-torch-launch"])
    eager = read_profile_csv(cpu_run[2]["cpu-tiny-torch-eager"])
    prov = launch.provenance
    for key in ("device", "model", "dtype", "torch", "batch_layout", "context_per_request", "tokens_per_request"):
        assert prov[key] == eager.provenance[key], key
    assert prov["source"].endswith("benchmarks/profile_gpu.py --plan tiny-cpu --capture tiny-torch-launch "
                                   "--tokens 1,8,24")
    assert re.fullmatch(r"\d{4}-\d\d-\d\d \d\d:\d\d UTC", prov["date"]) and "time_limit" not in prov
    assert prov["counting"].startswith("the aten ops of torch.profiler over one step that do work")
    assert prov["pair"].startswith("cpu-tiny-torch-eager and cpu-tiny-torch-cudagraph")
    assert launch.tokens.tolist() == [1, 8, 24]
    per_launch = launch.per_launch
    assert 0 < per_launch["eager_host_us"] < 1000 and per_launch["graph_device_us"] is None
    # the toy shape's 2 layers x 4 projections + the LM head alone are 9 matrix products
    assert np.all(launch.steps["kernels"] >= 9) and np.all(launch.steps["kernels"] == np.round(launch.steps["kernels"]))
    assert np.allclose(launch.steps["launch_bound_ms"], launch.launch_bound_ms, rtol=1e-4)
    assert np.all(launch.steps["step_ms"] > 0) and np.all(launch.steps["host_issue_ms"] > 0)
    log = (cpu_run[1] / "run.log").read_text()
    assert "## cpu-tiny-torch: an eager step against its CUDA-graph replay, and a launch" in log
    assert "eager/graph: no graph curve beside these launch figures" in log
    assert "| kernels per eager decode step |" in log and "gty111/gLLM PR #264" in log


@pytest.mark.slow(FORWARDS)
def test_a_cpu_captured_eager_curve_reads_back_as_half_of_a_pair(cpu_run, tmp_path):
    reader = load_script("eager_graph")
    files = cpu_run[2]
    eager = read_profile_csv(files["cpu-tiny-torch-eager"])
    # its graph half as the device would write it: the same step at the same buckets, replayed
    graph = profile_from_table(HarnessConfig(load_shape("tiny-cpu"), [1, 8, 24], mode="cudagraph"), "graph",
                               [1, 8, 24], [None], {"step_ms": eager.step_ms_table[None, :] / 3},
                               {**eager.provenance, "capture_mode": "cudagraph (one graph per bucket)",
                                "buckets": "1 8 24"})
    path = write_profile_csv(graph, tmp_path / "graph.csv")
    pair = reader.read_pair(files["cpu-tiny-torch-launch"], files["cpu-tiny-torch-eager"], path)
    assert np.allclose(pair.ratios()["ratio"], 3.0) and pair.layers == 2
    assert "| 24 | " in reader.report(pair)
    # the drafter's curve is another step: refused
    with pytest.raises(reader.ProfileError, match=r"^not one eager/graph pair: model differs"):
        reader.read_pair(files["cpu-tiny-torch-launch"], files["cpu-tiny-torch-drafter-dspark"], path)


@pytest.mark.slow("runs one capture of the tiny-cpu plan: torch forwards in a child process")
def test_only_reruns_the_captures_it_names(tmp_path):
    done = bare_python(SCRIPT, "--plan", "tiny-cpu", "--only", "tiny-torch-launch", "--out", tmp_path / "out")
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads((tmp_path / "out" / "summary.json").read_text())
    assert [c["name"] for c in summary["captures"]] == ["cpu-tiny-torch-launch"]
    assert "eager/graph: no eager curve beside these launch figures" in (tmp_path / "out" / "run.log").read_text()


def test_only_refuses_a_capture_the_plan_lacks_in_one_line(tmp_path):
    done = bare_python(SCRIPT, "--plan", "tiny-cpu", "--only", "tiny-torch-launch,nope", "--out", tmp_path / "out")
    assert done.returncode == 2 and done.stderr.count("\n") == 1 and not (tmp_path / "out").exists()
    assert "--only: no capture 'nope' in this plan (valid: tiny-torch-eager, tiny-torch-launch" in done.stderr


# --- the cross-check against AIConfigurator ------------------------------------------------------


@pytest.mark.slow(FORWARDS)
@needs_aic
def test_the_crosscheck_holds_a_cpu_captured_curve_against_the_database(cpu_run):
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "profile_crosscheck.py"), "--torch",
                           str(cpu_run[2]["cpu-tiny-torch-eager"]), "--against", "builtin:h200-llama3.1-8b-vllm"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "| 24 | 384 |" in out  # B = 24: 6 requests of 64 cached tokens
    assert "NOT THE SAME GPU" in out and "torch/AIC over 3 points at 64 cached tokens per request: median" in out
    assert "cliffs: torch" in out and "flat (within 10% of the smallest B) up to" in out
    assert "more than 15% apart at 3 of 3 points:" in out and "differs most" in out


@needs_aic
def test_the_crosscheck_names_the_term_that_differs():
    check = load_script("profile_crosscheck")
    points = check.Points(np.array([1, 64, 128]), np.array([1, 16, 32]), 1024)
    aic = check.aic_terms("builtin:h200-llama3.1-8b-vllm", points)
    # the op split sums to the built-in's step within its interpolation (C = 1,024 cached per request)
    assert np.allclose(aic["gemm"] + aic["attention"] + aic["rest"], aic["step"], rtol=0.03)
    doubled = {**aic, "attention": 2 * aic["attention"]}
    doubled["step"] = doubled["gemm"] + doubled["attention"] + doubled["rest"]
    assert check.apart_terms(doubled, aic, 2).startswith("attention differs most: attention +")
    assert check.apart_terms({"step": aic["step"]}, aic, 0) == "torch parts not timed"


def test_the_crosscheck_finds_cliffs_and_plateaus():
    check = load_script("profile_crosscheck")
    tokens = np.array([1, 16, 32, 64, 65, 96, 128, 129, 160])
    smooth = 5.0 + 0.01 * tokens
    assert check.cliffs(tokens, smooth) == []
    sawtooth = smooth * np.where(tokens > 64, 1.08, 1.0) * np.where(tokens > 128, 0.95, 1.0)
    assert check.cliffs(tokens, sawtooth) == ["64→65 +8%", "128→129 -5%"]
    assert check.flat_until(tokens, smooth) == 32
    staircase = profile_from_table(HarnessConfig(load_shape("tiny-cpu"), [4, 8], mode="cudagraph"), "s", [4, 8],
                                   [None], {"step_ms": np.array([[1.0, 2.0]])},
                                   {"device": "d", "model": "m", "source": "s", "statistic": "median",
                                    "buckets": "4 8", "context_per_request": "100", "tokens_per_request": "4"})
    points = check.torch_points(staircase)
    assert points.tokens.tolist() == [4, 8] and points.context.tolist() == [100, 200]


def test_the_captured_policies_table_runs_on_stand_in_curves():
    done = subprocess.run([sys.executable, str(REPO / "benchmarks" / "captured_policies.py"),
                           "--target", "builtin:h200-llama3.1-8b-vllm", "--drafter",
                           "builtin:h200-llama3.1-8b-vllm-drafter-2l", "--markov", "builtin:h200-llama3.1-8b-vllm-drafter-1l",
                           "--users", "4", "--seeds", "2", "--duration", "3"],
                          cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "of a target step (builtin:h200-llama3.1-8b-vllm-drafter-1l)" in done.stdout
    assert re.search(r"^\| 4 \| [\d,]+ \| .* \| [+-]\d+\.\d% \[", done.stdout, re.MULTILINE)
    missing = subprocess.run([sys.executable, str(REPO / "benchmarks" / "captured_policies.py"), "--gpu", "nope"],
                             cwd=REPO, capture_output=True, text=True, timeout=60)
    assert missing.returncode == 2 and "builtin:nope-llama3.1-8b-torch-markov: no such built-in" in missing.stdout

