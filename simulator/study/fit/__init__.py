"""`specplan fit`: a deployment's own benchmark runs and logs in, a calibration file and its report out.

    runs.py      MeasuredRun: one benchmark run's setting (client, concurrency, lengths) and published figures
    readers.py   the files: sglang.bench_serving JSONL, vllm bench serve JSON, aiperf and genai-perf exports,
                 SGLang server logs (vLLM metrics scrapes: specplan.simulator.drafters.vllm_metrics)
    writers.py   the simulator's bench client written back in bench_serving's and vllm bench serve's formats
    fitting.py   the terms fitted by simulating each run (a bracketing search), intervals, leave-one-run-out
    report.py    the calibration file and the report (fit_runs.csv, fit.md)
"""
