"""Bad input: every malformed scenario gives exit status 2 and one line naming the problem."""

from __future__ import annotations

import subprocess
import sys

import pytest
import yaml

from specplan.errors import SpecplanError
from specplan.hwprofiles.errors import ProfileError
from specplan.policies.errors import PolicyError
from specplan.traces.errors import TraceError
from tests.conftest import BASE, REPO, merged


def scenario_file(tmp_path, mapping=None, text=None):
    path = tmp_path / "bad.yaml"
    path.write_text(text if text is not None else yaml.safe_dump(mapping))
    return path


def drop(mapping, dotted):
    out = merged(mapping, {})
    *parents, last = dotted.split(".")
    node = out
    for p in parents:
        node = node[p]
    del node[last]
    return out


CASES = [
    ("wrong type", merged(BASE, {"engine": {"max_batch_requests": "lots"}}), "engine.max_batch_requests"),
    ("negative rate", merged(BASE, {"workload": {"arrivals": {"rate_per_s": -1}}}), "workload.arrivals.rate_per_s"),
    ("probability above 1", merged(BASE, {"drafter": {"acceptance": {"per_position": {"chat": [0.9, 1.2, 0.5]}}}}),
     "per_position.chat[1]"),
    ("mix not summing to 1", merged(BASE, {"drafter": {"acceptance": {"domains": {"chat": 0.5, "math": 0.2},
                                                                       "per_position": {"math": [0.9] * 3}}}}),
     "must sum to 1"),
    ("unknown top-level key", merged(BASE, {"horizn": {"duration_s": 1}}), "did you mean 'horizon'"),
    ("unknown nested key", merged(BASE, {"engine": {"max_batch_request": 4}}), "did you mean 'max_batch_requests'"),
    ("missing seed", drop(BASE, "seed"), "seed: required key is missing"),
    ("unknown router", merged(BASE, {"cluster": {"router": "fastest"}}), "cluster.router"),
    ("unknown policy", merged(BASE, {"policy": {"name": "statik"}}), "did you mean 'static'"),
    ("unknown arrival kind", merged(BASE, {"workload": {"arrivals": {"kind": "poison"}}}), "did you mean 'poisson'"),
    ("warmup longer than run", merged(BASE, {"horizon": {"warmup_s": 50}}), "horizon.warmup_s"),
    ("unsorted profile table", merged(BASE, {"hardware": {"profile": "x"}}) | {"hardware": {"profile": {
        "kind": "table", "tokens": [1, 64, 32], "step_ms": [8, 9, 10]}}}, "sorted"),
    ("unknown inline profile key", merged(BASE, {"hardware": {"profile": {"per_tokn_ms": 0.1}}}),
     "hardware.profile.per_tokn_ms: unknown key (did you mean 'per_token_ms'?)"),
    ("unknown inline profile kind", merged(BASE, {"hardware": {"profile": "x"}}) | {"hardware": {"profile": {
        "kind": "tabel", "tokens": [1], "step_ms": [8]}}}, "did you mean 'table'"),
    ("bad workload rule across keys", merged(BASE, {"workload": {"prompt_tokens": {
        "kind": "lognormal", "median": 100, "sigma": 1, "min": 50, "max": 10}}}), "workload.prompt_tokens.min"),
    ("bad policy param across keys", merged(BASE, {"policy": {"name": "length-schedule", "params": {
        "schedule": {}}}}), "policy.params.schedule"),
    ("profile file missing", merged(BASE, {"hardware": {"profile": "no-such-profile.csv"}}), "hardware.profile"),
    ("fractional block size", merged(BASE, {"drafter": {"block_size": 2.5}}), "drafter.block_size"),
    ("boolean as number", merged(BASE, {"engine": {"kv_capacity_tokens": True}}), "engine.kv_capacity_tokens"),
    ("unknown domain", merged(BASE, {"drafter": {"acceptance": {"domains": {"poetry": 1.0}}}}), "poetry"),
    ("short curve", merged(BASE, {"drafter": {"acceptance": {"per_position": {"chat": [0.9]}}}}), "block_size is 3"),
    ("bad policy param", merged(BASE, {"policy": {"params": {"lenght": 2}}}), "did you mean 'length'"),
    ("zero replicas", merged(BASE, {"cluster": {"replicas": 0}}), "cluster.replicas"),
    ("section not a mapping", merged(BASE, {"engine": [1, 2]}), "engine: expected a mapping"),
    ("unknown graph engine", merged(BASE, {"engine": {"cuda_graph": {"engine": "trt"}}}), "engine.cuda_graph.engine"),
    ("no capture size fits", merged(BASE, {"engine": {"max_step_tokens": 64, "cuda_graph": {"capture_sizes": [128]}}}),
     "engine.cuda_graph.capture_sizes"),
    ("unknown budget rule", merged(BASE, {"engine": {"budget": "drop"}}), "engine.budget"),
    ("rank cap below a block", merged(BASE, {"engine": {"dp_attention": {"ranks": 4, "max_step_tokens": 2}}}),
     "engine.dp_attention.max_step_tokens"),
]


@pytest.mark.parametrize(("label", "mapping", "expected"), CASES, ids=[c[0] for c in CASES])
def test_malformed_scenario_is_one_line_and_status_2(cli, tmp_path, label, mapping, expected):
    status, _, err = cli("check", scenario_file(tmp_path, mapping))
    assert status == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert expected in err, err


@pytest.mark.parametrize(("label", "text", "expected"), [
    ("empty file", "", "empty"),
    ("not a mapping", "- a\n- b\n", "must be a YAML mapping"),
    ("invalid YAML", "name: [unclosed\nseed: 1\n", "not valid YAML"),
])
def test_malformed_files(cli, tmp_path, label, text, expected):
    status, _, err = cli("check", scenario_file(tmp_path, text=text))
    assert status == 2 and err.count("\n") == 1
    assert expected in err


def test_unreadable_file(cli, tmp_path):
    status, _, err = cli("check", tmp_path / "absent.yaml")
    assert status == 2 and "cannot read" in err and err.count("\n") == 1


def test_bad_override_syntax(cli, tmp_path):
    status, _, err = cli("check", scenario_file(tmp_path, BASE), "--set", "cluster.replicas")
    assert status == 2 and "expected dotted.key=value" in err


def test_override_reaching_into_a_scalar(cli, tmp_path):
    status, _, err = cli("check", scenario_file(tmp_path, BASE), "--set", "seed.value=3")
    assert status == 2 and "'seed' is not a mapping" in err


def test_unknown_subcommand_and_missing_argument(cli):
    status, _, err = cli("frobnicate")
    assert status == 2 and "invalid choice" in err
    status, _, err = cli("run")
    assert status == 2


@pytest.mark.slow("starts a real specplan process (interpreter start and imports)")
def test_real_process_prints_no_traceback(tmp_path):
    path = scenario_file(tmp_path, merged(BASE, {"workload": {"arrivals": {"rate_per_s": -1}}}))
    proc = subprocess.run([sys.executable, "-m", "specplan.cli.main", "run", str(path), "--out", str(tmp_path / "o")],
                          capture_output=True, text=True, cwd=REPO)
    assert proc.returncode == 2
    assert proc.stderr.startswith("specplan: error:") and "Traceback" not in proc.stderr
    assert not (tmp_path / "o").exists()


def test_the_leaf_packages_errors_are_one_line_and_status_2(cli, tmp_path):
    """ProfileError, TraceError and PolicyError are the leaf packages' own; the CLI prints each as one line."""
    assert all(issubclass(e, SpecplanError) for e in (ProfileError, TraceError, PolicyError))
    trace = tmp_path / "bad.csv"
    trace.write_text("a,b\n1,2\n")
    for args, expected in ((("profile-plot", tmp_path / "none.csv", "--out", tmp_path / "x.png"), "none.csv"),
                           (("trace-stats", trace, "--format", "azure"), "no column 'TIMESTAMP'"),
                           (("audit", "dspark-asinc"), "did you mean 'dspark-async'")):
        status, _, err = cli(*args)
        assert status == 2 and err.count("\n") == 1 and "Traceback" not in err and expected in err, err


BASE_TEXT = yaml.safe_dump(BASE, sort_keys=False)


def line_of(text: str, prefix: str, nth: int = 1) -> int:
    """The 1-based line number of the nth line of `text` that starts with `prefix`."""
    hits = [i + 1 for i, line in enumerate(text.splitlines()) if line.startswith(prefix)]
    return hits[nth - 1]


@pytest.mark.parametrize(("label", "appended", "key", "prefix"), [
    ("a second engine block", "engine:\n  max_batch_requests: 4\n", "'engine'", "engine:"),
    ("a second seed line", "seed: 8\n", "'seed'", "seed:"),
    ("a key repeated inside a block", None, "'engine.max_batch_requests'", "  max_batch_requests:"),
], ids=["second engine block", "second seed line", "nested repeat"])
def test_duplicate_keys_are_refused_with_both_lines(cli, tmp_path, label, appended, key, prefix):
    """Issue 39, item 2: YAML keeps the last of two equal keys, so a second `engine:` block replaced the first whole
    (max batch 128 → 4, KV and prefill back to defaults) with exit 0. A repeated key at any depth is refused, one
    line naming the key path and both lines."""
    if appended is None:
        text = BASE_TEXT.replace("  max_batch_requests: 16\n", "  max_batch_requests: 16\n  max_batch_requests: 4\n")
    else:
        text = BASE_TEXT + appended
    status, _, err = cli("check", scenario_file(tmp_path, text=text))
    assert status == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    first, second = line_of(text, prefix), line_of(text, prefix, 2)
    assert f"duplicate key {key}" in err and f"lines {first} and {second}" in err, err


def test_duplicate_keys_in_a_merged_file_and_in_a_list_item_are_refused(cli, tmp_path):
    """The same rule holds for a `--merge` fragment and inside a list (a sweep's variants)."""
    fragment = tmp_path / "fragment.yaml"
    fragment.write_text("policy:\n  name: static\n  name: none\n")
    status, _, err = cli("check", scenario_file(tmp_path, BASE), "--merge", fragment)
    assert status == 2 and err.count("\n") == 1 and "fragment.yaml" in err, err
    assert "duplicate key 'policy.name' (lines 2 and 3)" in err, err
    text = BASE_TEXT + "sweep:\n  variants:\n    - label: a\n      policy: {name: none}\n      label: b\n"
    status, _, err = cli("check", scenario_file(tmp_path, text=text))
    assert status == 2 and "duplicate key 'sweep.variants[0].label'" in err, err
