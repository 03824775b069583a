"""`specplan acceptance vllm-metrics`: a running vLLM's speculative-decoding counters → a scenario's drafter block.

    specplan acceptance vllm-metrics before.prom after.prom --out drafter.yaml --domain chat

One scrape fits the counters since the server started; two fit the window
between them (their difference). The fit is specplan.simulator.drafters.vllm_metrics;
this module reads the arguments, writes the YAML and prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys

from specplan.cli.args import whole_number
from specplan.cli.commands import help_of
from specplan.cli.output import add_force_arg, out_file
from specplan.simulator.core.domains import DOMAINS
from specplan.simulator.core.errors import SpecplanError
from specplan.simulator.core.jsonsafe import clean
from specplan.simulator.drafters.spec import FAMILIES
from specplan.simulator.drafters.vllm_metrics import (
    AcceptanceFit,
    drafter_yaml,
    fit_acceptance,
    fit_record,
    interval_meaning,
    read_scrape,
    scrape_windows,
    varied_note,
    when,
)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("acceptance", help=help_of("acceptance"))
    kinds = p.add_subparsers(dest="source", required=True, parser_class=type(p))
    v = kinds.add_parser("vllm-metrics", help="vLLM's Prometheus /metrics text (one scrape, or two for a window)")
    v.add_argument("scrapes", nargs="+", metavar="FILE",
                   help="saved /metrics pages in time order: one (since the server started), two (the window "
                        "between them), or six or more across the traffic (intervals over the windows between them)")
    v.add_argument("--out", required=True, help="YAML file to write (a drafter: block; an existing one kept unless --force)")
    add_force_arg(v)
    v.add_argument("--domain", default="chat", choices=DOMAINS, help="request domain the traffic was (default chat)")
    v.add_argument("--model", help="model_name label to fit when the page serves several models")
    v.add_argument("--family", choices=[f for f in FAMILIES if f != "none"],
                   help="also write drafter.family (vLLM's counters do not say which drafter ran)")
    v.add_argument("--confidence", type=float, default=0.95, help="interval level (default 0.95)")
    v.add_argument("--min-length", type=whole_number, metavar="L",
                   help="drafts varied in length (a tuned per-batch-size schedule): the schedule's smallest length; "
                        "positions 1..L, which every draft verified, are fitted")
    v.add_argument("--json", action="store_true", help="print the fit as JSON")
    v.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    scrapes = [read_scrape(path, args.model) for path in args.scrapes]
    counts, windows = scrape_windows(scrapes)
    fit = fit_acceptance(counts, args.confidence, windows, args.min_length)  # bad scrapes are reported before --out
    out = out_file(args.out, args.force)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(drafter_yaml(fit, args.domain, args.family))
    except OSError as exc:
        raise SpecplanError(f"--out {out}: cannot write ({exc.strerror or exc})") from None
    if args.json:
        sys.stdout.write(json.dumps(clean({**fit_record(fit, args.domain), "out": str(out)}), indent=2) + "\n")
    else:
        print(fit_table(fit))
        keys = ("drafter.family, " if args.family else "") + "drafter.block_size and drafter.acceptance"
        print(f"  wrote {out} ({keys} for '{args.domain}' requests)")
    return 0


def fit_table(fit: AcceptanceFit) -> str:
    """The fit for a terminal: counters, pooled τ, one row per position with its interval, what they cover."""
    c = fit.counts
    level = f"{100 * fit.confidence:g}%"
    known = ([f"scraped at {when(c.scraped_at_s)}"] if c.scraped_at_s is not None else []) + \
        ([f"window {c.window_s:g} s"] if c.window_s is not None else [])
    lines = [f"model {c.model_text}, {len(c.engines)} engine(s), source {c.source}"
             + (f" ({', '.join(known)})" if known else ""),
             f"  drafts {c.drafts:,}; draft tokens {c.draft_tokens:,}; accepted {c.accepted_tokens:,}",
             f"  pooled τ = 1 + accepted / drafts = {fit.tau:.3f} ({level} interval {fit.tau_low:.3f}–{fit.tau_high:.3f})",
             f"  {'position':>8}  {'proposals':>10}  {'accepted':>10}  {'p_k':>6}  {level} interval"]
    lines += [f"  {p.position:>8}  {p.proposals:>10,}  {p.accepted:>10,}  {p.rate:>6.4f}  [{p.low:.4f}, {p.high:.4f}]"
              for p in fit.positions]
    lines.append(f"  intervals: {interval_meaning(fit)}")
    if not fit.full_blocks:
        lines.append(f"  note: {varied_note(fit)}")
    return "\n".join(lines)
