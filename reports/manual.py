"""Where the manual lives, and which of its pages explains each part of a report.

A report links to the guide that explains it (`manual_links`), so a reader
of report.html finds how it was made and what each column means. The base
URL is mkdocs.yml's `site_url` (tests/test_docs.py checks they agree, and
that every page named here exists in docs/ with the section it points at).
"""

from __future__ import annotations

from specplan.reports.document import Heading, Links

MANUAL_URL = "https://specplan.readthedocs.io/en/latest/"

# what a reader wants to know → the page (docs/ path without .md, and a section anchor)
SWEEP_PAGES = (
    ("How sweeps, frontiers and SLA comparisons are made (Planning)", "guides/planning/#sweeps"),
    ("Every key and column of summary.json, points.csv, frontier.csv, comparisons.csv (Outputs)",
     "reference/outputs/"),
    ("How a step is priced, and what is measured, fitted or assumed (The model)", "model/"),
    ("Every scenario key (Scenario schema)", "reference/scenario/"),
)
TUNE_PAGES = (
    ("How the schedule is tuned and deployed (Engines in the loop)", "guides/engines/#tuning-a-length-schedule"),
    ("Launch configurations for vLLM, SGLang and TensorRT-LLM", "guides/engines/#launch-configurations"),
    ("Every scenario key (Scenario schema)", "reference/scenario/"),
)


def manual_links(pages: tuple[tuple[str, str], ...]) -> list[Heading | Links]:
    """The report's closing section: links into the manual."""
    return [Heading("Read more in the manual"), Links(tuple((text, MANUAL_URL + page) for text, page in pages))]
