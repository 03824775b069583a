"""vLLM's speculative-decoding counters ↔ pooled acceptance: where a running engine meets the drafter layer.

Reading (a real server's `/metrics` → a scenario's `drafter.acceptance`):

    scrape = read_scrape(path, model=None)    one Prometheus text file → the counters of one model,
                                              summed over its engines (`SpecCounts`), each series kept
    window = counts_between(first, second)    the counters' difference between two scrapes, series by series
    total, windows = scrape_windows(scrapes)  first → last, and each window between consecutive scrapes
    fit = fit_acceptance(total, windows=windows, min_length=None)
                                              per-position p_k and pooled τ with their intervals
    drafter_yaml(fit, "chat")                 a `drafter:` block a scenario merges (`specplan check` loads it)

What is refused (one line): a series that appears twice in one file (two
scrapes appended, as `curl >>` makes them: the exposition format allows a
series once); a series that decreases between scrapes or vanishes (that
engine restarted, whatever the sums do); drafts of varying length (a tuned
per-batch-size schedule, a dynamic policy) without `min_length`, since
per-position counters cannot then tell a rejected draft from one never
verified: with the schedule's smallest length L stated, positions 1..L are
identified and only they are fitted. An engine is one label set apart from
`model_name` and `position` (`engine`, a pod's `instance`, ...).

Intervals: a request's drafts share its difficulty, so proposals are not
independent and a binomial interval is too narrow when requests differ.
With five or more windows (six or more scrapes across the traffic) every
rate and τ gets a ratio-estimator interval over the windows (Student t,
windows − 1 degrees of freedom), which carries the between-request spread;
with fewer the Wilson / normal intervals are given and named for what they
cover: proposal-level noise only.

Writing (a simulated run → the counters a vLLM server would show after it):

    exposition_text(model_name, drafts, draft_tokens, accepted_per_position)

Counters with vLLM's meaning (vllm/v1/spec_decode/metrics.py, SpecDecodingProm):
`vllm:spec_decode_num_drafts` counts request-steps that proposed drafts,
`..._num_draft_tokens` the drafts verified, `..._num_accepted_tokens` the
drafts accepted, `..._num_accepted_tokens_per_pos{position="k"}` (0-based)
the request-steps whose draft k + 1 was accepted; labels `model_name` and
`engine`. Exposed by prometheus_client as `<name>_total` counters (plus
`<name>_created`). The fit is pooled over proposals, as docs/model/drafters.md defines
it: p_k = per_pos[k] / per_pos[k − 1], per_pos[−1] = num_drafts, and
τ = 1 + accepted / drafts. Plain numbers in, text out: nothing here runs a
simulation.
"""

from __future__ import annotations

import itertools
import math
import re
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from prometheus_client import CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily
from prometheus_client.parser import text_string_to_metric_families

from specplan.simulator.core.domains import DOMAINS
from specplan.simulator.core.errors import SpecplanError

DRAFTS = "vllm:spec_decode_num_drafts"
DRAFT_TOKENS = "vllm:spec_decode_num_draft_tokens"
ACCEPTED = "vllm:spec_decode_num_accepted_tokens"
PER_POSITION = "vllm:spec_decode_num_accepted_tokens_per_pos"
COUNTERS = (DRAFTS, DRAFT_TOKENS, ACCEPTED, PER_POSITION)
HELP = {DRAFTS: "Number of spec decoding drafts.", DRAFT_TOKENS: "Number of draft tokens.",
        ACCEPTED: "Number of accepted tokens.", PER_POSITION: "Accepted tokens per draft position."}
INTERVAL = "Wilson score"
PROPOSAL_LEVEL = f"{INTERVAL} (proposals taken as independent)"
MIN_WINDOWS = 5  # windows (scrapes − 1) from which the interval is taken over windows
UNLABELLED = ""
ENGINE_LABELS_LEFT_OUT = ("model_name", "position")


@dataclass(frozen=True)
class SpecCounts:
    """vLLM's four counters for one model, summed over its engines (or over a window between scrapes).

    `accepted_per_position[k]` is draft position k + 1 (vLLM's `position="k"`).
    `scraped_at_s`: the newest sample timestamp (Unix seconds) when the
    exposition carries timestamps; `created_s`: the newest `_created` time
    of its counters (when an engine created them) when exposed. `window_s` is set for a
    difference of two scrapes with timestamps.
    """

    source: str
    model: str
    engines: tuple[str, ...]
    drafts: int
    draft_tokens: int
    accepted_tokens: int
    accepted_per_position: tuple[int, ...]
    scraped_at_s: float | None = None
    created_s: float | None = None
    window_s: float | None = None
    series: dict[tuple[str, int | None, str], int] = field(default_factory=dict, compare=False)

    @property
    def block_size(self) -> int:
        return len(self.accepted_per_position)

    @property
    def model_text(self) -> str:
        return self.model if self.model != UNLABELLED else "(no model_name label)"


# ---- reading ------------------------------------------------------------------------------------
def counter_name(sample_name: str) -> tuple[str, bool] | None:
    """(vLLM counter, is a `_created` sample) for a sample of one of the four counters, else None."""
    for suffix, created in (("_total", False), ("_created", True), ("", False)):
        if sample_name.endswith(suffix):
            base = sample_name[: len(sample_name) - len(suffix)] if suffix else sample_name
            if base in COUNTERS:
                return base, created
    return None


def parse_samples(text: str, where: str) -> list[Any]:
    """Every sample of the exposition, parsed by prometheus_client's text parser."""
    try:
        return [sample for family in text_string_to_metric_families(text) for sample in family.samples]
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        raise SpecplanError(f"{where}: not Prometheus text exposition ({exc})") from None


class SeriesTotals:
    """The four counters of one exposition, per model: values summed over engines, per position, and each
    series (counter, position, engine labels) on its own."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.values: dict[str, dict[tuple[str, int | None], float]] = defaultdict(lambda: defaultdict(float))
        self.series: dict[str, dict[tuple[str, int | None, str], float]] = defaultdict(dict)
        self.engines: dict[str, set[str]] = defaultdict(set)
        self.created: dict[str, float] = {}
        self.scraped_at_s: float | None = None
        self.seen: set[tuple[str, str]] = set()

    def add(self, sample: Any) -> None:
        named = counter_name(sample.name)
        if named is None:
            return
        self.refuse_repeat(sample)
        counter, is_created = named
        model = sample.labels.get("model_name", UNLABELLED)
        if is_created:
            self.created[model] = max(self.created.get(model, 0.0), float(sample.value))
            return
        value = float(sample.value)
        if not math.isfinite(value) or value < 0:
            raise SpecplanError(f"{self.where}: {sample.name}{label_text(sample.labels)} is {value:g}; "
                                "a counter is a finite number >= 0")
        position, engine = self.position(counter, sample.labels), engine_labels(sample.labels)
        self.values[model][(counter, position)] += value
        self.series[model][(counter, position, engine)] = value
        self.engines[model].add(engine)
        if sample.timestamp is not None:
            self.scraped_at_s = max(self.scraped_at_s or 0.0, float(sample.timestamp))

    def refuse_repeat(self, sample: Any) -> None:
        """The exposition format allows a series once: a repeat is two scrapes appended into one file."""
        key = (sample.name, label_text(sample.labels))
        if key in self.seen:
            raise SpecplanError(f"{self.where}: series {sample.name}{key[1]} appears twice (two scrapes appended "
                                "into one file, as `curl >>` or a cron log makes them); save each scrape to its "
                                "own file and give the files in order")
        self.seen.add(key)

    def position(self, counter: str, labels: dict[str, str]) -> int | None:
        if counter != PER_POSITION:
            return None
        text = labels.get("position")
        if text is None or not text.strip().isdigit():
            raise SpecplanError(f"{self.where}: {PER_POSITION} needs a whole-number 'position' label, "
                                f"got {label_text(labels)}")
        return int(text)


def label_text(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{k}="{v}"' for k, v in sorted(labels.items())) + "}"


def engine_labels(labels: dict[str, str]) -> str:
    """The labels that tell one engine from another (`engine`, a pod's `instance`, ...), as text."""
    return label_text({k: v for k, v in labels.items() if k not in ENGINE_LABELS_LEFT_OUT})


def engine_name(labels: str) -> str:
    """`0` for `{engine="0"}` alone (vLLM's one-server case); the label text otherwise."""
    match = re.fullmatch(r'\{engine="([^"]*)"\}', labels)
    return match.group(1) if match else ("0" if labels == "{}" else labels)


def series_name(key: tuple[str, int | None, str]) -> str:
    counter, position, engine = key
    labels = engine[1:-1] + (f',position="{position}"' if position is not None else "")
    return f"{counter}{{{labels.lstrip(',')}}}"


def read_scrape(path: str | Path, model: str | None = None) -> SpecCounts:
    """The speculative-decoding counters of one model in a saved `/metrics` page."""
    path = Path(path)
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise SpecplanError(f"{path}: cannot read ({exc.__class__.__name__})") from None
    return parse_scrape(text, str(path), model)


def parse_scrape(text: str, where: str, model: str | None = None) -> SpecCounts:
    """`read_scrape` on text already read; `where` names it in errors."""
    totals = SeriesTotals(where)
    for sample in parse_samples(text, where):
        totals.add(sample)
    chosen = choose_model(totals, where, model)
    return counts_of(totals, chosen, where)


def choose_model(totals: SeriesTotals, where: str, model: str | None) -> str:
    models = sorted(totals.values)
    if not models:
        raise SpecplanError(f"{where}: no vLLM speculative-decoding counters ({DRAFTS}, ...); was the "
                            "server started with a speculative config?")
    shown = ", ".join(m or "(no model_name label)" for m in models)
    if model is not None:
        if model not in totals.values:
            raise SpecplanError(f"{where}: no speculative-decoding counters for model '{model}' (found: {shown})")
        return model
    if len(models) > 1:
        raise SpecplanError(f"{where}: counters of {len(models)} models ({shown}); pick one with --model NAME")
    return models[0]


def counts_of(totals: SeriesTotals, model: str, where: str) -> SpecCounts:
    values = totals.values[model]
    for counter in (DRAFTS, DRAFT_TOKENS, ACCEPTED):
        if (counter, None) not in values:
            raise SpecplanError(f"{where}: model {model or '(no model_name label)'} has no {counter} counter")
    positions = sorted(k for c, k in values if c == PER_POSITION and k is not None)
    if not positions:
        raise SpecplanError(f"{where}: no {PER_POSITION} series (per-position acceptance)")
    missing = sorted(set(range(positions[-1] + 1)) - set(positions))
    if missing:
        raise SpecplanError(f"{where}: {PER_POSITION} has a gap: position {missing[0]} missing "
                            f"(found {', '.join(map(str, positions))})")
    return SpecCounts(
        source=Path(where).name, model=model, engines=tuple(sorted(engine_name(e) for e in totals.engines[model])),
        drafts=whole(values[(DRAFTS, None)], DRAFTS, where),
        draft_tokens=whole(values[(DRAFT_TOKENS, None)], DRAFT_TOKENS, where),
        accepted_tokens=whole(values[(ACCEPTED, None)], ACCEPTED, where),
        accepted_per_position=tuple(whole(values[(PER_POSITION, k)], f"{PER_POSITION}[{k}]", where)
                                    for k in positions),
        scraped_at_s=totals.scraped_at_s, created_s=totals.created.get(model),
        series={key: whole(value, series_name(key), where) for key, value in totals.series[model].items()})


def whole(value: float, name: str, where: str) -> int:
    if abs(value - round(value)) > 1e-6 * max(1.0, abs(value)):
        raise SpecplanError(f"{where}: {name} is {value:g}; counts of drafts and tokens are whole numbers")
    return round(value)


def counts_between(first: SpecCounts, second: SpecCounts) -> SpecCounts:
    """The window between two scrapes of one server: second − first, checked to only grow."""
    where = f"{first.source} → {second.source}"
    if first.model != second.model:
        raise SpecplanError(f"{where}: the scrapes are of different models ({first.model_text}, "
                            f"{second.model_text}); pick one with --model NAME")
    if first.block_size != second.block_size:
        raise SpecplanError(f"{where}: {first.block_size} draft positions in the first scrape, "
                            f"{second.block_size} in the second (not the same speculative config)")
    if first.created_s is not None and second.created_s is not None and second.created_s > first.created_s + 1e-3:
        raise SpecplanError(f"{where}: the counters were created again between the scrapes "
                            "(the server restarted); scrape twice within one server's lifetime")
    pairs = [(DRAFTS, first.drafts, second.drafts), (DRAFT_TOKENS, first.draft_tokens, second.draft_tokens),
             (ACCEPTED, first.accepted_tokens, second.accepted_tokens)]
    pairs += [(f'{PER_POSITION}{{position="{k}"}}', a, b)
              for k, (a, b) in enumerate(zip(first.accepted_per_position, second.accepted_per_position, strict=True))]
    check_series(first, second, where)
    for name, before, after in pairs:
        if after < before:
            raise SpecplanError(f"{where}: {name} decreases between the scrapes ({before} → {after}); "
                                "the server restarted, or the files are in the wrong order")
    span = (second.scraped_at_s - first.scraped_at_s
            if first.scraped_at_s is not None and second.scraped_at_s is not None else None)
    series = {key: after - first.series.get(key, 0) for key, after in second.series.items()}
    return replace(second, source=where, engines=tuple(sorted({*first.engines, *second.engines})), series=series,
                   drafts=second.drafts - first.drafts, draft_tokens=second.draft_tokens - first.draft_tokens,
                   accepted_tokens=second.accepted_tokens - first.accepted_tokens,
                   accepted_per_position=tuple(b - a for a, b in zip(
                       first.accepted_per_position, second.accepted_per_position, strict=True)),
                   window_s=span)


def check_series(first: SpecCounts, second: SpecCounts, where: str) -> None:
    """Every series of the first scrape is in the second and has not fallen: one engine's restart is refused even
    while another engine's growth keeps the sums rising."""
    for key, before in sorted(first.series.items(), key=lambda item: series_name(item[0])):
        after = second.series.get(key)
        if after is None:
            raise SpecplanError(f"{where}: {series_name(key)} is in the first scrape but not the second (that "
                                "engine went away or restarted); fit a window within one set of engines")
        if after < before:
            raise SpecplanError(f"{where}: {series_name(key)} decreases between the scrapes ({before} → {after}); "
                                "that engine restarted, or the files are in the wrong order")


def scrape_windows(scrapes: Sequence[SpecCounts]) -> tuple[SpecCounts, list[SpecCounts]]:
    """(first → last, every window between consecutive scrapes); one scrape is its own total with no window."""
    if len(scrapes) == 1:
        return scrapes[0], []
    windows = [counts_between(a, b) for a, b in itertools.pairwise(scrapes)]
    total = counts_between(scrapes[0], scrapes[-1])
    return replace(total, source=f"{scrapes[0].source} → {scrapes[-1].source}"
                   + (f" ({len(windows)} windows)" if len(windows) > 1 else "")), windows


def check_consistent(counts: SpecCounts) -> None:
    """The counters must describe one set of proposals, as vLLM increments them together."""
    where, per_pos = counts.source, counts.accepted_per_position
    if counts.drafts == 0:
        raise SpecplanError(f"{where}: {DRAFTS} is 0 (no proposals in this window): nothing to fit")
    if sum(per_pos) != counts.accepted_tokens:
        raise SpecplanError(f"{where}: inconsistent totals: Σ {PER_POSITION} = {sum(per_pos)} but "
                            f"{ACCEPTED} = {counts.accepted_tokens}")
    reaching = (counts.drafts, *per_pos)
    for k in range(len(per_pos)):
        if per_pos[k] > reaching[k]:
            raise SpecplanError(f"{where}: inconsistent totals: {per_pos[k]} accepted at position {k} but only "
                                f"{reaching[k]} proposals reached it")
    if not counts.accepted_tokens <= counts.draft_tokens <= counts.drafts * counts.block_size:
        raise SpecplanError(f"{where}: inconsistent totals: need accepted ({counts.accepted_tokens}) <= draft "
                            f"tokens ({counts.draft_tokens}) <= drafts × positions "
                            f"({counts.drafts} × {counts.block_size})")


# ---- fitting ------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PositionFit:
    """Draft position k (1-based): proposals that reached it, how many were accepted, p_k and its interval."""

    position: int
    proposals: int
    accepted: int
    rate: float
    low: float
    high: float


@dataclass(frozen=True)
class AcceptanceFit:
    """Pooled per-position acceptance and τ of a window of counters, with `confidence` intervals.

    `positions` are the identified ones: every position with full blocks, 1..min_length otherwise.
    `interval` names what the intervals cover; `windows` is how many windows they were taken over (0: none).
    """

    counts: SpecCounts
    positions: tuple[PositionFit, ...]
    tau: float
    tau_low: float
    tau_high: float
    confidence: float
    interval: str = PROPOSAL_LEVEL
    windows: int = 0

    @property
    def full_blocks(self) -> bool:
        """True when every proposal verified all positions (draft tokens = drafts × positions)."""
        return self.counts.draft_tokens == self.counts.drafts * self.counts.block_size

    @property
    def block_size(self) -> int:
        """The block the fitted curve describes: the engine's, or the identified positions of varying drafts."""
        return len(self.positions)

    @property
    def curve(self) -> list[float]:
        return [p.rate for p in self.positions]


def normal_quantile(q: float) -> float:
    """The standard normal's q-quantile."""
    # scipy.stats costs a command 0.5 s to import: a run that writes metrics.prom needs no quantile
    from scipy import stats

    return float(stats.norm.ppf(q))


def t_quantile(q: float, df: int) -> float:
    # scipy.stats, as in normal_quantile
    from scipy import stats

    return float(stats.t.ppf(q, df))


def wilson(accepted: int, trials: int, confidence: float) -> tuple[float, float]:
    """Wilson score interval of a binomial proportion ((0, 1) with no trials)."""
    if trials == 0:
        return 0.0, 1.0
    z = normal_quantile(0.5 + confidence / 2)
    share = accepted / trials
    denominator = 1 + z * z / trials
    centre = (share + z * z / (2 * trials)) / denominator
    half = z * math.sqrt(share * (1 - share) / trials + z * z / (4 * trials * trials)) / denominator
    return max(0.0, centre - half), min(1.0, centre + half)


def ratio_interval(numerators: np.ndarray, denominators: np.ndarray, confidence: float) -> tuple[float, float]:
    """Σa / Σd with the ratio estimator's interval over windows: se² = Σ(a − R·d)² / (K(K − 1) d̄²), t(K − 1)."""
    k = numerators.size
    total = float(denominators.sum())
    if total == 0:
        return 0.0, math.inf
    ratio = float(numerators.sum()) / total
    residual = numerators - ratio * denominators
    se = math.sqrt(float((residual**2).sum()) / (k * (k - 1))) / (total / k)
    half = t_quantile(0.5 + confidence / 2, k - 1) * se
    return ratio - half, ratio + half


def accepted_histogram(counts: SpecCounts) -> np.ndarray:
    """Proposals by accepted drafts 0..K, recovered from the cumulative per-position counts."""
    reaching = np.array((counts.drafts, *counts.accepted_per_position, 0), dtype=np.int64)
    return reaching[:-1] - reaching[1:]


def identified_positions(counts: SpecCounts, min_length: int | None) -> int:
    """How many positions the counters identify: all with full blocks, else the stated smallest length."""
    where, block = counts.source, counts.block_size
    possible = counts.drafts * block
    if min_length is None:
        if counts.draft_tokens == possible:
            return block
        raise SpecplanError(
            f"{where}: drafts varied in length ({counts.draft_tokens:,} of {possible:,} draft positions verified: "
            "a per-batch-size schedule or a dynamic policy), so the counters cannot tell a rejected draft from one "
            "never verified past position 1; give --min-length L (the deployed schedule's smallest length: "
            "positions 1..L are then identified), or scrape a window served at one fixed length "
            "(num_speculative_tokens, no num_speculative_tokens_per_batch_size)")
    if not 1 <= min_length <= block:
        raise SpecplanError(f"--min-length must be between 1 and the {block} draft positions, got {min_length}")
    if counts.draft_tokens < counts.drafts * min_length:
        raise SpecplanError(f"{where}: --min-length {min_length} needs at least {counts.drafts * min_length:,} "
                            f"draft tokens ({counts.drafts:,} drafts × {min_length}), the counters have "
                            f"{counts.draft_tokens:,}: some steps verified fewer drafts")
    return min_length


def fit_acceptance(counts: SpecCounts, confidence: float = 0.95, windows: Sequence[SpecCounts] = (),
                   min_length: int | None = None) -> AcceptanceFit:
    """Pooled p_k = per_pos[k] / per_pos[k − 1] and τ = 1 + accepted / drafts; intervals over `windows` when
    there are MIN_WINDOWS or more, else Wilson (rates) and normal (τ) intervals of independent proposals."""
    if not 0 < confidence < 1:
        raise SpecplanError(f"--confidence must be between 0 and 1, got {confidence:g}")
    check_consistent(counts)
    known = identified_positions(counts, min_length)
    reaching = (counts.drafts, *counts.accepted_per_position)
    rates = [counts.accepted_per_position[k] / reaching[k] if reaching[k] else 0.0 for k in range(known)]
    tau = 1 + counts.accepted_tokens / counts.drafts
    if len(windows) >= MIN_WINDOWS:
        return windowed_fit(counts, windows, rates, tau, confidence)
    positions = tuple(PositionFit(k + 1, reaching[k], counts.accepted_per_position[k], rates[k],
                                  *wilson(counts.accepted_per_position[k], reaching[k], confidence))
                      for k in range(known))
    hist = accepted_histogram(counts)
    lengths = np.arange(hist.size)
    mean = tau - 1
    spread = math.sqrt(max(float((hist * lengths**2).sum() / counts.drafts) - mean * mean, 0.0))
    half = normal_quantile(0.5 + confidence / 2) * spread / math.sqrt(counts.drafts)
    return AcceptanceFit(counts, positions, tau, tau - half, tau + half, confidence)


def windowed_fit(counts: SpecCounts, windows: Sequence[SpecCounts], rates: list[float], tau: float,
                 confidence: float) -> AcceptanceFit:
    """Every interval from the ratio estimator over the windows (each window a cluster of whole stretches of
    traffic, so the spread between requests is in it)."""
    per_window = np.array([(w.drafts, *w.accepted_per_position) for w in windows], dtype=float)
    accepted = np.array([w.accepted_tokens for w in windows], dtype=float)
    reaching = (counts.drafts, *counts.accepted_per_position)
    positions = []
    for k, rate in enumerate(rates):
        low, high = ratio_interval(per_window[:, k + 1], per_window[:, k], confidence)
        positions.append(PositionFit(k + 1, reaching[k], counts.accepted_per_position[k], rate,
                                     max(0.0, low), min(1.0, high)))
    low, high = ratio_interval(accepted, per_window[:, 0], confidence)
    name = f"ratio over {len(windows)} scrape windows (t, {len(windows) - 1} df)"
    return AcceptanceFit(counts, tuple(positions), tau, 1 + low, 1 + high, confidence, name, len(windows))


# ---- the drafter block --------------------------------------------------------------------------
def drafter_mapping(fit: AcceptanceFit, domain: str = "chat", family: str | None = None) -> dict[str, Any]:
    """The `drafter:` mapping: block size as the engine ran, the fitted curve for one domain."""
    if domain not in DOMAINS:
        raise SpecplanError(f"--domain must be one of {', '.join(DOMAINS)}, got {domain!r}")
    drafter: dict[str, Any] = {} if family is None else {"family": family}
    drafter["block_size"] = fit.block_size
    drafter["acceptance"] = {"per_position": {domain: [round(p, 6) for p in fit.curve]}, "domains": {domain: 1.0}}
    return {"drafter": drafter}


def when(seconds: float | None) -> str:
    if seconds is None:
        return "not recorded"
    return np.datetime_as_string(np.datetime64(int(seconds * 1000), "ms"), unit="s") + "Z"


def provenance_lines(fit: AcceptanceFit) -> list[str]:
    """Where the fit came from and how sure it is, as YAML comment lines."""
    c = fit.counts
    level = f"{100 * fit.confidence:g}%"
    lines = ["Acceptance fitted by `specplan acceptance vllm-metrics` from vLLM's speculative-decoding counters.",
             f"model: {c.model_text}; engines: {', '.join(c.engines)}; source: {c.source}",
             f"scraped at: {when(c.scraped_at_s)}" + (f"; window: {c.window_s:g} s" if c.window_s is not None else ""),
             f"drafts {c.drafts}, draft tokens {c.draft_tokens}, accepted {c.accepted_tokens}",
             "Pooled over proposals (docs/model/drafters.md): p_k = accepted at position k / proposals that reached k.",
             f"pooled tau = 1 + accepted / drafts = {fit.tau:.4f} ({level} interval {fit.tau_low:.4f} to "
             f"{fit.tau_high:.4f})",
             f"{level} intervals: {interval_meaning(fit)}"]
    lines += [f"  p{p.position} = {p.rate:.4f} [{p.low:.4f}, {p.high:.4f}] ({p.accepted} of {p.proposals})"
              + ("  no proposal reached this position; written as 0" if p.proposals == 0 else "")
              for p in fit.positions]
    if not fit.full_blocks:
        lines.append(varied_note(fit))
    return lines


def interval_meaning(fit: AcceptanceFit) -> str:
    """What the intervals cover, in words (the terminal, the YAML's comments)."""
    if fit.windows:
        return f"{fit.interval}: the spread between stretches of traffic, requests' differences included"
    return (f"{fit.interval}: proposal-level noise only; a request's drafts share its difficulty, so they are too "
            f"narrow when requests differ; give {MIN_WINDOWS + 1} or more scrapes across the traffic (one a minute) "
            "for intervals over windows")


def varied_note(fit: AcceptanceFit) -> str:
    c = fit.counts
    return (f"drafts varied in length ({c.draft_tokens:,} of {c.drafts * c.block_size:,} draft positions verified): "
            f"positions 1..{fit.block_size} fitted, the ones every draft verified (--min-length)")


def drafter_yaml(fit: AcceptanceFit, domain: str = "chat", family: str | None = None) -> str:
    """The fitted `drafter:` block as YAML, its provenance and intervals as comments."""
    header = "".join(f"# {line}\n" for line in provenance_lines(fit))
    body = yaml.safe_dump(drafter_mapping(fit, domain, family), sort_keys=False, default_flow_style=None)
    return header + body


def fit_record(fit: AcceptanceFit, domain: str = "chat") -> dict[str, Any]:
    """The fit as plain JSON data (the `--json` output)."""
    c = fit.counts
    return {
        "model": c.model, "engines": list(c.engines), "source": c.source, "scraped_at_s": c.scraped_at_s,
        "window_s": c.window_s, "drafts": c.drafts, "draft_tokens": c.draft_tokens,
        "accepted_tokens": c.accepted_tokens, "accepted_per_position": list(c.accepted_per_position),
        "domain": domain, "confidence": fit.confidence, "interval": fit.interval, "windows": fit.windows,
        "full_blocks": fit.full_blocks, "block_size": fit.block_size,
        "tau": fit.tau, "tau_interval": [fit.tau_low, fit.tau_high],
        "positions": [{"position": p.position, "proposals": p.proposals, "accepted": p.accepted,
                       "rate": p.rate, "interval": [p.low, p.high]} for p in fit.positions],
    }


# ---- writing ------------------------------------------------------------------------------------
class CounterFamilies:
    """A prometheus_client collector that exposes fixed counter families (no `_created` samples)."""

    def __init__(self, families: list[CounterMetricFamily]) -> None:
        self.families = families

    def collect(self) -> Iterator[CounterMetricFamily]:
        return iter(self.families)


def exposition_text(model_name: str, drafts: int, draft_tokens: int, accepted_per_position: Sequence[int],
                    engine: str = "0", comment: str | None = None) -> str:
    """vLLM's four counters for one engine in Prometheus text format, as vLLM's prometheus_client writes them."""
    labels = ["model_name", "engine"]
    families = []
    for name, value in ((DRAFTS, drafts), (DRAFT_TOKENS, draft_tokens), (ACCEPTED, sum(accepted_per_position))):
        family = CounterMetricFamily(name, HELP[name], labels=labels)
        family.add_metric([model_name, engine], float(value))
        families.append(family)
    per_position = CounterMetricFamily(PER_POSITION, HELP[PER_POSITION], labels=[*labels, "position"])
    for k, value in enumerate(accepted_per_position):
        per_position.add_metric([model_name, engine, str(k)], float(value))
    families.append(per_position)
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CounterFamilies(families))
    text = generate_latest(registry).decode()
    return (f"# {comment}\n" if comment else "") + text
