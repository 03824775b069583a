"""Which mode, cap or rule answers for a serving figure's miss: one ablation at a time, the run's records beside.

The rule, automated and the same for every figure. A serving figure whose
predicted (physics alone, nothing fitted) |error| is above ATTRIBUTE_AT is
predicted again under each ablation of ABLATIONS that applies to its
scenario: one mode, cap or rule removed or set to its alternative, nothing
else changed and nothing fitted. The responsible one is the ablation that
brings |error| down the most, by at least MIN_MOVE; its reason line says
what it changed and the error before and after. Where no ablation moves the
error that far, no modelled mode, cap or rule answers for the miss: the
figure is put on the step price (the kernels the profile prices, or a term
the model lacks), with the run's own records as the reason (the main reason
steps left the decode graph, the admission cap that binds, the largest move
an ablation made). An ablation that moves the figure is a sensitivity, not
a fix: the rule stays in where the engine's source has it.

    ABLATIONS           name: what it changes (where it applies)
    prefill_schedule    separate prefill batches <-> prompt chunks mixed into decode steps
    rank_decode         a rank with decoding requests while another prefills: idle <-> decode (DP)
    graph_modes         the graph/eager mode rule off: every step at the profile's own size
    host_cycle          the host cycle of a speculating step off (engine.host.engine none)
    token_cap           a DP rank's token cap (all-to-all, MegaMoE) x 2
    request_slots       request slots x 2 where an admission cap binds the run's demand
    prefill_delayer     SGLang's prefill delayer on (DP, separate batches, off in the scenario)
    rank_balance        requests to the rank with the fewest (SGLang total_requests) instead
    deepep_mode         DeepEP auto -> low-latency on every step (no normal-mode prefill steps)
    extend_op           an extend step's host cost per kernel: the launcher's -> the family's eager decode figure
                        (DeepSeek-V4: 28.5 us, sglang PR #24047; engine.cuda_graph.extend_op_us), where steps are
                        priced by their launches and the scenario sets none
    extend_op_added     the same, at that public pair's other reading (launches added to the kernels: 16.9 us)

Place in the data flow: `replicate.py` calls `attribute_figure` after the
predictions when asked (`ReplicationAsk.attribute`, `specplan replicate
--attribute`; a task per case on the run's workers); `recorded` gives each row `responsible` and `responsible_reason`, and
replication.json an `attribution` list with every ablation's error.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from specplan.engines.eager import KernelCount
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.engine.assembly import EngineParts, assemble
from specplan.simulator.engine.phases import idle_while_prefilling
from specplan.simulator.engine.step_modes import engine_modes, launch_count
from specplan.simulator.study.replication.case_runner import Params, signed_error
from specplan.simulator.study.replication.published import Figure

ATTRIBUTE_AT = 0.30   # a figure off by more than this (physics alone) gets a responsible mode, cap or rule
MIN_MOVE = 0.05       # an ablation answers for a miss where it brings |error| down by this much at least
STEP_PRICE = "step price"


class Predicts(Protocol):
    """What attribution asks of a serving case's runner (CaseRunner)."""

    def scenario(self, figure: Figure, arm: str, params: Params, extra: tuple[str, ...] = ()) -> Any: ...

    def summary(self, figure: Figure, arm: str, params: Params, extra: tuple[str, ...] = ()) -> dict[str, Any]: ...

    def predict(self, figure: Figure, params: Params, extra: tuple[str, ...] = ()) -> float: ...


@dataclass(frozen=True)
class Setting:
    """The figure's first arm as it ran: its scenario, its assembled engine and its run's summary."""

    scenario: Any
    parts: EngineParts
    summary: dict[str, Any]

    @property
    def dp(self) -> Any:
        return self.parts.config.dp

    @property
    def separate(self) -> bool:
        return self.parts.config.chunked and self.parts.config.prefill_schedule == "separate"

    @property
    def speculates(self) -> bool:
        return bool(self.parts.policy().drafts and self.parts.config.block_size > 0)


@dataclass(frozen=True)
class Ablation:
    """One mode, cap or rule removed or at its alternative: `change(setting)` gives the overrides and the words
    for what they change, or None where it does not apply."""

    name: str
    change: Callable[[Setting], tuple[tuple[str, ...], str] | None]


def prefill_schedule(s: Setting) -> tuple[tuple[str, ...], str] | None:
    if not s.parts.config.chunked:
        return None
    if s.separate:
        return ("engine.prefill.schedule=mixed",), "prompt chunks mixed into decode steps instead of prefill batches"
    return ("engine.prefill.schedule=separate",), "separate prefill batches instead of mixed chunks"


def rank_decode(s: Setting) -> tuple[tuple[str, ...], str] | None:
    if s.dp is None or not s.separate:
        return None
    if idle_while_prefilling(s.parts.config, s.speculates):
        return (("engine.dp_attention.decode_during_prefill=decode",),
                "ranks decode while another prefills instead of idling (SGLang under speculation)")
    return ("engine.dp_attention.decode_during_prefill=idle",), "ranks idle while another prefills instead of decoding"


def graph_modes(s: Setting) -> tuple[tuple[str, ...], str] | None:
    if s.scenario.engine.cuda_graph is None:
        return None
    return ("engine.cuda_graph=null",), "no graph/eager mode rule (every step at the profile's own size)"


def host_cycle(s: Setting) -> tuple[tuple[str, ...], str] | None:
    config = s.parts.config
    if not s.speculates or (config.spec_cycle_ms <= 0 and config.spec_step_fraction <= 0):
        return None
    return ("engine.host.engine=none",), f"no host cycle on speculating steps (was {config.spec_cycle_ms:g} ms)"


def token_cap(s: Setting) -> tuple[tuple[str, ...], str] | None:
    dp = s.scenario.engine.dp_attention
    if s.dp is None or dp is None or not dp.max_step_tokens:
        return None
    return ((f"engine.dp_attention.max_step_tokens={2 * dp.max_step_tokens}",),
            f"a rank's token cap x 2 ({dp.max_step_tokens} -> {2 * dp.max_step_tokens})")


def request_slots(s: Setting) -> tuple[tuple[str, ...], str] | None:
    binding = s.summary.get("engine_cap_binding")
    if not isinstance(binding, str) or binding in ("none", ""):
        return None
    engine = s.scenario.engine
    out = [f"engine.max_batch_requests={2 * engine.max_batch_requests}"]
    if engine.dp_attention is not None and engine.dp_attention.max_batch_requests:
        out.append(f"engine.dp_attention.max_batch_requests={2 * engine.dp_attention.max_batch_requests}")
    return tuple(out), f"request slots x 2 (the binding cap: {binding})"


def prefill_delayer(s: Setting) -> tuple[tuple[str, ...], str] | None:
    rule = s.parts.config.serving.dp_scheduler
    dp = s.scenario.engine.dp_attention
    if s.dp is None or not s.separate or dp.prefill_delayer or rule is None or rule.delayer is None:
        return None
    return ("engine.dp_attention.prefill_delayer=true",), "SGLang's prefill delayer on"


def rank_balance(s: Setting) -> tuple[tuple[str, ...], str] | None:
    if s.dp is None or s.dp.balance == "fewest_requests":
        return None
    return (("engine.dp_attention.balance=fewest_requests",),
            f"requests to the rank with the fewest instead of {s.dp.balance}")


def deepep_mode(s: Setting) -> tuple[tuple[str, ...], str] | None:
    a2a = s.scenario.engine.all_to_all
    if a2a is None or a2a.backend != "deepep" or a2a.mode != "auto":
        return None
    return ("engine.all_to_all.mode=low_latency",), "DeepEP low-latency on every step (no normal-mode steps)"


def extend_cost(s: Setting, figure: Callable[[KernelCount], float | None], reading: str) -> tuple[
        tuple[str, ...], str] | None:
    """An extend step's host cost per kernel at one reading of the family's public eager pair, where the engine
    prices steps by their launches (step_modes.launch_count) and the scenario does not set it."""
    graph = s.scenario.engine.cuda_graph
    priced = None if graph is None or graph.extend_op_us is not None else launch_count(engine_modes(s.parts.config,
                                                                                                     False))
    value = None if priced is None else figure(priced[1])
    if priced is None or value is None:
        return None
    return ((f"engine.cuda_graph.extend_op_us={value:g}",),
            f"extend steps at {value:g} us a kernel ({reading}) instead of the launcher's {priced[0].per_launch_us:g}")


def extend_op(s: Setting) -> tuple[tuple[str, ...], str] | None:
    return extend_cost(s, lambda count: count.eager_op_us, "the family's eager decode figure")


def extend_op_added(s: Setting) -> tuple[tuple[str, ...], str] | None:
    return extend_cost(s, lambda count: count.eager_op_added_us, "its eager decode pair, launches added to kernels")


ABLATIONS = (Ablation("prefill_schedule", prefill_schedule), Ablation("rank_decode", rank_decode),
             Ablation("graph_modes", graph_modes), Ablation("host_cycle", host_cycle),
             Ablation("token_cap", token_cap), Ablation("request_slots", request_slots),
             Ablation("prefill_delayer", prefill_delayer), Ablation("rank_balance", rank_balance),
             Ablation("deepep_mode", deepep_mode), Ablation("extend_op", extend_op),
             Ablation("extend_op_added", extend_op_added))


@dataclass(frozen=True)
class Verdict:
    """A figure's responsible mode, cap or rule, the one-line reason, and every ablation's signed error."""

    responsible: str
    reason: str
    errors: dict[str, float]


def needs_attribution(row: dict[str, Any]) -> bool:
    """A predicted serving figure (not a sign) off by more than ATTRIBUTE_AT."""
    error = row.get("predicted_error")
    return (row.get("level") != "step" and row.get("status") == "ok" and row.get("metric") != "speedup_sign"
            and isinstance(error, float) and not math.isnan(error) and abs(error) > ATTRIBUTE_AT)


def attribute_figure(runner: Predicts, figure: Figure, error: float) -> Verdict:
    """The ablation rule of the module docstring for one figure (`error`: its predicted signed error)."""
    setting = setting_of(runner, figure)
    errors: dict[str, float] = {}
    words: dict[str, str] = {}
    for ablation in ABLATIONS:
        change = ablation.change(setting)
        if change is None:
            continue
        overrides, what = change
        try:
            errors[ablation.name] = signed_error(figure, runner.predict(figure, Params(), overrides))
        except SpecplanError as exc:   # the engine refuses the alternative here: it is no alternative
            words[ablation.name] = f"not run: {exc}"
            continue
        words[ablation.name] = what
    return verdict(error, errors, words, setting.summary)


def setting_of(runner: Predicts, figure: Figure) -> Setting:
    scenario = runner.scenario(figure, figure.arms[0], Params())
    return Setting(scenario, assemble(scenario), runner.summary(figure, figure.arms[0], Params()))


def verdict(error: float, errors: dict[str, float], words: dict[str, str], summary: dict[str, Any]) -> Verdict:
    """The ablation that brings |error| down the most, by MIN_MOVE at least; else the step price, with the
    run's records as its reason."""
    moves = {name: abs(error) - abs(e) for name, e in errors.items() if not math.isnan(e)}
    best = max(moves, key=lambda name: moves[name]) if moves else None
    if best is not None and moves[best] >= MIN_MOVE:
        return Verdict(best, f"{words[best]}: error {error:+.0%} -> {errors[best]:+.0%}", errors)
    closest = (f"the closest, {best}: |error| {-100 * moves[best]:+.0f} points" if best is not None
               else "no ablation applies")
    return Verdict(STEP_PRICE, f"no single mode, cap or rule brings |error| down {100 * MIN_MOVE:.0f} points "
                               f"({closest}); {records_line(summary)}", errors)


def records_line(summary: dict[str, Any]) -> str:
    """What the run's records say: the main reason steps left the decode graph, the binding cap."""
    reasons = {key.split(".", 1)[1]: value for key, value in summary.items()
               if key.startswith("mode_reason_time_share.") and isinstance(value, float) and value > 0}
    main = max(reasons, key=lambda r: reasons[r]) if reasons else None
    steps = f"most step time {main} {reasons[main]:.0%}" if main else "no execution mode modelled"
    return f"{steps}, cap binding {summary.get('engine_cap_binding', 'none')}"


def recorded(row: dict[str, Any], found: Verdict) -> dict[str, Any]:
    """`found` written into the figure's row (`responsible`, `responsible_reason`); returns the entry
    replication.json's attribution list keeps (every ablation's error)."""
    row["responsible"], row["responsible_reason"] = found.responsible, found.reason
    return {"source": row["source"], "metric": row["metric"], "concurrency": row["concurrency"],
            "predicted_error": row["predicted_error"], "responsible": found.responsible,
            "reason": found.reason, "ablation_errors": found.errors}
