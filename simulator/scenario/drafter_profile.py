"""A drafter profile prices drafting on the target's deployment: the same model, GPU type and topology.

    check_drafter_profile(scenario)           refuses a mismatch (ScenarioError at drafter.latency.path)
    drafter_profile_warning(scenario) -> str  the mismatch a scenario accepted with `match_target: false`
    check_search_drafters(raw, scenario, dir) each search candidate's drafter against its own hardware

Place in the data flow: the loader (`load.py`) calls these once the
scenario is built, so `check`, `run` and every study refuse a B200 target
drafted at H200 speed before anything runs. The facts come from both
profiles' headers (`specplan.hwprofiles.deployment`); only what both state
is compared. A user who means to price drafting elsewhere (a drafter
measured on another GPU as a stand-in) sets `drafter.latency.match_target:
false`, and `run` and `check` print the difference as a warning.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.deployment import deployment_of, differences
from specplan.hwprofiles.fileformat import builtin_names
from specplan.hwprofiles.profile import StepProfile
from specplan.simulator.core.errors import ScenarioError, SpecplanError
from specplan.simulator.drafters.spec import ProfileLatency
from specplan.simulator.scenario.search import search_points

WHERE = "drafter.latency.path"


def mismatch(target_spec: Any, drafter_path: str) -> tuple[StepProfile, StepProfile, list[str]] | None:
    """(target profile, drafter profile, differences) when both load and their headers disagree; else None."""
    try:
        target, drafter = load_profile(target_spec), load_profile(drafter_path)
    except SpecplanError:  # a profile that does not load is refused where it is named
        return None
    found = differences(deployment_of(target), deployment_of(drafter))
    return (target, drafter, found) if found else None


def own_drafters(target: StepProfile) -> list[str]:
    """The built-in drafter profiles of a built-in target (`NAME-mtp`, `NAME-dspark`, `NAME-drafter-2l`)."""
    names = [name for name in builtin_names() if name.startswith(f"{target.name}-")]
    return [f"builtin:{name}" for name in names if is_drafter(load_profile(f"builtin:{name}"))]


def is_drafter(profile: StepProfile) -> bool:
    return str(profile.provenance.get("what", "")).startswith("drafter")


def remedy(target: StepProfile) -> str:
    """What to give instead: the target's own drafter profiles, one measured with it, or `kind: layers`."""
    own = own_drafters(target)
    first = (" or ".join(own) if own else
             "a drafter profile measured with the target (specplan profile --drafter-layers N)")
    return f"{first}, or kind: layers (drafting derived from the target's profile)"


def described(target: StepProfile, drafter: StepProfile, found: list[str]) -> str:
    return (f"drafter profile {drafter.name} was measured on another deployment than the target's "
            f"{target.name} ({'; '.join(found)})")


def check_drafter_profile(scenario: Any) -> None:
    latency = scenario.drafter.latency
    if not scenario.drafter.speculates or not isinstance(latency, ProfileLatency) or not latency.match_target:
        return
    found = mismatch(scenario.hardware.profile, latency.path)
    if found is not None:
        target, drafter, diffs = found
        raise ScenarioError(WHERE, f"{described(target, drafter, diffs)}: drafting would be priced on the wrong "
                            f"deployment; use {remedy(target)}, or set drafter.latency.match_target: false to price it "
                            "there anyway")


def drafter_profile_warning(scenario: Any) -> str | None:
    """The line `run` and `check` print for a mismatch the scenario accepted (match_target: false)."""
    latency = scenario.drafter.latency
    if not scenario.drafter.speculates or not isinstance(latency, ProfileLatency) or latency.match_target:
        return None
    found = mismatch(scenario.hardware.profile, latency.path)
    if found is None:
        return None
    return f"{WHERE}: {described(*found)}; drafting is priced there, as match_target: false asks"


def check_search_drafters(raw: dict[str, Any], scenario: Any, base_dir: Path) -> None:
    """Every search candidate drafts on its own hardware option, or the option's drafter_latency key is named."""
    options = list(scenario.search.hardware)
    checked: set[tuple[int, str, str]] = set()
    for point in search_points(raw, scenario.search, base_dir):
        drafter = point.mapping(1).get("drafter", {})
        latency = drafter.get("latency", {})
        family = str(drafter.get("family", "none"))
        if family == "none" or not isinstance(latency, dict) or latency.get("kind") != "profile":
            continue
        if latency.get("match_target") is False:
            continue
        i = options.index(point.hardware)
        path = resolved(str(latency.get("path", "")), base_dir)
        if (i, family, path) in checked:
            continue
        checked.add((i, family, path))
        found = mismatch(point.hardware.profile, path)
        if found is not None:
            raise ScenarioError(f"search.hardware[{i}].drafter_latency.{family}",
                                f"candidate '{point.label}': {described(*found)}, and no drafter of its own was "
                                f"given; set this key to {remedy(found[0])}")


def resolved(path: str, base_dir: Path) -> str:
    if path.startswith("builtin:") or Path(path).is_absolute():
        return path
    return str((base_dir / path).resolve())
