"""A calibration file: the non-kernel terms fitted on a deployment's own runs, with provenance, and how a scenario
takes them.

Place in the data flow: `specplan fit` (specplan.simulator.study.fit) writes one; `run`, `sweep`, `plan` and
`tune` read it with `--calibration FILE`, check that it was fitted for the deployment at hand
(`check_deployment`) and turn it into scenario overrides (`calibration_overrides`) applied after the command
line's own `--set`: applying a calibration is setting scenario values, not another engine path.

The file (YAML, `format: specplan-calibration/1`):

    format: specplan-calibration/1
    deployment: {engine: sglang, engine_version: 0.5.14, gpu: B200, model: DeepSeek-V4-Flash, layout: dp-attention}
    terms:
      host_cycle_ms:       {value: 0.5, interval: [0.4, 0.6], source: "fitted on 3 runs: ..."}
      verify_scale:        {value: 1.1, interval: [1.05, 1.15], source: "..."}
      dp_sync_ms:          {value: 0.0, interval: null, source: "shipped value: not constrained by the runs"}
      eager_surcharge_ms:  {value: null, ...}
      extend_op_us:        {value: 16.9, interval: [10.0, 28.5], source: "..."}
      ttft_per_request_ms: {value: 12.0, ...}
    runs: [...]            # what it was fitted on (informative)
    fit: {...}             # its errors (informative)

Each term onto the scenario (`TERM_KEYS`):

    host_cycle_ms        engine.host_overhead_ms (every step, nothing overlaps it): set to the value
    dp_sync_ms           added to engine.host_overhead_ms where the layout is dp-attention (the engine
                         has no separate DP-sync key; one layout's runs cannot tell the two apart)
    verify_scale         the target's step times x value: hardware.profile and engine.prefill.profile
                         become copies of their profiles scaled so (as `specplan replicate --calibrate`
                         does), written once to the calibration cache (SPECPLAN_CACHE_DIR, else
                         $XDG_CACHE_HOME/specplan, else ~/.cache/specplan) and named by a digest
    eager_surcharge_ms   engine.cuda_graph.eager_overhead_ms (set only where the file gives a value)
    extend_op_us         engine.cuda_graph.extend_op_us: the host's cost per kernel of a step carrying prompt
                         tokens, set only where the scenario's engine prices such a step by its kernel launches
                         (a DeepSeek-V4 engine row; the caller's `launch_priced` says so); elsewhere not applied,
                         and said so in the printout
    ttft_per_request_ms  no engine key prices it: reported, never applied (said in the printout)

A value of null keeps the scenario's own setting. A file fitted for another engine, engine version, GPU or model
(or layout) is refused in one line unless `--calibration-transfer` names each fact that may differ
(`TRANSFERABLE`: engine_version, gpu, model, layout); the rule for a carried file is that every term is applied
unchanged and the printout names each fact carried across (its transfer error is unknown until checked).
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from specplan.errors import SpecplanError
from specplan.hwprofiles import load_profile
from specplan.hwprofiles.facts import device_facts, model_facts, provenance_of, serving_engine
from specplan.hwprofiles.fileformat import write_profile_csv
from specplan.simulator.scenario.spec import ChunkedPrefill, Scenario

FORMAT = "specplan-calibration/1"
TERMS = ("host_cycle_ms", "verify_scale", "dp_sync_ms", "eager_surcharge_ms", "extend_op_us", "ttft_per_request_ms")
TERM_KEYS = {"host_cycle_ms": "engine.host_overhead_ms", "verify_scale": "hardware.profile (scaled copy)",
             "dp_sync_ms": "engine.host_overhead_ms (added, dp-attention)",
             "eager_surcharge_ms": "engine.cuda_graph.eager_overhead_ms",
             "extend_op_us": "engine.cuda_graph.extend_op_us: this engine prices no step by its kernel launches",
             "ttft_per_request_ms": "no engine key prices it"}
FACTS = ("engine", "engine_version", "gpu", "model", "layout")
TRANSFERABLE = ("engine_version", "gpu", "model", "layout")
SHIPPED = "shipped value: not constrained by the runs"
LaunchPriced = Callable[[Scenario], bool]   # the engine prices a scenario's steps by their kernel launches


class CalibrationError(SpecplanError):
    """A calibration file that cannot be read, or one fitted for another deployment."""


@dataclass(frozen=True)
class Term:
    """One fitted term: its value (None: the scenario's own), its interval and where it came from."""

    value: float | None
    interval: tuple[float, float] | None = None
    source: str = SHIPPED

    def as_dict(self) -> dict[str, Any]:
        return {"value": self.value, "interval": None if self.interval is None else list(self.interval),
                "source": self.source}


@dataclass(frozen=True)
class Deployment:
    """What a calibration was fitted for: engine, its version, GPU, model and the layout of attention."""

    engine: str
    engine_version: str
    gpu: str
    model: str
    layout: str   # "tp" or "dp-attention"

    def as_dict(self) -> dict[str, str]:
        return {f: getattr(self, f) for f in FACTS}

    def describe(self) -> str:
        return f"{self.engine} {self.engine_version}, {self.gpu}, {self.model}, {self.layout}"


@dataclass(frozen=True)
class Calibration:
    """A calibration file's content (`read_calibration`, `write_calibration`)."""

    deployment: Deployment
    terms: dict[str, Term]
    runs: list[dict[str, Any]] = field(default_factory=list)
    fit: dict[str, Any] = field(default_factory=dict)
    path: str = ""

    def term(self, name: str) -> Term:
        return self.terms.get(name, Term(None))

    def label(self) -> str:
        """'calibrated on 3 runs of sglang 0.5.14, B200, ... (FILE)'."""
        runs = f"{len(self.runs)} run{'s' if len(self.runs) != 1 else ''}" if self.runs else "its runs"
        return f"calibrated on {runs} of {self.deployment.describe()} ({self.path})"


@dataclass(frozen=True)
class Applied:
    """A calibration as one scenario takes it: the overrides, the facts carried across, what is not applied."""

    calibration: Calibration
    overrides: list[str]
    transferred: dict[str, tuple[str, str]]   # fact -> (fitted for, used on)
    not_applied: list[str]

    def lines(self) -> list[str]:
        """The printout: which file, what it sets, what it carries across and what it leaves out."""
        out = [f"calibration: {self.calibration.label()}", *self.applied_lines()]
        if self.transferred:
            moved = "; ".join(f"{k} {a} -> {b}" for k, (a, b) in self.transferred.items())
            out.append(f"  transferred (--calibration-transfer; terms carried unchanged, error not checked): {moved}")
        return out + self.not_applied_lines()

    def applied_lines(self) -> list[str]:
        """The terms it sets, in one line (none where it sets none)."""
        cal = self.calibration
        shown = ", ".join(f"{name} {fmt(cal.term(name).value)}" for name in TERMS
                          if cal.term(name).value is not None and name not in self.not_applied)
        return [f"  applied: {shown}"] if shown else []

    def not_applied_lines(self) -> list[str]:
        """A line per term it holds that no scenario key here prices."""
        cal = self.calibration
        return [f"  not applied: {name} {fmt(cal.term(name).value)} ({TERM_KEYS[name]})" for name in self.not_applied]

    def summary_keys(self) -> dict[str, Any]:
        cal = self.calibration
        transfer = ", ".join(f"{k} {a} -> {b}" for k, (a, b) in self.transferred.items())
        return {"calibration": cal.path, "calibration_deployment": cal.deployment.describe(),
                "calibration_transfer": transfer or "none"}


def fmt(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def replace_path(calibration: Calibration, path: str) -> Calibration:
    """The calibration as read from / written to `path` (its label names the file)."""
    return replace(calibration, path=path)


def read_yaml_of_format(path: Path, what: str, fmt: str, wrong: str) -> dict:
    """The YAML mapping at `path` whose `format:` is `fmt`; else one line naming `what` (the file's role) and,
    for another format, `wrong`."""
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise CalibrationError(f"{what}: cannot read it ({exc.strerror})") from None
    except yaml.YAMLError:
        raise CalibrationError(f"{what}: not valid YAML") from None
    if not isinstance(raw, dict) or raw.get("format") != fmt:
        raise CalibrationError(f"{what}: {wrong}")
    return raw


def read_calibration(path: str | Path) -> Calibration:
    """The file at `path`, checked: its format, deployment facts and terms (one-line CalibrationError)."""
    path = Path(path)
    raw = read_yaml_of_format(path, f"--calibration {path}", FORMAT,
                              f"not a calibration file (expected format: {FORMAT})")
    facts = raw.get("deployment")
    if not isinstance(facts, dict) or any(not isinstance(facts.get(f), str) for f in FACTS):
        raise CalibrationError(f"--calibration {path}: deployment must give {', '.join(FACTS)} as strings")
    terms = raw.get("terms")
    if not isinstance(terms, dict):
        raise CalibrationError(f"--calibration {path}: terms must be a mapping of {', '.join(TERMS)}")
    return Calibration(Deployment(*(str(facts[f]) for f in FACTS)),
                       {name: read_term(path, name, body) for name, body in terms.items()},
                       list(raw.get("runs") or []), dict(raw.get("fit") or {}), str(path))


def read_term(path: Path, name: str, body: Any) -> Term:
    if name not in TERMS:
        raise CalibrationError(f"--calibration {path}: terms.{name}: unknown term (valid: {', '.join(TERMS)})")
    if not isinstance(body, dict) or "value" not in body:
        raise CalibrationError(f"--calibration {path}: terms.{name}: expected {{value, interval, source}}")
    value, interval = body["value"], body.get("interval")
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0):
        raise CalibrationError(f"--calibration {path}: terms.{name}.value: expected a number >= 0 or null")
    if name == "verify_scale" and value is not None and value <= 0:
        raise CalibrationError(f"--calibration {path}: terms.verify_scale.value: must be > 0")
    if interval is not None and (not isinstance(interval, list) or len(interval) != 2
                                 or not all(isinstance(v, (int, float)) for v in interval)):
        raise CalibrationError(f"--calibration {path}: terms.{name}.interval: expected [low, high] or null")
    return Term(None if value is None else float(value),
                None if interval is None else (float(interval[0]), float(interval[1])),
                str(body.get("source", SHIPPED)))


def write_calibration(calibration: Calibration, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    body = {"format": FORMAT, "deployment": calibration.deployment.as_dict(),
            "terms": {name: calibration.term(name).as_dict() for name in TERMS},
            "runs": calibration.runs, "fit": calibration.fit}
    path.write_text(yaml.safe_dump(body, sort_keys=False, width=120))
    return path


def model_name(model: str) -> str:
    """'deepseek-ai/DeepSeek-V4-Flash-0731 (revision ...), FP4' → 'DeepSeek-V4-Flash': the checkpoint's name
    without its organisation, notes, revision and repackaging suffixes (the model a table row is fitted on)."""
    name = re.split(r"[\s,(]", model.split("/", 1)[-1], maxsplit=1)[0]
    return re.sub(r"(-(0731|DSpark|NVFP4|FP8|FP4))+$", "", name, flags=re.IGNORECASE)


def deployment_of(scenario: Scenario) -> Deployment:
    """The facts of the deployment a scenario runs: its engine row, the profile's GPU and model, its layout."""
    profile = load_profile(scenario.hardware.profile)
    traits = serving_engine(scenario.engine.name, scenario.engine.version, profile)
    device, model = device_facts(profile), model_facts(profile)
    provenance = provenance_of(profile)
    gpu = device.gpu if device else str(provenance.get("device", "unknown")).split(",")[0].strip() or "unknown"
    name = model.name if model else str(provenance.get("model", "unknown")).split(" (")[0].strip() or "unknown"
    dp = scenario.engine.dp_attention
    layout = "dp-attention" if dp is not None and dp.ranks > 1 else "tp"
    return Deployment(traits.name, traits.version, gpu, name, layout)


def parse_transfer(text: str | None) -> tuple[str, ...]:
    """`--calibration-transfer gpu,engine_version`: the facts a file may differ in (checked names)."""
    if not text:
        return ()
    names = tuple(part.strip().replace("-", "_") for part in text.split(",") if part.strip())
    names = tuple("engine_version" if n == "version" else n for n in names)
    bad = [n for n in names if n not in TRANSFERABLE]
    if bad:
        raise CalibrationError(f"--calibration-transfer {text}: cannot carry {', '.join(bad)} (valid: "
                               f"{', '.join(TRANSFERABLE)}; a file of another engine never transfers)")
    return names


def check_deployment(calibration: Calibration, here: Deployment, transfer: tuple[str, ...]) -> dict[str, tuple[str, str]]:
    """The facts carried across (fitted for -> used on); a difference `transfer` does not allow is refused."""
    fitted = calibration.deployment
    differ = {f: (getattr(fitted, f), getattr(here, f)) for f in FACTS if getattr(fitted, f) != getattr(here, f)}
    refused = {f: v for f, v in differ.items() if f not in transfer}
    if refused:
        what = "; ".join(f"{f} {a} (this scenario: {b})" for f, (a, b) in refused.items())
        allow = [f for f in refused if f in TRANSFERABLE]
        hint = f" (--calibration-transfer {','.join(allow)} carries it)" if len(allow) == len(refused) else ""
        raise CalibrationError(f"--calibration {calibration.path}: fitted for {what}{hint}")
    return differ


def apply_calibration(calibration: Calibration, scenario: Scenario, transfer: tuple[str, ...] = (),
                      launch_priced: LaunchPriced | None = None) -> Applied:
    """The overrides that put `calibration` on `scenario` (loaded without it), after checking its deployment;
    `launch_priced` says whether the scenario's engine prices a step by its kernel launches (the engine layer's
    `prices_extend_by_launches`; asked only where the extend term has a value; None: it does not)."""
    transferred = check_deployment(calibration, deployment_of(scenario), transfer)
    overrides, not_applied = [], []
    host = calibration.term("host_cycle_ms").value
    sync = calibration.term("dp_sync_ms").value
    dp = scenario.engine.dp_attention is not None and scenario.engine.dp_attention.ranks > 1
    if host is not None or (sync and dp):
        base = scenario.engine.host_overhead_ms if host is None else host
        added = (sync or 0.0) if dp else 0.0
        overrides.append(f"engine.host_overhead_ms={base + added!r}")
    if sync and not dp:
        not_applied.append("dp_sync_ms")
    scale = calibration.term("verify_scale").value
    if scale is not None and scale != 1.0:
        overrides += scaled_profile_overrides(scenario, scale)
    eager = calibration.term("eager_surcharge_ms").value
    if eager is not None:
        overrides.append(f"engine.cuda_graph.eager_overhead_ms={eager!r}")
    extend = calibration.term("extend_op_us").value
    if extend is not None and launch_priced is not None and launch_priced(scenario):
        overrides.append(f"engine.cuda_graph.extend_op_us={extend!r}")
    elif extend is not None:
        not_applied.append("extend_op_us")
    if calibration.term("ttft_per_request_ms").value is not None:
        not_applied.append("ttft_per_request_ms")
    return Applied(calibration, overrides, transferred, not_applied)


def scaled_profile_overrides(scenario: Scenario, scale: float, folder: Path | None = None) -> list[str]:
    """hardware.profile (and a separate prefill batch's profile: the target's prefill steps, the same level) as
    copies with every step time x scale, written under `folder` (default: the calibration cache). The one place a
    verify scale becomes profiles: a calibration file's, `specplan fit`'s trial points and `replicate
    --calibrate`'s grid all call it."""
    out = [f"hardware.profile={scaled_profile(scenario.hardware.profile, scale, folder)}"]
    prefill = scenario.engine.prefill
    if isinstance(prefill, ChunkedPrefill) and prefill.profile is not None:
        out.append(f"engine.prefill.profile={scaled_profile(prefill.profile, scale, folder)}")
    return out


def cache_dir() -> Path:
    """Where scaled profiles are written: SPECPLAN_CACHE_DIR, else $XDG_CACHE_HOME/specplan, else ~/.cache/specplan."""
    if os.environ.get("SPECPLAN_CACHE_DIR"):
        return Path(os.environ["SPECPLAN_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "specplan"


def scaled_profile(spec: Any, scale: float, folder: Path | None = None) -> Path:
    """The profile `spec` with every step time, part and column x scale, said so in its provenance; written once
    (aside, then renamed: other processes may read it) under `folder` (default: the calibration cache)."""
    profile = load_profile(spec)
    digest = hashlib.sha1(f"{spec}|{scale!r}|{profile.step_ms_table.tobytes().hex()[:64]}".encode()).hexdigest()[:12]
    path = ((folder or cache_dir() / "calibrated-profiles") / f"scaled-x{scale:g}-{digest}.csv").resolve()
    if not path.exists():
        provenance = {"device": "unknown", "model": "unknown", **profile.provenance,
                      "calibration": f"step times x {scale:g} of {profile.name}"}
        extra = {"columns": {k: v * scale for k, v in profile.extra.get("columns", {}).items()},
                 "parts": {k: v * scale for k, v in profile.extra.get("parts", {}).items()}}
        aside = path.with_name(f"{path.stem}.{os.getpid()}.csv")
        write_profile_csv(replace(profile, step_ms_table=profile.step_ms_table * scale, provenance=provenance,
                                  extra={k: v for k, v in extra.items() if v}), aside)
        os.replace(aside, path)
    return path
