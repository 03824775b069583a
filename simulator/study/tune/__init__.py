"""Per-batch-size length schedules: a static-length sweep → the best length per bucket → a verified schedule.

    tuned = tune_schedule(source, ask, options)    what: a `TuneAsk` (lengths, buckets, loads, SLA, seeds)

`schedule.py` searches, picks (with an interval: ties broken toward the
schedule's shape) and verifies; `export.py` writes the files engines read
(schedule.yaml, trtllm.yaml, vllm.json, schedule.json, tune.json), written
by `tune_schedule` itself when the options give a results folder.
"""

from specplan.simulator.study.tune.run import TuneAsk, tune_schedule
from specplan.simulator.study.tune.schedule import TunedSchedule

__all__ = ["TuneAsk", "TunedSchedule", "tune_schedule"]
