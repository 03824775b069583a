"""Each part of the database against the public kernel measurements, per part and per token count.

    .venv/bin/python benchmarks/kernel_check.py [NAME_FILTER]

For every DeepSeek-V4 verify-step built-in (hwprofiles/builtins.py) it
prices the parts the public table (hwprofiles/public/kernels.csv) measures
at the built-in's GPU, geometry and EP degree, at each measured count of
tokens per rank (B = dp x tokens per rank), per layer and per rank, and
prints database against measurement with the ratio. `OFF` flags a ratio
more than 20% from 1; `applied` says whether the rule of
hwprofiles/aiconfigurator/public.py uses the row (same kernel, precision
and topology, inside the profile's range), else why not. The last column
says which parts the rule therefore sets in the committed file. Then each
GEMM against the public single-GEMM rows of its GPU and precision
(hwprofiles/aiconfigurator/public_gemm.py): per call, at each measured m, the
database, the implementations' band and mean, and whether the GEMM is set.
Last, the physical checks (hwprofiles/physical.py) of every built-in that
carries them, read from the committed files (V4 and the other AIConfigurator
built-ins, prefill included): per part, its largest ratio to the top of its
roofline band and its smallest to the floor over every token count, and the
operators the physical rule set (hwprofiles/aiconfigurator/physical_rule.py).
"""

from __future__ import annotations

import argparse

import numpy as np

from specplan.hwprofiles import load_profile
from specplan.hwprofiles.aiconfigurator import VerifyPricer, compile_target, price, quiet
from specplan.hwprofiles.aiconfigurator.build import moe_layers, profile_key, public_rows
from specplan.hwprofiles.aiconfigurator.parts import part_of
from specplan.hwprofiles.aiconfigurator.public import (
    TOLERANCE,
    Check,
    point_checks,
    setting,
)
from specplan.hwprofiles.aiconfigurator.public_gemm import GemmCheck
from specplan.hwprofiles.builtins import AIC_BUILTINS, PREFILL_BUILTINS
from specplan.hwprofiles.physical import HIGH, LOW, check_profile


def database_us(pricer: VerifyPricer, layers: float):
    """per_layer_us(parts, B): the database's parts at B tokens, per layer per rank, µs (any B)."""
    def per_layer_us(parts: tuple[str, ...], tokens: int) -> float:
        entries = pricer.leaf_entries(tokens)
        ms = sum(e[1] for e in entries if part_of(str(e[0]).removeprefix("generation_")) in parts)
        return ms / layers * 1000.0
    return per_layer_us


def checks_of(name: str) -> list[Check]:
    target, layout, _ = AIC_BUILTINS[name]
    compiled = compile_target(target, layout.max_tokens, layout.query_tokens, layout.memory_fraction)
    ops = list(compiled.ops)
    pricer = VerifyPricer(compiled, ops, layout.query_tokens)
    parts = sorted({part_of(str(e[0]).removeprefix("generation_")) for e in pricer.leaf_entries(1)})
    key = profile_key(compiled, ops, layout.max_tokens)
    return point_checks(key, public_rows(key, ops)[0], parts, database_us(pricer, moe_layers(ops)))


def line(check: Check) -> str:
    m = check.measurement
    flag = "OFF" if check.off else "ok "
    use = "applied" if check.applies else f"not applied: {check.why_not}"
    return (f"  {m.part:<13} {m.source:<30} {m.kernel:<28} {m.precision:<5} {m.tokens_per_rank:>6}  "
            f"{check.database_us:>9.1f} {m.latency_us:>9.1f} {check.ratio:>6.2f} {flag} {use}")


def gemm_checks_of(name: str) -> list[GemmCheck]:
    target, layout, drafter = AIC_BUILTINS[name]
    return price(target, layout, "", drafter).gemm_checks


def gemm_line(check: GemmCheck) -> str:
    low, high = check.band
    use = "applied" if check.applies else f"not applied: {check.why_not}"
    return (f"  {check.leaf.name:<20} N {check.leaf.n:>5} K {check.leaf.k:>5} m {check.tokens:>5}  "
            f"{check.database_us:>9.1f} {check.mean_us:>9.1f} [{low:.1f}, {high:.1f}] {check.ratio:>6.3f} "
            f"{'OFF' if check.off else 'ok '} {use}")


def gemm_section(names: list[str]) -> None:
    print("\nsingle GEMMs against the public GEMM rows, per call (us); OFF: outside [fastest/2, 2 x slowest]")
    for name in names:
        with quiet():
            checks = gemm_checks_of(name)
        if checks:
            sets = sorted({c.leaf.name for c in checks if c.off and c.applies})
            print(f"\n{name}: the rule sets " + (", ".join(sets) or "no GEMM"))
            for check in checks:
                print(gemm_line(check))


def physical_section(pattern: str) -> None:
    print(f"\nphysical checks, every part at every token count of the file: top = part / ({HIGH:g} x max(roofline, "
          f"floor)), floor = part / ({LOW:g} x roofline); both within 1 pass")
    failing = 0
    for name in [n for n in (*AIC_BUILTINS, *PREFILL_BUILTINS) if pattern in n]:
        profile = load_profile(f"builtin:{name}")
        checks = check_profile(profile)
        if not checks:
            continue
        set_here = str(profile.provenance.get("physical_rule", "")).split("set here: ")[-1]
        print(f"\n{name}: the physical rule set {set_here}")
        for check in checks:
            top = check.part_ms / check.high_ms
            floor = np.where(check.low_ms > 0, check.low_ms / np.maximum(check.part_ms, 1e-12), 0.0)
            i, j = int(np.argmax(top)), int(np.argmax(floor))
            failing += not check.passes
            print(f"  {check.part:<16} top {top[i]:5.2f} at B {check.tokens[i]:>5}   floor {floor[j]:5.2f} at B "
                  f"{check.tokens[j]:>5}   {'ok' if check.passes else 'FAIL'}")
    print(f"\n{failing} parts outside their band")


def main(pattern: str) -> None:
    names = [n for n, (_, _, drafter) in AIC_BUILTINS.items()
             if "deepseek-v4" in n and drafter is None and pattern in n]
    flagged = compared = 0
    print(f"database vs public measurement, per layer per rank (us); OFF: |ratio - 1| > {TOLERANCE:.0%}")
    print(f"  {'part':<13} {'source':<30} {'kernel':<28} {'prec':<5} {'tok/rk':>6}  {'database':>9} "
          f"{'measured':>9} {'ratio':>6}")
    for name in names:
        with quiet():
            checks = checks_of(name)
        sets = setting(checks)
        print(f"\n{name}: {len(checks)} rows of its GPU, geometry and EP; the rule sets "
              + (", ".join(f"{p} (from {len(c)} rows)" for p, c in sets.items()) or "no part"))
        for check in checks:
            print(line(check))
        compared += len(checks)
        flagged += sum(c.off for c in checks)
    print(f"\n{compared} comparisons, {flagged} off by more than {TOLERANCE:.0%}")
    gemm_section(names)
    physical_section(pattern)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("filter", nargs="?", default="", help="only the built-ins whose name contains this")
    main(parser.parse_args().filter)
