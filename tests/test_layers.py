"""The package's layers, checked by walking every import (ast): no cycle, no arrow upwards.

Data flows one way (CONTRIBUTING.md): scenario → model → records → summary →
sweep → frontier → plan/report. Each module belongs to one layer; it may
import its own layer's package and any layer below, never a layer above
and never a peer package of its own layer.

Each top-level folder is one band of that order, lowest first:

    specplan.errors, specplan.fields     the root's error base and field declarations
    engines                              each serving engine's habits, one row per version
    hwprofiles, traces, policies         the leaf packages (peers)
    simulator                            core → drafters → scenario → engine → study
    reports                              figures and report files, from what a run recorded
    validation                           the reference engine and the fidelity check
    specplan.cli                         the `specplan` command: the only layer that
                                         runs simulations, writes reports and validates

so the simulator imports neither reports, validation nor the command, and
reports and validation build on the simulator, never the other way round. Function-local imports count
like any other; they are kept only for heavy optional dependencies
(torch, ray, matplotlib, aiconfigurator) or a project module that loads one
when imported, each with a one-line reason on the line above.

The leaf packages (hwprofiles, traces, policies) sit lowest, on nothing but
the root's error base (specplan.errors), field declarations (specplan.fields) and the engines' traits table (specplan.engines): they import no part of
specplan.simulator, so the simulator's core, scenario layer and engine
build on them and never the other way round.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from tests.conftest import REPO

# lowest first; packages listed together are peers (neither may import the other)
LAYERS: tuple[tuple[str, ...], ...] = (
    ("specplan.errors", "specplan.fields"),
    ("specplan.engines",),
    ("specplan.hwprofiles", "specplan.traces", "specplan.policies"),
    ("specplan.simulator.core",),
    ("specplan.simulator.drafters",),
    ("specplan.simulator.scenario",),
    ("specplan.simulator.engine",),
    ("specplan.simulator.study",),
    ("specplan.reports",),
    ("specplan.validation",),
    ("specplan.cli",),
)
# the repository's folders, each installed as specplan.<folder> (pyproject's package-dir)
FOLDERS = ("engines", "simulator", "hwprofiles", "traces", "policies", "reports", "validation", "scenarios")
ROOT = "specplan"
# the leaf packages: each stands alone (its own errors, plain parameter declarations, generators passed in)
LEAVES = ("hwprofiles", "traces", "policies")
# heavy to import: optional extras, and the libraries a command imports only where it needs them (issue 32)
HEAVY_OPTIONAL = ("torch", "ray", "matplotlib", "aiconfigurator_core", "pyarrow", "pandas", "scipy")


def module_name(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    if parts[0] != ROOT:
        parts = (ROOT, *parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def project_modules() -> dict[str, Path]:
    files = [f for p in FOLDERS for f in (REPO / p).rglob("*.py")] + [REPO / ROOT / "errors.py"]
    files += list((REPO / ROOT / "cli").rglob("*.py"))
    return {module_name(f): f for f in files}


def layer_of(module: str) -> tuple[int, str]:
    """(rank, package) of a module: its layer's position and the package prefix it matched."""
    for rank, packages in enumerate(LAYERS):
        for package in packages:
            if module == package or module.startswith(package + "."):
                return rank, package
    raise AssertionError(f"{module} belongs to no layer: add it to LAYERS")


def imports(path: Path) -> list[tuple[str, bool, int]]:
    """(imported module, at module level?, line) for every import of a file."""
    tree = ast.parse(path.read_text())
    top = {id(node) for node in tree.body}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, id(node) in top, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.module, id(node) in top, node.lineno))
    return found


def project_edges() -> dict[str, set[str]]:
    modules = project_modules()
    edges: dict[str, set[str]] = defaultdict(set)
    for name, path in modules.items():
        for target, _, _ in imports(path):
            if target.split(".")[0] == ROOT and target not in (ROOT, f"{ROOT}.scenarios"):
                edges[name].add(target)
    return edges


def test_each_top_level_folder_is_one_band_of_layers():
    """A folder's packages sit next to each other in LAYERS: no folder is split by another."""
    folder_of = [{package.split(".")[1] if package.count(".") else package for package in packages}
                 for packages in LAYERS]
    seen: list[str] = []
    for folders in folder_of:
        for folder in sorted(folders):
            if folder in seen and seen[-1] != folder:
                raise AssertionError(f"{folder} is split by {seen[-1]} in LAYERS")
            if not seen or seen[-1] != folder:
                seen.append(folder)


def test_every_module_has_a_layer():
    for name in project_modules():
        if not name.startswith(f"{ROOT}.scenarios") and name != f"{ROOT}.simulator":
            layer_of(name)


def test_no_import_points_up_or_sideways():
    wrong = []
    for source, targets in project_edges().items():
        rank, package = layer_of(source)
        for target in targets:
            t_rank, t_package = layer_of(target)
            if t_rank > rank or (t_rank == rank and t_package != package):
                wrong.append(f"{source} -> {target}")
    assert not wrong, "imports against the layers:\n" + "\n".join(sorted(wrong))


def test_leaf_packages_import_nothing_of_the_simulator():
    wrong = [f"{source} -> {target}" for source, targets in project_edges().items()
             if source.split(".")[1] in LEAVES
             for target in targets if target.split(".")[1] not in (source.split(".")[1], "errors", "fields", "engines")]
    assert not wrong, "a leaf package imports another part of specplan:\n" + "\n".join(sorted(wrong))


def test_no_import_cycle():
    edges = project_edges()
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(edges.get(node, ())):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for start in sorted(edges):
        if start not in state and (cycle := visit(start)):
            raise AssertionError("import cycle: " + " -> ".join(cycle))


def heavy_modules() -> set[str]:
    """Project modules that load a heavy optional dependency when imported (module-level imports)."""
    modules = project_modules()
    top = {name: {t for t, at_top, _ in imports(path) if at_top} for name, path in modules.items()}
    heavy = {n for n, targets in top.items() if any(t.split(".")[0] in HEAVY_OPTIONAL for t in targets)}
    while True:
        more = {n for n, targets in top.items() if n not in heavy and targets & heavy}
        if not more:
            return heavy
        heavy |= more


def reason_above(lines: list[str], line: int) -> str:
    """The line above a block of consecutive imports that contains line `line` (1-based)."""
    i = line - 2
    while i >= 0 and (not lines[i].strip() or lines[i].strip().startswith(("import ", "from "))):
        i -= 1
    return lines[i].strip() if i >= 0 else ""


def test_function_local_imports_are_heavy_optional_dependencies_with_a_reason():
    heavy = heavy_modules()
    wrong = []
    for path in project_modules().values():
        lines = path.read_text().splitlines()
        for target, at_top, line in imports(path):
            if at_top:
                continue
            reason = reason_above(lines, line)
            is_heavy = target.split(".")[0] in HEAVY_OPTIONAL or target in heavy
            if not is_heavy or not reason.startswith("#"):
                wrong.append(f"{path.relative_to(REPO)}:{line} imports {target}")
    assert not wrong, "function-local imports:\n" + "\n".join(sorted(wrong))


def test_the_engine_is_in_rooms_of_at_most_twelve_modules():
    """simulator/engine is rooms (issue 46): the step's price (price/), the cluster around engines (cluster/), what
    an engine records (records/), the decode core (core/) and the rules chosen at assembly beside them; no folder
    holds more than twelve modules, so each reads as an index of its concern."""
    engine = REPO / "simulator" / "engine"
    crowded = {str(folder.relative_to(REPO)): n for folder in [engine, *engine.rglob("*")] if folder.is_dir()
               and (n := len([m for m in folder.glob("*.py") if m.name != "__init__.py"])) > 12}
    assert not crowded, crowded
