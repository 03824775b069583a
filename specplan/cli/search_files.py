"""A deployment search → its files in the --out folder.

    plan.csv          every searched deployment, met or not, in rank order (as AIConfigurator's pareto.csv)
    plan.json         the target, the same rows, the winner
    plan.md           the ranked table, the SLA, and the launch lines
    plan.png          cost against the SLA statistic (`specplan.reports.search_figure`)
    launch-vllm.sh, launch-sglang.sh (and trtllm.yaml for a schedule policy): the winner's launch configuration
    probes/<key>.json every probe run (written by the search as it runs)
"""

from __future__ import annotations

from pathlib import Path

from specplan.cli.plan_tables import search_table
from specplan.reports.search_figure import write_search_figure
from specplan.simulator.core.jsonsafe import dumps
from specplan.simulator.study.launch import launch_files
from specplan.simulator.study.plan_json import deployment_rows, search_json
from specplan.simulator.study.search_plan import DeploymentPlan


def write_search_files(plan: DeploymentPlan, out: Path) -> dict[str, Path]:
    """Every file of the module docstring but the probes; returns them by name."""
    out.mkdir(parents=True, exist_ok=True)
    files = {name: out / name for name in ("plan.csv", "plan.json", "plan.md", "plan.png")}
    deployment_rows(plan).to_csv(files["plan.csv"], index=False, float_format="%.9g")
    files["plan.json"].write_text(dumps(search_json(plan)))
    write_search_figure(plan, files["plan.png"])
    launch = plan.launch()
    texts = launch_files(launch) if launch is not None else {}
    for name, text in texts.items():
        files[name] = out / name
        files[name].write_text(text)
    md = ["# specplan deployment search", "", "```", search_table(plan), "```", "", "![cost against the SLA](plan.png)",
          ""]
    for name, text in texts.items():
        md += [f"## {name}", "", "```", text.rstrip(), "```", ""]
    md += ["Every deployment's fewest GPUs is confirmed by its own simulation and one fewer by a failed one; "
           "plan.csv lists every deployment, met or not; probes/<key>.json holds every run (reused by a re-run).", ""]
    files["plan.md"].write_text("\n".join(md))
    return files
