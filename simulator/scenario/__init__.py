"""The scenario layer: YAML → validated, frozen dataclasses, the one input of every run.

    from simulator.scenario import load_scenario, Scenario
"""

from simulator.scenario.load import (
    apply_overrides,
    load_scenario,
    read_yaml,
    resolved_mapping,
    scenario_from_mapping,
    write_resolved,
)
from simulator.scenario.spec import (
    ChunkedPrefill,
    Cluster,
    DisaggregatedPrefill,
    Engine,
    Hardware,
    Horizon,
    PolicySpec,
    Scenario,
)

__all__ = [
    "ChunkedPrefill", "Cluster", "DisaggregatedPrefill", "Engine", "Hardware", "Horizon", "PolicySpec",
    "Scenario", "apply_overrides", "load_scenario", "read_yaml", "resolved_mapping",
    "scenario_from_mapping", "write_resolved",
]
