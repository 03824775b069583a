"""Scenario YAML → a validated, frozen `Scenario`.

    load_scenario(path, overrides=(), seed=None) -> Scenario
    scenario_from_mapping(raw, base_dir, source="<mapping>") -> Scenario
    resolved_mapping(scenario) -> dict   (what is written next to every result)

Overrides are `dotted.key=value` strings whose value is parsed as YAML, so
`drafter.acceptance.domains={chat: 1.0}` sets a mapping (setting one of two
alternatives, `horizon.requests` or `horizon.duration_s`, drops the other), or `@FILE`: a YAML
mapping (a fragment such as the `drafter:` block `specplan acceptance`
writes, or the `policy:` block of `specplan tune`) deep-merged over the
scenario the way a sweep merges a variant (`specplan.simulator.scenario.merge`); the
CLI's `--merge FILE` passes it. Overrides apply in order. Relative paths
resolve against the scenario file's folder. A mapping key written twice at
any depth (a second `engine:` block) is refused with both line numbers in
that file or fragment, since YAML would keep the last silently. Loading also resolves the
hardware profile and the policy name, so `specplan check` catches a missing
profile file or an unknown policy before anything runs, and refuses a
horizon too large to run (`specplan.simulator.scenario.size`). A built-in
measured with data-parallel attention (`parallelism: TP1 EP8 DP8`) sets
`engine.dp_attention` to its ranks where the scenario is silent, and refuses a
stated count that contradicts them. A profile with a
memory model (a `kv_capacity_tokens` line in its provenance: the measured
built-ins have one) sets `engine.kv_capacity_tokens` where the scenario is
silent, at the serving engine's memory fraction (`engine.memory_fraction`,
else the engine's own rule) counted as that engine counts it
(specplan.simulator.scenario.memory); a stated figure is kept, with a note
past the engine's pool, and refused only past what the GPUs could hold at
all (an H100 scenario that kept an H200's 880k tokens), with both numbers.
What loading took from the profile is said in `Scenario.notes`, one line
each, with what the serving engine resolved to where that is worth a line
(specplan.simulator.scenario.engine_notes: the row a version takes, kernel
times of another engine); `specplan run` and `check` print them, every
summary.json keeps them (`notes`), and `plan` and `sweep` print each once. Without a memory model the key is
required. `engine.max_batch_requests: auto` takes the serving engine's own
request slots for the deployment (specplan.engines.caps: SGLang's DeepSeek-V4
256 server-wide, vLLM's max_num_seqs per DP rank, ...).
"""

from __future__ import annotations

import copy
import dataclasses
import re
from pathlib import Path
from typing import Any

import yaml

from specplan.engines import EngineTraits
from specplan.hwprofiles import load_profile
from specplan.hwprofiles.facts import attention_ranks, cap_facts, memory_model, serving_engine
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.core.errors import ScenarioError, SpecplanError
from specplan.simulator.core.schema import Context, build, to_plain
from specplan.simulator.scenario.drafter_profile import check_drafter_profile, check_search_drafters
from specplan.simulator.scenario.engine_notes import engine_notes
from specplan.simulator.scenario.memory import engine_kv_pool, kv_pool
from specplan.simulator.scenario.merge import deep_merge, excluded_by
from specplan.simulator.scenario.policy import policy_params
from specplan.simulator.scenario.size import check_run_size
from specplan.simulator.scenario.spec import ChunkedPrefill, DpAttention, Scenario


def scenario_from_mapping(raw: Any, base_dir: Path, source: str = "<mapping>") -> Scenario:
    """Validate a mapping (already parsed YAML) into a Scenario."""
    if not isinstance(raw, dict):
        raise ScenarioError("", f"a scenario must be a YAML mapping, got {type(raw).__name__}")
    raw = {k: v for k, v in raw.items() if k not in ("source", "notes")}
    scenario = build(Scenario, raw, "", Context(base_dir))
    scenario = _with_source(scenario, source)
    scenario = _with_profile_path(scenario, base_dir)
    scenario = with_profile_ranks(scenario)
    scenario = _with_engine_prefill_profile(scenario, base_dir)
    scenario = with_policy_params(with_step_budget(scenario))
    check_run_size(scenario, load_profile(scenario.hardware.profile))
    check_drafter_profile(scenario)
    if scenario.search is not None:
        check_search_drafters(raw, scenario, base_dir)
    if scenario.cluster.prefill is not None:
        scenario = _with_prefill_pool(scenario, base_dir)
    return scenario


def with_profile_ranks(scenario: Scenario) -> Scenario:
    """engine.dp_attention from a DP built-in's header (`parallelism: TP1 EP8 DP8`): its ranks where the scenario
    is silent (with a note), a stated count that contradicts them refused. A header of one attention rank
    (`TP1 EP1 DP1`) leaves the key to the scenario: DP ranks over a dense TP1 profile are a deployment users run
    (issue 30's Llama-3.1-8B over 2 ranks)."""
    try:
        profile = load_profile(scenario.hardware.profile)
    except SpecplanError as exc:
        raise ScenarioError("hardware.profile", str(exc)) from None
    measured = attention_ranks(profile)
    if measured is None or measured[0] == 1:
        return scenario
    ranks, line = measured
    dp = scenario.engine.dp_attention
    if dp is not None and dp.ranks != ranks:
        raise ScenarioError("engine.dp_attention.ranks", f"{dp.ranks} contradicts profile {profile.name}, measured "
                            f"with {ranks} attention ranks ({line}); set engine.dp_attention.ranks: {ranks} (or "
                            f"leave engine.dp_attention out), or use a profile of DP{dp.ranks}")
    if dp is not None:
        return scenario
    note = (f"engine.dp_attention: {ranks} ranks, from profile {profile.name}'s header ({line}); the scenario "
            "states none")
    engine = dataclasses.replace(scenario.engine, dp_attention=DpAttention(ranks=ranks))
    return dataclasses.replace(scenario, engine=engine, notes=(*scenario.notes, note))


def with_policy_params(scenario: Scenario) -> Scenario:
    """`policy.params` with every default of the policy's `Params` filled in (as the resolved scenario records it)."""
    params = to_plain(policy_params(scenario.policy))
    return dataclasses.replace(scenario, policy=dataclasses.replace(scenario.policy, params=params))


def _with_prefill_pool(scenario: Scenario, base_dir: Path) -> Scenario:
    """cluster.prefill: its profile path resolved and checked (a prefill-phase profile holding a batch)."""
    pool = scenario.cluster.prefill
    assert pool is not None
    profile = pool.profile
    if isinstance(profile, str) and not profile.startswith("builtin:") and not Path(profile).is_absolute():
        pool = dataclasses.replace(pool, profile=str((base_dir / profile).resolve()))
    check_prefill_profile(pool)
    cluster = dataclasses.replace(scenario.cluster, prefill=pool)
    return dataclasses.replace(scenario, cluster=cluster)


def check_prefill_profile(pool: Any) -> None:
    where = "cluster.prefill.profile"
    profile = prefill_step_profile(pool.profile, where)
    if pool.max_batch_tokens > profile.max_tokens and profile.extrapolation == "none":
        raise ScenarioError("cluster.prefill.max_batch_tokens", f"{pool.max_batch_tokens} tokens is beyond the "
                            f"profile's last measured point ({profile.max_tokens})")


def prefill_step_profile(source: Any, where: str) -> StepProfile:
    """A profile that prices prefill steps: it loads and, when named, says `phase: prefill`."""
    try:
        profile = load_profile(source)
    except SpecplanError as exc:
        raise ScenarioError(where, str(exc)) from None
    if isinstance(source, str) and profile.provenance.get("phase") != "prefill":
        raise ScenarioError(where, f"{profile.name} is not a prefill-step profile (its header has no "
                            "'phase: prefill'); use e.g. builtin:h200-llama3.1-8b-vllm-prefill")
    return profile


def _with_engine_prefill_profile(scenario: Scenario, base_dir: Path) -> Scenario:
    """engine.prefill.profile (chunked prefill's prefill steps): its path resolved, and checked to be a prefill
    profile holding the engine's largest chunk (every attention rank's chunk, under data-parallel attention)."""
    prefill = scenario.engine.prefill
    if not isinstance(prefill, ChunkedPrefill) or prefill.profile is None:
        return scenario
    source = prefill.profile
    if not source.startswith("builtin:") and not Path(source).is_absolute():
        source = str((base_dir / source).resolve())
    profile = prefill_step_profile(source, "engine.prefill.profile")
    dp = scenario.engine.dp_attention
    chunk = prefill.chunk_tokens if dp is None else dp.ranks * (dp.chunk_tokens or prefill.chunk_tokens // dp.ranks)
    if chunk > profile.max_tokens and profile.extrapolation == "none":
        raise ScenarioError("engine.prefill.chunk_tokens", f"{chunk} prompt tokens a step is beyond the prefill "
                            f"profile's last measured point ({profile.max_tokens})")
    engine = dataclasses.replace(scenario.engine, prefill=dataclasses.replace(prefill, profile=source))
    return dataclasses.replace(scenario, engine=engine)


def _with_profile_path(scenario: Scenario, base_dir: Path) -> Scenario:
    """A relative CSV `hardware.profile` is relative to the scenario's folder (builtin:NAME is not a path)."""
    profile = scenario.hardware.profile
    if not isinstance(profile, str) or profile.startswith("builtin:") or Path(profile).is_absolute():
        return scenario
    hardware = dataclasses.replace(scenario.hardware, profile=str((base_dir / profile).resolve()))
    return dataclasses.replace(scenario, hardware=hardware)


def _with_source(scenario: Scenario, source: str) -> Scenario:
    return dataclasses.replace(scenario, source=source)


def with_step_budget(scenario: Scenario) -> Scenario:
    """The profile loads and the serving engine resolves; `engine.max_step_tokens` resolved (default: the profile's largest B) and checked.

    The default is filled in here, once, so the engine reads it and the
    resolved scenario written next to every result records it.
    """
    try:
        profile = load_profile(scenario.hardware.profile)
    except ScenarioError:
        raise
    except SpecplanError as exc:
        raise ScenarioError("hardware.profile", str(exc)) from None
    check_serving_engine(scenario, profile)
    budget = scenario.engine.max_step_tokens
    if budget is not None and budget > profile.max_tokens and profile.extrapolation == "none":
        raise ScenarioError("engine.max_step_tokens", f"{budget} tokens is beyond the profile's last measured "
                            f"point ({profile.max_tokens}) and it declares no extrapolation")
    budget = budget or profile.max_tokens
    block = scenario.drafter.block_size if scenario.drafter.speculates else 0
    if budget < block + 1:
        raise ScenarioError("engine.max_step_tokens", f"{budget} tokens cannot hold one request's anchor and "
                            f"draft block ({block + 1} tokens)")
    kv_tokens, note = kv_capacity(scenario, profile, block)
    dp = scenario.engine.dp_attention
    per_rank = (dp.max_step_tokens or budget // dp.ranks) if dp is not None else budget
    if per_rank < block + 1:
        raise ScenarioError("engine.dp_attention.max_step_tokens", f"{per_rank} tokens per attention rank cannot "
                            f"hold one request's anchor and draft block ({block + 1} tokens)")
    engine = dataclasses.replace(scenario.engine, max_step_tokens=budget, kv_capacity_tokens=kv_tokens,
                                 max_batch_requests=request_slots(scenario, profile, kv_tokens, block))
    said = [*engine_notes(scenario, profile), *([note] if note is not None else [])]
    notes = (*scenario.notes, *(line for line in said if line not in scenario.notes))
    return dataclasses.replace(scenario, engine=engine, notes=notes)


def request_slots(scenario: Scenario, profile: StepProfile, kv_tokens: int, block: int) -> int:
    """engine.max_batch_requests resolved: the number given, or for `auto` the serving engine's own slots (per
    rank, times the DP ranks)."""
    engine = scenario.engine
    if engine.max_batch_requests != "auto":
        return engine.max_batch_requests
    traits = scenario_engine(scenario, profile)
    dp = engine.dp_attention
    ranks = 1 if dp is None else dp.ranks
    backend = "none" if engine.all_to_all is None else engine.all_to_all.backend
    pool = engine_kv_pool(engine, traits, profile, block) or kv_tokens
    facts = cap_facts(profile, ranks, 1 + block, backend, pool // ranks, {})
    if traits.caps is None:
        whose = (f"no serving engine is known for profile {profile.name} (set engine.name)" if traits.name == "none"
                 else f"{traits.label} has no caps in the traits table (vllm and sglang have)")
        raise ScenarioError("engine.max_batch_requests", f"auto: {whose}; or give the requests one replica runs")
    slots = None if facts is None else traits.caps.request_slots(facts)
    if slots is None:
        raise ScenarioError("engine.max_batch_requests", f"auto: profile {profile.name} does not name its model "
                            "and GPUs, which the engine's default reads; give the requests one replica runs")
    return slots * ranks


def check_serving_engine(scenario: Scenario, profile: StepProfile) -> None:
    """`engine.name` and `engine.version` name a row: `auto` resolved from the profile first, then the version
    (a ScenarioError at engine.version where one is given)."""
    if scenario.engine.version is None:
        scenario_engine(scenario, profile)
        return
    try:
        serving_engine(scenario.engine.name, scenario.engine.version, profile)
    except SpecplanError as exc:
        raise ScenarioError("engine.version", str(exc)) from None


def scenario_engine(scenario: Scenario, profile: StepProfile) -> EngineTraits:
    """The serving engine's row for the scenario's `engine.name` / `engine.version` (a ScenarioError names it)."""
    try:
        return serving_engine(scenario.engine.name, scenario.engine.version, profile)
    except SpecplanError as exc:
        raise ScenarioError("engine.name", str(exc)) from None


def kv_capacity(scenario: Scenario, profile: StepProfile, block: int) -> tuple[int, str | None]:
    """engine.kv_capacity_tokens resolved, with a note for the user where there is one: the profile's memory model
    at the engine's memory fraction where the scenario is silent (required where the profile states none); a
    given figure is kept, noted where it is more than the engine's pool and refused only where no GPU memory could
    hold it (more than every GPU's whole memory less its weights)."""
    engine = scenario.engine
    stated = profile_kv_capacity(profile)
    if stated is None:
        if engine.kv_capacity_tokens is None:
            raise ScenarioError("engine.kv_capacity_tokens", f"required: profile {profile.name} states no memory "
                                "model (no kv_capacity_tokens line in its header); give the KV tokens one "
                                "replica holds")
        return engine.kv_capacity_tokens, None
    pool = kv_pool(engine, scenario_engine(scenario, profile), profile, block)
    assert pool is not None  # a profile that states a pool has a memory model
    if engine.kv_capacity_tokens is None:
        return pool.tokens, pool.note
    model = memory_model(profile)
    most = None if model is None else model.most_tokens
    given = engine.kv_capacity_tokens
    if most is not None and given > most:
        raise ScenarioError("engine.kv_capacity_tokens", f"{given:,} KV tokens is more than profile "
                            f"{profile.name}'s GPUs can hold at all ({most:,} tokens per replica: every GPU's "
                            "whole memory less its weights, by its memory model); set it to at most "
                            f"{most:,}")
    if given > pool.tokens:
        at = "" if pool.fraction is None else f" at the engine's memory fraction {pool.fraction:.3f}"
        return given, (f"engine.kv_capacity_tokens {given:,} is more than the pool profile {profile.name}'s "
                       f"memory model gives{at} ({pool.tokens:,} tokens per replica); the run uses {given:,}")
    return given, None


def profile_kv_capacity(profile: StepProfile) -> int | None:
    """The KV tokens the profile's memory model states (its `kv_capacity_tokens` line), None without one."""
    model = memory_model(profile)
    return None if model is None else model.tokens


SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml's parser where PyYAML has it: 10x faster


def read_yaml(path: Path) -> Any:
    """Parse a YAML file, turning every failure into a one-line SpecplanError."""
    try:
        text = path.read_text()
    except OSError as exc:
        raise SpecplanError(f"{path}: cannot read ({exc.__class__.__name__}: {exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise SpecplanError(f"{path}: cannot read (not UTF-8 text)") from None
    if not text.strip():
        raise SpecplanError(f"{path}: the file is empty")
    try:
        return _parse_unique(text, path)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecplanError(f"{path}:{where}: not valid YAML ({problem})") from None


def _parse_unique(text: str, path: Path) -> Any:
    """The document of `text`, refused when a mapping at any depth repeats a key (YAML would keep the last)."""
    loader = SAFE_LOADER(text)
    try:
        node = loader.get_single_node()
        if node is None:
            return None
        _refuse_duplicate_keys(node, path)
        return loader.construct_document(node)
    finally:
        loader.dispose()


def _refuse_duplicate_keys(root: yaml.Node, path: Path) -> None:
    """Walk the node tree (aliases once); the first mapping key seen twice is one line naming both lines."""
    stack: list[tuple[yaml.Node, str]] = [(root, "")]
    seen_nodes: set[int] = set()
    while stack:
        node, where = stack.pop()
        if id(node) in seen_nodes:
            continue
        seen_nodes.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend(reversed([(item, f"{where}[{i}]") for i, item in enumerate(node.value)]))
        elif isinstance(node, yaml.MappingNode):
            stack.extend(reversed(_mapping_children(node, where, path)))


def _mapping_children(node: yaml.MappingNode, where: str, path: Path) -> list[tuple[yaml.Node, str]]:
    first_line: dict[tuple[str, str], int] = {}
    children = []
    for key_node, value_node in node.value:
        name = str(key_node.value) if isinstance(key_node, yaml.ScalarNode) else "?"
        dotted = f"{where}.{name}" if where else name
        identity = (key_node.tag, name)
        line = key_node.start_mark.line + 1
        if isinstance(key_node, yaml.ScalarNode) and identity in first_line:
            raise SpecplanError(f"{path}: duplicate key '{dotted}' (lines {first_line[identity]} and {line}): YAML "
                                "keeps only the last, replacing the first whole; keep one")
        first_line[identity] = line
        children.append((value_node, dotted))
    return children


def apply_overrides(raw: dict, overrides: tuple[str, ...] | list[str]) -> dict:
    """Apply `dotted.key=value` overrides (values parsed as YAML) and `@FILE` merges to a copy of `raw`."""
    out = copy.deepcopy(raw)
    for item in overrides:
        if item.startswith("@"):
            out = merge_file(out, Path(item[1:]))
            continue
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise SpecplanError(f"--set {item!r}: expected dotted.key=value")
        refuse_index(key.strip())
        try:
            value = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            raise SpecplanError(f"--set {key}: value {text!r} is not valid YAML") from None
        set_dotted(out, key.strip().split("."), value, key)
    return out


def refuse_index(key: str) -> None:
    """`sweep.variants[0].policy.name` cannot be set: a list is set whole (its items have no dotted path)."""
    match = re.search(r"^(.*?)\[(\d*)\]", key)
    if match:
        listed = match.group(1)
        raise SpecplanError(f"--set {key}: --set cannot index into a list ({listed}[{match.group(2)}]); set the "
                            f"whole list (--set '{listed}=[{{label: A, policy: {{name: static}}}}, ...]'), or put the "
                            "changed list in a YAML fragment passed with --merge FILE (a list is replaced whole)")


def merge_file(raw: dict, path: Path) -> dict:
    """`raw` with the YAML mapping of `path` deep-merged over it (`--merge FILE`)."""
    fragment = read_yaml(path)
    if not isinstance(fragment, dict):
        raise SpecplanError(f"--merge {path}: expected a YAML mapping of scenario keys, got {_yaml_kind(fragment)}")
    return deep_merge(raw, fragment)


def set_dotted(raw: dict, parts: list[str], value: Any, key: str) -> None:
    """Set one value; setting one alternative of a block (horizon.requests) drops the other (duration_s), as a
    merge does (specplan.simulator.scenario.merge.excluded_by)."""
    node = raw
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise SpecplanError(f"--set {key}: '{part}' is not a mapping in the scenario")
        node = child
    if value is not None:
        for other in excluded_by({parts[-1]: value}, tuple(parts[:-1])):
            node.pop(other, None)
    node[parts[-1]] = value


def load_scenario(path: str | Path, overrides: tuple[str, ...] | list[str] = (), seed: int | None = None) -> Scenario:
    """Read, override and validate a scenario file; errors name the file and key path."""
    path = Path(path)
    raw = read_yaml(path)
    if not isinstance(raw, dict):
        raise SpecplanError(f"{path}: a scenario must be a YAML mapping, got {_yaml_kind(raw)}")
    raw = apply_overrides(raw, overrides)
    if seed is not None:
        raw["seed"] = seed
    try:
        return scenario_from_mapping(raw, path.resolve().parent, source=str(path))
    except ScenarioError as exc:
        raise SpecplanError(f"{path}: {exc}") from None


def _yaml_kind(raw: Any) -> str:
    return {list: "a list", str: "a string", type(None): "nothing"}.get(type(raw), type(raw).__name__)


def resolved_mapping(scenario: Scenario) -> dict:
    """The scenario with every default filled in and paths absolute, as plain data."""
    plain = to_plain(scenario)
    plain.pop("source", None)
    plain.pop("notes", None)
    return plain


def write_resolved(scenario: Scenario, path: Path) -> None:
    path.write_text(yaml.safe_dump(resolved_mapping(scenario), sort_keys=False))
