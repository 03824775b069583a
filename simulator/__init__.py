"""specplan's simulator, in layers that data flows through one way (CONTRIBUTING.md).

    core/       errors, the schema builder, named random streams, domains, small utilities
    drafters/   acceptance models, confidence heads, drafting latency
    scenario/   the scenario contract: YAML → validated, frozen dataclasses
    engine/     the decode core over its state and rules, replicas, the cluster, records, the summary
    study/      four products over a shared base, each entry point (source, what, options) writing its
                own files in options.out_dir:
        sweep/        run_sweep(source, sweep block, options): points → Pareto frontiers → SLA comparisons
        plan/         plan_capacity / plan_search(source, target, options, plan_options): the fewest replicas or GPUs
                      at an SLA (probes, the replica search, the deployment search, the plan's files)
        tune/         tune_schedule(source, TuneAsk, options): a per-batch-size length schedule and its
                      engine exports
        replication/  replicate(source, ReplicationAsk, options): published figures predicted,
                      calibrated and transferred (cross-validated), and the calibration table
      and the base they share: options.py (RunOptions; a plan's own PlanOptions), points.py (a sweep's points and their store),
      backends.py (processes or Ray), interrupts.py, inputs.py, shadows.py (overrides a study replaces),
      split.py (a fleet as independent replicas), frontier.py, keepup.py, launch.py

Below it sit `engines/` and the leaf packages `hwprofiles/`, `traces/` and
`policies/`; above it `reports/`, `validation/` and the `specplan` command
(`specplan.cli`), which import the simulator and never the other way
round. `tests/test_layers.py` fails on an import against this order or on
a cycle. This file imports nothing, so that importing any layer never loads
the others.
"""
