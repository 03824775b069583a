"""The replication suite: published serving figures predicted, compared, calibrated and transferred.

    result = replicate(source, ask, options)      source: a case folder or a folder of them (benchmarks/published);
                                                  what: a `ReplicationAsk` (calibrate, its grids)

`published.py` reads a case (source.yaml, scenario.yaml, published.csv),
`length_rules.py` its length rule, `case_runner.py` runs its figures,
`calibrate.py` simulates the grid of host time and level, `transfer.py` fits
one set per engine version, layout and model and cross-validates it (leave one GPU,
one layout out), `table.py` writes the calibration table, `stats.py`
gives the errors, `version_spread.py` pairs stale and newest figures, and
`replicate.py` runs it all and writes replication.csv, version_spread.csv
and replication.json (the report and figure are the reports layer's).
"""

from specplan.simulator.study.replication.replicate import Replication, ReplicationAsk, replicate

__all__ = ["Replication", "ReplicationAsk", "replicate"]
