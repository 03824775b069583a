"""The scenario layer: YAML → validated, frozen dataclasses, the one input of every run.

    from specplan.simulator.scenario import load_scenario, Scenario
"""

from specplan.simulator.scenario.load import (
    apply_overrides,
    load_scenario,
    read_yaml,
    resolved_mapping,
    scenario_from_mapping,
    write_resolved,
)
from specplan.simulator.scenario.spec import (
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
