"""The manual is true to the code: it builds strictly, its reference covers every key the loader accepts and
every command, its runnable examples run, its links resolve, and every results page carries its stamp."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from docs.gen import record_pages
from docs.gen.cli_page import GUIDES, subcommands
from docs.gen.hooks import REFERENCE, generate_pages
from docs.gen.results import page_text, studies
from docs.gen.runnable import run_block, runnable_blocks, workspace
from specplan.cli.main import parser
from specplan.reports.manual import MANUAL_URL, SWEEP_PAGES, TUNE_PAGES
from specplan.simulator.scenario.keys import schema_sections
from tests.conftest import REPO

SHARED = REPO.parent / "shared"
DOCS = REPO / "docs"
GENERATED = {"reference/scenario.md", "reference/cli.md", "reference/outputs.md", "reference/profile-format.md",
             "results/index.md", "changelog.md", "contributing.md"}
TOP_FILES = ("README.md", "CHANGELOG.md", "CONTRIBUTING.md", "benchmarks/README.md")


@pytest.fixture(scope="module", autouse=True)
def generated_pages() -> None:
    """The copies a build writes (git-ignored) exist whatever order the tests run in; the reference pages are
    committed and checked against the code, never written here."""
    generate_pages()


def hand_written_pages() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*.md") if str(p.relative_to(DOCS)) not in GENERATED
                  and not p.is_relative_to(DOCS / "results"))


# ---- the build ---------------------------------------------------------------------------------------


@pytest.mark.slow("builds the whole manual with MkDocs (about 10 s)")
def test_the_manual_builds_strictly(tmp_path):
    done = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--quiet", "-d", str(tmp_path / "site")],
                          cwd=REPO, capture_output=True, text=True, env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
                          check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "reference" / "scenario" / "index.html").is_file()
    api = (tmp_path / "site" / "reference" / "api" / "index.html").read_text()
    assert "load_scenario" in api and "plan_capacity" in api  # mkdocstrings rendered the docstrings
    # issue 39: the calls' return types list their fields (SimResult, SweepResult, CapacityPlan, TunedSchedule)
    for field in ("engine.cluster.simulation.SimResult.summary", "study.sweep.run.SweepResult.frontier",
                  "study.plan.planner.CapacityPlan.variants", "study.plan.replica_search.ReplicaSizing.replicas",
                  "study.tune.schedule.TunedSchedule.schedule", "study.plan.search.DeploymentPlan.deployments"):
        assert f'id="specplan.simulator.{field}"' in api, field


def mkdocs_config() -> dict:
    return yaml.safe_load((REPO / "mkdocs.yml").read_text())


def test_every_page_of_the_manual_is_in_its_navigation():
    listed = set(re.findall(r"([\w/.-]+\.md)", yaml.safe_dump(mkdocs_config()["nav"])))
    on_disk = {str(p.relative_to(DOCS)) for p in DOCS.rglob("*.md")} | GENERATED
    assert on_disk == listed


# ---- the reference covers the code -------------------------------------------------------------------


def test_every_scenario_key_has_a_meaning_and_every_required_key_an_example():
    undocumented = [f"{s.paths[0]}.{k.name}" for s in schema_sections() for k in s.keys if not k.doc.strip()]
    assert not undocumented, f"add doc= to these keys' field metadata (specplan.fields.bounded): {undocumented}"
    no_example = [f"{s.paths[0]}.{k.name}" for s in schema_sections() for k in s.keys
                  if k.required and not k.example]
    assert not no_example, f"add example= to these required keys: {no_example}"


def documented_paths() -> dict[str, str]:
    """'engine.cuda_graph.engine' → its type, for every key of every section at every path."""
    return {f"{path}.{key.name}" if path else key.name: key.type
            for section in schema_sections() for path in section.paths for key in section.keys}


def yaml_paths(node: object, path: str, known: dict[str, str]) -> list[str]:
    """Every key path of a scenario mapping, descending where the schema has sections (not name mappings)."""
    if not isinstance(node, dict):
        return []
    found = []
    for key, value in node.items():
        if path in ("", "policy") and key in ("sweep", "search", "params"):
            continue  # partial scenarios and a policy's own params are checked below
        here = f"{path}.{key}" if path else str(key)
        found.append(here)
        kind = known.get(here, "")
        if kind.startswith("mapping") and not kind.startswith("mapping of name"):
            found += yaml_paths({k: v for k, v in value.items() if k not in ("kind", "mode")}
                                if isinstance(value, dict) else value, here, known)
    return found


def scenario_files() -> list[Path]:
    shared = sorted((SHARED / "scenarios").glob("*.yaml")) if SHARED.exists() else []
    return sorted((REPO / "scenarios").glob("*.yaml")) + shared + sorted((REPO / "benchmarks" / "published").glob(
        "*/scenario.yaml"))


@pytest.mark.parametrize("path", scenario_files(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_key_the_shipped_scenarios_use_is_in_the_schema_reference(path):
    raw = yaml.safe_load(path.read_text())
    known = documented_paths()
    parts = [raw, *[v for v in (raw.get("sweep") or {}).get("variants", []) if isinstance(v, dict)]]
    used = [p for part in parts for p in yaml_paths({k: v for k, v in part.items() if k != "label"}, "", known)]
    params = (raw.get("policy") or {}).get("params") or {}
    used += [f"policy.params.{k}" for k in params]
    assert [p for p in used if p not in known] == []


@pytest.mark.parametrize("page", sorted(REFERENCE), ids=lambda p: p)
def test_each_committed_reference_page_matches_the_code(page):
    """Issue 39: the reference pages did not exist in a clone until a build, so the README's and the guides'
    links to them were dead on GitHub. They are committed; this holds them to the code."""
    on_disk = (DOCS / page).read_text() if (DOCS / page).is_file() else ""
    assert on_disk == REFERENCE[page](), f"docs/{page} is stale: run `python -m docs.gen.hooks` and commit it"


@pytest.mark.slow("starts a real Python process to see what building the pages imports")
def test_the_pages_need_only_the_docs_extra():
    """Issue 39: `make docs` installed torch and Ray. Writing every generated page imports neither (nor
    aiconfigurator), so `make docs` installs `.[docs]` alone."""
    code = ("import sys; from docs.gen.hooks import REFERENCE, generate_pages; generate_pages(); "
            "[build() for build in REFERENCE.values()]; "
            "print(sorted(m for m in ('torch', 'ray', 'aiconfigurator', 'pytest') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=False)
    assert done.returncode == 0 and done.stdout.strip() == "[]", done.stdout + done.stderr[-2000:]
    makefile = (REPO / "Makefile").read_text()
    recipe = makefile.split("$(VENV)/.installed-docs:", 1)[1].split("\n\n", 1)[0]
    assert 'install -q -e ".[docs]"' in recipe and "torch" not in recipe
    assert re.search(r"^docs: \$\(VENV\)/\.installed-docs$", makefile, flags=re.M)


def test_the_cli_reference_names_no_machine_and_no_switch_default():
    """It showed the building machine's absolute path as `fidelity --model`'s default, `--no-report` as True."""
    text = REFERENCE["reference/cli.md"]()
    assert str(REPO) not in text and "`validation/shapes/small-cpu.yaml`" in text
    assert not re.search(r"^\| `--no-report` \| `True`", text, flags=re.M)
    assert all(row.split(" | ")[1] == "" for row in text.splitlines() if row.startswith("| `--json` |"))


def test_the_schema_reference_tables_have_three_columns():
    """Its 7-column tables clipped the example column: key | value (type, default, bounds, unit) | meaning with
    the override that sets it."""
    text = REFERENCE["reference/scenario.md"]()
    headers = [line for line in text.splitlines() if line.startswith("| key |")]
    assert headers and set(headers) == {"| key | value | meaning |"}
    assert "e.g. `--set cluster.replicas=" in text


def test_the_cli_reference_and_the_readme_name_every_command():
    commands = set(subcommands(parser()))
    assert commands == set(GUIDES), "give every command a guide in docs/gen/cli_page.py GUIDES"
    for guide in set(GUIDES.values()):
        assert (DOCS / guide).is_file(), guide
    readme = (REPO / "README.md").read_text()
    table = readme.split("## Commands", 1)[1].split("\n## ", 1)[0]
    assert [c for c in commands if c not in table] == []


# ---- links ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", TOP_FILES)
def test_the_repositorys_own_links_resolve(name):
    path = REPO / name
    broken = []
    for target in re.findall(r"\]\(([^)]+)\)", path.read_text()):
        if re.match(r"[a-z]+://", target) or target.startswith("#"):
            continue
        if not (path.parent / target.split("#")[0]).exists():
            broken.append(target)
    assert not broken, f"{name}: {broken}"


def test_the_reports_link_to_pages_and_sections_that_exist():
    assert mkdocs_config()["site_url"] == MANUAL_URL
    for _, page in SWEEP_PAGES + TUNE_PAGES:
        path, _, anchor = page.partition("#")
        source = DOCS / (path.rstrip("/") + ".md")
        if not source.is_file():
            source = DOCS / path / "index.md"
        assert source.is_file(), page
        if anchor:
            headings = re.findall(r"^#+ (.+)$", source.read_text(), flags=re.M)
            slugs = {re.sub(r"[\s-]+", "-", re.sub(r"[^\w\s-]", "", h).strip().lower()) for h in headings}
            assert anchor in slugs, page


# ---- docs that run --------------------------------------------------------------------------------------


def all_blocks():
    pages = [*hand_written_pages(), REPO / "README.md"]
    return [block for page in pages for block in runnable_blocks(page, REPO)]


def test_the_guides_have_runnable_examples():
    pages = {block.page.split(":")[0] for block in all_blocks()}
    guides = {str(p.relative_to(REPO)) for p in (DOCS / "guides").glob("*.md")}
    assert guides - pages == set(), "every guide runs at least one of its examples"


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    return workspace(tmp_path_factory.mktemp("docs"), REPO, SHARED)


@pytest.mark.slow("runs a documented command as a reader would")
@pytest.mark.parametrize("block", all_blocks(), ids=lambda b: b.name)
def test_a_runnable_example_runs(block, work):
    done = run_block(block, work, timeout_s=300)
    assert done.returncode == 0, f"{block.name}:\n{block.script()}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"


# ---- results pages ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(studies()))
def test_every_results_page_carries_its_stamp_and_its_evidence(name):
    text = (DOCS / "results" / f"{name}.md").read_text()
    lines = text.splitlines()
    assert lines[0] == f"# {studies()[name].title}"
    assert lines[2] == f'!!! info "Generated by `python -m docs.gen.results {name}`"'
    assert re.match(r"    Commit [0-9a-f]{7,}, \d{4}-\d{2}-\d{2}, on .+ cores", lines[3]), lines[3]
    assert "|---|" in text or "```text" in text   # a table read from a record, or what its command printed


@pytest.mark.parametrize("name", [n for n, s in studies().items() if s.reads_record])
def test_a_page_read_from_a_committed_record_matches_its_record(name, monkeypatch, tmp_path):
    monkeypatch.setattr(record_pages, "figure", lambda source, fig: f"![{fig}](../figures/{fig})\n")
    fresh = page_text(name, studies()[name], None).splitlines()
    committed = (DOCS / "results" / f"{name}.md").read_text().splitlines()
    assert fresh[:3] == committed[:3] and fresh[4:] == committed[4:], "regenerate: python -m docs.gen.results " + name
    for path, marker, text in studies()[name].blocks() if studies()[name].blocks else []:
        written = path.read_text()
        begin = written.index(f"<!-- {marker}: begin")
        block = written[written.index("-->", begin) + 3:written.index(f"<!-- {marker}: end -->")]
        assert block == f"\n{text}", f"{path.name}'s {marker} block: regenerate: python -m docs.gen.results {name}"
