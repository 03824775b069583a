"""Reports: every figure is written (PNG + SVG) and embedded; lossy and oracle policies are named;
the HTML renders in headless Chromium when it is installed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from specplan.reports.cliffs import find_cliffs
from specplan.reports.figures import FIGURES, LANES_ONLY
from specplan.reports.manual import MANUAL_URL, SWEEP_PAGES
from specplan.reports.report import write_report
from specplan.simulator.study.options import RunOptions
from specplan.simulator.study.sweep.run import run_sweep
from specplan.validation.fidelity import error_summary
from specplan.validation.plot import save_fidelity_plot
from tests.test_fidelity import row
from tests.test_sweep import tiny

CHROMIUM = Path("/usr/bin/chromium")
DRAWN = [figure for figure in FIGURES if figure[0] not in LANES_ONLY]  # a closed loop's sweep draws these


def report_scenario() -> dict:
    raw = tiny()
    raw["hardware"]["profile"] = {"kind": "table", "tokens": [1, 32, 33, 64, 65, 256],
                                  "step_ms": [8.0, 8.4, 10.5, 10.8, 13.0, 16.0]}
    raw["drafter"]["confidence"] = {"kind": "model", "overconfidence": 1.5, "noise": 0.4,
                                    "calibration": "sts", "calibration_samples": 2000}
    raw["sweep"]["seeds"] = [1]
    raw["sweep"]["variants"] = [
        {"label": "MTP-1", "drafter": {"confidence": {"kind": "perfect"}}, "policy": {"name": "mtp-1"}},
        {"label": "global", "drafter": {"family": "dspark"}, "policy": {"name": "dspark-global"}},
        {"label": "oracle", "drafter": {"family": "dspark"}, "policy": {"name": "oracle"}},
    ]
    return raw


@pytest.fixture(scope="module")
def report_dir(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("report")
    result = run_sweep(report_scenario(), None, RunOptions(out_dir=out, workers=1))
    assert write_report(result, out) == out / "report.html"
    return out


@pytest.mark.slow("renders every report figure (matplotlib)")
def test_every_figure_is_written_as_png_and_svg(report_dir):
    for name, *_ in DRAWN:
        png, svg = report_dir / "figures" / f"{name}.png", report_dir / "figures" / f"{name}.svg"
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", name
        assert "<svg" in svg.read_text()[:2000], name


def test_html_is_self_contained_and_embeds_every_figure(report_dir):
    html = (report_dir / "report.html").read_text()
    embedded = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    assert len(embedded) == len(DRAWN)
    assert "Sim-to-real fidelity" not in html  # only when the user names a fidelity result
    assert not re.search(r'src="(?!data:)', html)  # nothing loaded from elsewhere
    assert "<link" not in html
    for title in ("What was simulated", "Variants", "SLA comparison", "Figures"):
        assert title in html


def test_the_report_links_to_the_guides_that_explain_it(report_dir):
    html = (report_dir / "report.html").read_text()
    md = (report_dir / "report.md").read_text()
    assert "Read more in the manual" in html
    for _, page in SWEEP_PAGES:
        assert f'href="{MANUAL_URL}{page}"' in html and f"]({MANUAL_URL}{page})" in md


@pytest.mark.slow("renders every report figure (matplotlib)")
def test_a_named_fidelity_result_adds_its_section_with_a_copied_figure(report_dir, tmp_path):
    results = tmp_path / "fid"
    results.mkdir()
    rows = [row("mtp-1", 2, 100.0, 104.0)]
    doc = {"points": rows, **error_summary(rows)}
    (results / "fidelity.json").write_text(json.dumps(doc))
    save_fidelity_plot(rows, results / "fidelity.png", doc)
    out = tmp_path / "report"
    shutil.copytree(report_dir, out)
    result = run_sweep(report_scenario(), None, RunOptions(out_dir=out, workers=1))  # every point reused from the copy
    html = write_report(result, out, results).read_text()
    assert "Sim-to-real fidelity" in html and "+4.0%" in html
    assert (out / "figures" / "fidelity.png").is_file()
    assert len(re.findall(r'src="data:image/png;base64,', html)) == len(DRAWN) + 1


def test_the_answer_comes_first_and_the_provenance_is_folded(report_dir):
    """Issue 39: report.html put the SLA table ~2,700 px down, below a 40-line provenance list."""
    html = (report_dir / "report.html").read_text()
    assert html.index("SLA comparison") < html.index("Variants") < html.index("What was simulated")
    folded = html[html.index("<details"):html.index("</details>")]
    assert "<summary>" in folded and "What was simulated" in folded and "provenance:" in folded
    assert "provenance:" not in html[:html.index("<details")]
    md = (report_dir / "report.md").read_text()
    assert md.index("## SLA comparison") < md.index("What was simulated")


def test_write_report_takes_a_str_folder(report_dir, tmp_path):
    """Issue 39, item 9: `write_report(result, "dir")` refused the str that run_sweep takes."""
    out = tmp_path / "copy"
    shutil.copytree(report_dir, out)
    result = run_sweep(report_scenario(), None, RunOptions(out_dir=str(out), workers=1))  # every point reused from the copy
    assert write_report(result, str(out)) == out / "report.html"


def test_lossy_and_oracle_policies_are_labelled(report_dir):
    html = (report_dir / "report.html").read_text()
    md = (report_dir / "report.md").read_text()
    for text in (html, md):
        assert "dspark-global (lossy: changes the output distribution)" in text
        assert "oracle (oracle: upper bound, not realisable)" in text
        assert "Lossy and oracle policies" in text
        assert "mtp-1 (lossy" not in text


def test_markdown_links_every_figure_and_names_the_profile(report_dir):
    md = (report_dir / "report.md").read_text()
    assert not (report_dir / "figures" / "lanes.png").exists()  # not a sweep over agent lanes
    for name, *_ in DRAWN:
        assert f"(figures/{name}.png)" in md and f"(figures/{name}.svg)" in md
    assert "provenance: source: inline table in the scenario" in md
    assert "Seeds: 1; 6 points" in md


def test_cliffs_are_jumps_not_slopes():
    tokens = np.arange(1, 11)
    step_ms = np.array([8.0, 8.01, 8.02, 9.5, 9.51, 9.52, 9.53, 9.54, 12.0, 12.01])
    assert tokens[find_cliffs(tokens, step_ms)].tolist() == [4, 9]
    assert find_cliffs(tokens, 10.0 + 0.05 * tokens).size == 0  # a linear profile has none


@pytest.mark.slow("renders the report in a headless Chromium")
@pytest.mark.skipif(not CHROMIUM.exists(), reason="Chromium is not installed at /usr/bin/chromium")
def test_report_renders_in_headless_chromium(report_dir, tmp_path):
    shot = tmp_path / "report.png"
    command = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--disable-background-networking", "--disable-component-update", "--disable-sync",
               f"--user-data-dir={tmp_path / 'profile'}", f"--screenshot={shot}", "--window-size=1280,2000",
               (report_dir / "report.html").as_uri()]
    subprocess.run(command, check=True, timeout=90, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    from matplotlib.image import imread

    pixels = imread(shot)[..., :3]
    assert pixels.shape[:2] == (2000, 1280)
    dark = (pixels.mean(axis=2) < 0.5).mean()
    assert pixels.std() > 0.05 and dark > 0.005, "the screenshot is blank"
    shutil.rmtree(tmp_path / "profile", ignore_errors=True)


def test_the_variants_table_says_who_pays_the_scheduling_overhead(report_dir):
    md = (report_dir / "report.md").read_text()
    assert "scheduling overhead" in md
    assert "none (lengths fixed before drafting)" in md  # MTP-1
    assert "ms per step (decides from the current drafts, synchronously)" in md  # dspark-global
    assert "none (decided ahead, overlapped with the previous step)" in md  # the oracle
