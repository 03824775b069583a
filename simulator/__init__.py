"""specplan's simulator, in layers that data flows through one way (CONTRIBUTING.md).

    core/       errors, the schema builder, named random streams, domains, small utilities
    drafters/   acceptance models, confidence heads, drafting latency
    scenario/   the scenario contract: YAML → validated, frozen dataclasses
    engine/     the decode engine core, replicas, the cluster, records, the summary
    study/      sweeps, Pareto frontiers, capacity plans

Below it sit `hwprofiles/`, `traces/` and `policies/` (leaf packages);
above it `reports/`, `validation/` and the `specplan` command
(`specplan.cli`), which import the simulator and never the other way
round. `tests/test_layers.py` fails on an import against this order or on
a cycle. This file imports
nothing, so that importing any layer never loads the others.
"""
