"""The prepared GPU capture (benchmarks/profile_gpu.py), its cross-check against the database, and its staircase.

The script runs here on the CPU at a tiny size exactly as the device runs it: a python that
has torch, numpy and yaml but no installed specplan (`-S`, the venv's site-packages on
PYTHONPATH, so no editable-install hook), from the repository root. The GPU plan itself is
checked as data: its grid, its captures, its time limits and what it sends back.
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
from types import ModuleType

import numpy as np
import pytest

torch = pytest.importorskip("torch", reason="torch (the 'profile' extra) is not installed")

from specplan.hwprofiles.fileformat import read_profile_csv, write_profile_csv  # noqa: E402
from specplan.hwprofiles.harness import HarnessConfig, profile_from_table  # noqa: E402
from specplan.hwprofiles.modelshape import load_shape  # noqa: E402
from tests.conftest import REPO  # noqa: E402
from tests.test_engine_terms import pricer  # noqa: E402

SCRIPT = REPO / "benchmarks" / "profile_gpu.py"
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
        curves = {p.stem: p for p in (root / "curves").glob("*.csv")}
    return done, root / "out", curves


def test_the_prepared_gpu_script_runs_on_cpu_as_the_device_runs_it(cpu_run):
    # a plain path cannot import the tree (its folders install as specplan.<folder>): the script does
    assert "No module named 'specplan.hwprofiles'" in bare_python("-c", "import specplan.hwprofiles").stderr
    done, out, curves = cpu_run
    assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in out.iterdir()) == ["curves.tar", "run.log", "summary.json"]
    summary = json.loads((out / "summary.json").read_text())
    assert [(c["name"], c["status"], c["points"]) for c in summary["captures"]] == [
        ("cpu-tiny-torch-eager", "ok", 3), ("cpu-tiny-torch-drafter-dspark", "ok", 3)]
    assert summary["environment"]["torch"] == torch.__version__
    log = (out / "run.log").read_text()
    assert "ok      cpu-tiny-torch-eager: 3 of 3 token counts" in log and "B=   24:" in log
    assert sorted(curves) == ["cpu-tiny-torch-drafter-dspark", "cpu-tiny-torch-eager"]
    assert read_profile_csv(curves["cpu-tiny-torch-eager"]).tokens.tolist() == [1, 8, 24]


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
    llama = [c for c in plan.captures if c.shape == "llama3-8b" and c.drafter is None]
    assert {(c.mode, c.context) for c in llama} == {(m, k) for m in ("eager", "cudagraph") for k in (1024, 8192)}
    assert {c.drafter for c in plan.captures if c.shape == "llama3-8b"} == {None, "ar", "parallel", "markov"}
    assert {c.mode for c in plan.captures if c.shape == "qwen3-8b"} == {"eager", "cudagraph"}
    assert all(c.parts for c in plan.captures if c.mode == "cudagraph" and c.drafter is None)
    assert plan.device == "cuda" and plan.dtype == "bfloat16"
    assert sum(c.limit_s for c in plan.captures) <= plan.budget_s <= 8 * 60
    assert "timeout_s=570" in gpu.__doc__ and "python3 benchmarks/profile_gpu.py --out $OUT" in gpu.__doc__


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


# --- the cross-check against AIConfigurator ------------------------------------------------------


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

