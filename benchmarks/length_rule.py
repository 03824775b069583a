"""Which length rule a random-dataset cell ran with, read from its own published figures (nothing fitted).

    python benchmarks/length_rule.py [CASES_DIR] [--model]

For every case whose source.yaml states a `length_rule` (benchmarks/published/
by default), its newest figures (published.csv) and its stale ones (spread.csv)
are tested against the two rules `sglang.bench_serving --dataset-name random`
can have run: uniform lengths (no --random-range-ratio: the default 0.0) and
fixed lengths (--random-range-ratio 1.0). Lengths are bench_serving's own
draws: numpy seeded with its --seed default (42), N prompt lengths on
1..input and then N output lengths on 1..output (`compute_random_lens`).

- **queue** (no model; at c >= 64): where more requests are sent than run (the running
  batch B = R x TPOT, R the output tokens per second), request k waits
  max(0, min(k, c) - B) x m / R before its first token, m the mean output
  length: 1,024 fixed, the mean of the draws uniform. Its median (mean, for
  a figure published as a mean) over the N requests is the TTFT each rule
  predicts; the rules differ by ~2x, so a queue-bound cell (the wait at
  least half of its requests see is over B/2 requests) decides: a rule is
  named when its prediction is within 1.25x of the published and the
  other's beyond 1.5x. (A mean at c = N/2 sits between the two: its wait
  is the least certain part of this arithmetic.)
- **c=1 throughput** (no model): at concurrency 1 the output rate is
  sum(out) / sum(TTFT + (out - 1) x TPOT); with the published TTFT and TPOT
  held constant, each rule's draws give a rate to set beside the published.
  The rules differ by 2-6% here: a weak check.
- **--model**: the TTFT the case's own scenario predicts at c = 1 for one
  prompt of the fixed length and of the median of the uniform draws, beside
  the published (the brief's discriminator; it decides only where the model's
  prefill is right to well within the 1.6x between the two lengths).

A figure's throughput is read per GPU (output, or total scaled by the
nominal output / (input + output)) times the case's GPUs.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

from specplan.simulator.study.replication.case_runner import availability
from specplan.simulator.study.replication.published import Case, Figure, read_case

REPO = Path(__file__).resolve().parents[1]

BENCH_SEED = 42  # sglang.bench_serving's --seed default
QUEUED = 64      # the concurrency from which a cell may queue (the low-latency points, c = 1 and 16, do not)
NEAR, FAR = 1.25, 1.5  # a rule is chosen when its prediction is within NEAR x and the other's beyond FAR x


def draws(n: int, input_tokens: int, output_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """bench_serving's uniform draws for n prompts (prompt lengths first, then outputs, one seeded stream)."""
    rng = np.random.RandomState(BENCH_SEED)
    prompts = rng.randint(1, input_tokens + 1, size=n)
    return prompts, rng.randint(1, output_tokens + 1, size=n)


def cells(case: Case, figures: list[Figure]) -> dict[tuple[int, int], dict[str, Figure]]:
    """The figures of each (concurrency, prompts), by quantity: ttft, tpot, rate."""
    out: dict[tuple[int, int], dict[str, Figure]] = {}
    for f in figures:
        quantity = "ttft" if "ttft" in f.metric else "tpot" if "tpot" in f.metric else \
            "rate" if f.metric.endswith("throughput_per_gpu") else None
        prompts = f.num_prompts or (case.source.get("workloads", {}).get(f.workload) or {}).get("num_prompts")
        if quantity and prompts:
            out.setdefault((f.concurrency, int(prompts)), {})[quantity] = f
    return out


def output_rate(case: Case, rate: Figure) -> float:
    """Output tokens per second of the whole deployment (a total scaled by the nominal output share)."""
    rule = case.source["length_rule"]
    share = rule["output_tokens"] / (rule["input_tokens"] + rule["output_tokens"])
    per_gpu = rate.value * (share if rate.metric.startswith("total") else 1.0)
    return per_gpu * int(case.source["gpus"]["count"])


def queue_ttft_s(c: int, n: int, batch: float, mean_out: float, rate: float, statistic: str) -> float:
    waits = np.maximum(0.0, np.minimum(np.arange(1, n + 1), c) - batch) * mean_out / rate
    return float(np.mean(waits) if statistic == "mean" else np.median(waits))


def verdict(published: float, uniform: float, fixed: float) -> str:
    """The rule whose prediction is within NEAR x of the published while the other's is beyond FAR x."""
    off = {name: abs(np.log(published / value)) for name, value in (("uniform", uniform), ("fixed", fixed))}
    near, far = sorted(off, key=off.__getitem__)
    return near if off[near] <= np.log(NEAR) and off[far] >= np.log(FAR) else "no decision"


def queue_line(case: Case, c: int, n: int, figs: dict[str, Figure]) -> str | None:
    rule = case.source["length_rule"]
    if not {"ttft", "tpot", "rate"} <= set(figs):
        return None
    rate = output_rate(case, figs["rate"])
    batch = rate * figs["tpot"].value / 1e3
    if np.median(np.minimum(np.arange(1, n + 1), c)) - batch < batch / 2:
        return None  # not queue-bound: the wait is not what its TTFT measures
    _, outputs = draws(n, rule["input_tokens"], rule["output_tokens"])
    statistic = figs["ttft"].statistic
    uniform = queue_ttft_s(c, n, batch, float(outputs.mean()), rate, statistic)
    fixed = queue_ttft_s(c, n, batch, float(rule["output_tokens"]), rate, statistic)
    published = figs["ttft"].value / 1e3
    return (f"queue  c={c:<5} N={n:<5} B={batch:6.1f}  {statistic} TTFT {published:8.1f} s   uniform {uniform:8.1f} s "
            f"({published / uniform - 1:+.0%})  fixed {fixed:8.1f} s ({published / fixed - 1:+.0%})  -> "
            f"{verdict(published, uniform, fixed)}")


def throughput_line(case: Case, n: int, figs: dict[str, Figure]) -> str | None:
    rule = case.source["length_rule"]
    if not {"ttft", "tpot", "rate"} <= set(figs):
        return None
    ttft, tpot = figs["ttft"].value / 1e3, figs["tpot"].value / 1e3
    _, outputs = draws(n, rule["input_tokens"], rule["output_tokens"])
    uniform = outputs.sum() / np.sum(ttft + (outputs - 1) * tpot)
    out = rule["output_tokens"]
    fixed = out / (ttft + (out - 1) * tpot)
    published = output_rate(case, figs["rate"])
    return (f"c=1 throughput {published:7.1f} tok/s   uniform {uniform:7.1f} ({published / uniform - 1:+.1%})  "
            f"fixed {fixed:7.1f} ({published / fixed - 1:+.1%})")


def model_line(case: Case, figs: dict[str, Figure], n: int) -> str:
    # the simulator: loaded only for --model (it is the slow part)
    from specplan.simulator.engine.cluster.simulation import simulate
    from specplan.simulator.scenario import load_scenario

    rule = case.source["length_rule"]
    median_prompt = int(np.median(draws(n, rule["input_tokens"], rule["output_tokens"])[0]))
    ttft = {}
    for label, prompt in (("fixed", rule["input_tokens"]), ("uniform median", median_prompt)):
        overrides = [f"workload.prompt_tokens={{kind: fixed, value: {prompt}}}",
                     f"workload.output_tokens={{kind: fixed, value: {rule['output_tokens']}}}",
                     "workload.arrivals.max_concurrency=1", "workload.arrivals.num_prompts=4",
                     "workload.arrivals.warmup_requests=1", "horizon={requests: 5}"]
        summary = simulate(load_scenario(case.folder / "scenario.yaml", overrides)).summary
        ttft[label] = float(summary["sglang_bench_serving.median_ttft_ms"])
    published = figs["ttft"].value
    return (f"model c=1 TTFT: published {published:.0f} ms; the scenario predicts {ttft['fixed']:.0f} ms at "
            f"{rule['input_tokens']} tokens (fixed), {ttft['uniform median']:.0f} ms at {median_prompt} "
            f"(the median of the uniform draws)")


def report(case: Case, model: bool) -> list[str]:
    lines = [f"{case.name}: stated {case.source['length_rule']['rule']}"]
    for label, figures in (("newest", case.figures), ("stale", case.spread)):
        for (c, n), figs in sorted(cells(case, figures).items()):
            line = throughput_line(case, n, figs) if c == 1 else queue_line(case, c, n, figs) if c >= QUEUED else None
            if line:
                lines.append(f"  {label:6} {line}")
            if model and c == 1 and label == "newest" and "ttft" in figs:
                reason = availability(case)
                lines.append(f"  {label:6} " + (f"model: not run ({reason.split(':')[0]})" if reason
                                                 else model_line(case, figs, n)))
    return lines


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("cases", nargs="?", default=str(REPO / "benchmarks" / "published"))
    parser.add_argument("--model", action="store_true", help="also the scenario's own c=1 TTFT at each length")
    args = parser.parse_args()
    folders = sorted(p for p in Path(args.cases).iterdir() if (p / "source.yaml").exists())
    for folder in folders:
        case = read_case(folder)
        if "length_rule" in case.source:
            print("\n".join(report(case, args.model)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
