"""Scenario YAML → a validated, frozen `Scenario` (the contract of DESIGN.md §3).

Entry points:

    load_scenario(path, overrides=(), seed=None) -> Scenario
    scenario_from_mapping(raw, base_dir, source="<mapping>") -> Scenario
    resolved_mapping(scenario) -> dict   (what is written next to every result)

Overrides are `dotted.key=value` strings whose value is parsed as YAML, so
`drafter.acceptance.domains={chat: 1.0}` sets a mapping. Relative paths
resolve against the scenario file's folder. Loading also resolves the
hardware profile and the policy name, so `specplan check` catches a missing
profile file or an unknown policy before anything runs.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

import yaml

from simulator.drafters.spec import DrafterSpec
from simulator.errors import ScenarioError, SpecplanError
from simulator.schema import Context, Tagged, build, num, to_plain
from simulator.sweep_spec import SlaSpec, SweepSpec
from traces.spec import WorkloadSpec, validate_domains


@dataclass(frozen=True)
class Horizon:
    """How long to simulate: seconds of arrivals/running, or a number of arrivals."""

    duration_s: float | None = num(None, gt=0)
    warmup_s: float = num(0.0, ge=0)
    requests: int | None = num(None, ge=1)

    def validate(self, path: str) -> None:
        if self.duration_s is None and self.requests is None:
            raise ScenarioError(path, "give 'duration_s' or 'requests'")
        if self.duration_s is not None and self.warmup_s >= self.duration_s:
            raise ScenarioError(
                f"{path}.warmup_s", f"must be shorter than duration_s ({self.duration_s:g}), got {self.warmup_s:g}"
            )


@dataclass(frozen=True)
class Hardware:
    profile: str | dict[str, Any]
    gpus_per_replica: int = num(1, ge=1)


@dataclass(frozen=True)
class Cluster:
    replicas: int = num(1, ge=1)
    router: Literal["round_robin", "least_loaded", "random"] = "round_robin"


@dataclass(frozen=True)
class DisaggregatedPrefill:
    """Prefill on separate workers: TTFT = queueing + prompt / tokens_per_s."""

    KIND: ClassVar[str] = "disaggregated"
    TAG: ClassVar[str] = "mode"
    tokens_per_s: float = num(gt=0)


@dataclass(frozen=True)
class ChunkedPrefill:
    """Prompt tokens share each decode step's token budget, at most chunk_tokens per step."""

    KIND: ClassVar[str] = "chunked"
    TAG: ClassVar[str] = "mode"
    chunk_tokens: int = num(ge=1)


Prefill = Annotated[DisaggregatedPrefill | ChunkedPrefill, Tagged("mode")]


@dataclass(frozen=True)
class Engine:
    max_batch_requests: int = num(ge=1)
    kv_capacity_tokens: int = num(ge=1)
    prefill: Prefill = DisaggregatedPrefill(tokens_per_s=1e12)
    scheduling_overhead_ms: float = num(0.0, ge=0)
    max_step_tokens: int | None = num(None, ge=1)
    # host work every step pays whatever the policy (nothing overlaps it): a + b·requests
    host_overhead_ms: float = num(0.0, ge=0)
    host_overhead_per_request_ms: float = num(0.0, ge=0)
    # KV context a step's profile lookup uses: Σ per-request KV (varlen attention kernels), or
    # per phase (decode, prompt chunks) requests × the phase's longest KV (attention padded to the
    # longest sequence within separate decode and prefill kernels); simulator.batch.attention_context
    attention: Literal["varlen", "padded"] = "varlen"


@dataclass(frozen=True)
class PolicySpec:
    name: str = "none"
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Scenario:
    """A whole what-if question: hardware, cluster, engine, drafter, policy, workload."""

    name: str
    seed: int = num(ge=0)
    horizon: Horizon = num()
    hardware: Hardware = num()
    engine: Engine = num()
    workload: WorkloadSpec = num()
    cluster: Cluster = field(default_factory=Cluster)
    drafter: DrafterSpec = field(default_factory=DrafterSpec)
    policy: PolicySpec = field(default_factory=PolicySpec)
    description: str = ""
    sweep: SweepSpec | None = None
    sla: SlaSpec | None = None
    source: str = field(default="<mapping>", compare=False)

    def validate(self, path: str) -> None:
        from policies.registry import validate_policy

        validate_policy(self.policy, self.drafter, "policy")
        validate_domains(self.workload, self.drafter.acceptance.domains, "workload")


def scenario_from_mapping(raw: Any, base_dir: Path, source: str = "<mapping>") -> Scenario:
    """Validate a mapping (already parsed YAML) into a Scenario."""
    if not isinstance(raw, dict):
        raise ScenarioError("", f"a scenario must be a YAML mapping, got {type(raw).__name__}")
    raw = {k: v for k, v in raw.items() if k != "source"}
    scenario = build(Scenario, raw, "", Context(base_dir))
    scenario = _with_source(scenario, source)
    scenario = _with_profile_path(scenario, base_dir)
    check_profile(scenario)
    return scenario


def _with_profile_path(scenario: Scenario, base_dir: Path) -> Scenario:
    """A relative CSV `hardware.profile` is relative to the scenario's folder (builtin:NAME is not a path)."""
    import dataclasses

    profile = scenario.hardware.profile
    if not isinstance(profile, str) or profile.startswith("builtin:") or Path(profile).is_absolute():
        return scenario
    hardware = dataclasses.replace(scenario.hardware, profile=str((base_dir / profile).resolve()))
    return dataclasses.replace(scenario, hardware=hardware)


def _with_source(scenario: Scenario, source: str) -> Scenario:
    import dataclasses

    return dataclasses.replace(scenario, source=source)


def check_profile(scenario: Scenario) -> None:
    from hwprofiles import load_profile

    try:
        load_profile(scenario.hardware.profile)
    except ScenarioError:
        raise
    except SpecplanError as exc:
        raise ScenarioError("hardware.profile", str(exc)) from None


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
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise SpecplanError(f"{path}:{where}: not valid YAML ({problem})") from None


def apply_overrides(raw: dict, overrides: tuple[str, ...] | list[str]) -> dict:
    """Apply `dotted.key=value` overrides (values parsed as YAML) to a copy of `raw`."""
    out = copy.deepcopy(raw)
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise SpecplanError(f"--set {item!r}: expected dotted.key=value")
        try:
            value = yaml.safe_load(text) if text.strip() else None
        except yaml.YAMLError:
            raise SpecplanError(f"--set {key}: value {text!r} is not valid YAML") from None
        set_dotted(out, key.strip().split("."), value, key)
    return out


def set_dotted(raw: dict, parts: list[str], value: Any, key: str) -> None:
    node = raw
    for part in parts[:-1]:
        child = node.setdefault(part, {})
        if not isinstance(child, dict):
            raise SpecplanError(f"--set {key}: '{part}' is not a mapping in the scenario")
        node = child
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
    return plain


def write_resolved(scenario: Scenario, path: Path) -> None:
    path.write_text(yaml.safe_dump(resolved_mapping(scenario), sort_keys=False))
