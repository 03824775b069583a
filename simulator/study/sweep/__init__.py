"""The sweep: a scenario's variants × a load axis × seeds → points → Pareto frontiers → SLA comparisons.

    result = run_sweep(source, sweep, options)     (source, what, options: what is a `sweep:` block, or None
                                                    for the scenario's own; options the shared RunOptions)

`run.py` runs and stores the points (resuming from the results folder) and
writes points.csv, frontier.csv and comparisons.csv; the frontier and the
comparisons are specplan.simulator.study.frontier's, shared with the plan
and the tune.
"""

from specplan.simulator.study.sweep.run import SweepResult, run_sweep

__all__ = ["SweepResult", "run_sweep"]
