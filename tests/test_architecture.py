"""The layer rules of ARCHITECTURE.md, checked by tools so a wrong import fails CI.

The import-linter contracts live in pyproject.toml. Besides running them on the real
package, these tests copy a small fake ``workbench`` tree with one forbidden import into a
temp dir and run the same contracts there, proving that they really catch a violation.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import os
import pkgutil
import subprocess
import sys
import tomllib
from pathlib import Path
from types import ModuleType

import grimp
import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGE = REPO_ROOT / "workbench"
BIN = Path(sys.executable).parent

# The stairs from ARCHITECTURE.md, top to bottom; a set is one step of independent siblings.
EXPECTED_LAYERS: list[set[str]] = [
    {"workbench.cli"},
    {"workbench.gui"},
    {"workbench.engine"},
    {"workbench.store", "workbench.providers", "workbench.formats"},
    {"workbench.core"},
    {"workbench.errors"},
]


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.fail(f"{name} is not installed next to {sys.executable}; run `make venv`")
    return str(path)


def _contracts() -> list[dict]:
    with open(REPO_ROOT / "pyproject.toml", "rb") as handle:
        return tomllib.load(handle)["tool"]["importlinter"]["contracts"]


def _run_lint_imports(cwd: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ)
    # The fake tree must be imported from cwd, not the installed project.
    env["PYTHONPATH"] = str(cwd)
    # Wide enough that no contract name is wrapped in the report.
    env["COLUMNS"] = "500"
    return subprocess.run(
        [_tool("lint-imports"), "--no-cache"],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_import_contracts_are_kept() -> None:
    result = _run_lint_imports(REPO_ROOT)
    report = result.stdout + result.stderr
    assert result.returncode == 0, report
    assert "BROKEN" not in report
    assert report.count("KEPT") == len(_contracts()), report


def test_ruff_is_clean() -> None:
    result = subprocess.run(
        [_tool("ruff"), "check", "workbench", "tests", "bench"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_layer_contract_matches_the_architecture() -> None:
    (layers,) = [c for c in _contracts() if c["type"] == "layers"]
    parsed = []
    for layer in layers["layers"]:
        # ':' would let siblings import each other; the architecture says they must not.
        assert ":" not in layer, f"layer {layer!r} must separate siblings with '|'"
        parsed.append({part.strip() for part in layer.split("|")})
    assert parsed == EXPECTED_LAYERS


def test_qt_contract_covers_every_package_below_the_gui() -> None:
    (forbidden,) = [
        c for c in _contracts()
        if c["type"] == "forbidden" and "PySide6" in c["forbidden_modules"]
    ]
    below_gui = set().union(*EXPECTED_LAYERS[2:-1])
    assert set(forbidden["source_modules"]) >= below_gui
    assert "PySide6" in forbidden["forbidden_modules"]


# The floors the GUI and the CLI must not reach but through the engine (ARCHITECTURE.md).
SKIPPED_FLOORS = {"workbench.store", "workbench.providers", "workbench.formats"}


@pytest.mark.parametrize("top", ["workbench.gui", "workbench.cli"])
def test_gui_and_cli_may_not_skip_the_engine(top: str) -> None:
    contracts = [
        c for c in _contracts() if c["type"] == "forbidden" and top in c["source_modules"]
    ]
    # Every forbidden edge is named, one by one, and indirect chains through the engine
    # stay allowed (those are the stairs).
    named = {m for c in contracts for m in c["forbidden_modules"]}
    assert named >= SKIPPED_FLOORS
    assert all(c.get("allow_indirect_imports") is True for c in contracts
               if set(c["forbidden_modules"]) & SKIPPED_FLOORS)


def _write_fake_workbench(root: Path, extra: dict[str, str]) -> None:
    """A minimal package with every layer, plus ``extra`` (relative path -> source)."""
    for name in ("cli", "errors"):
        (root / "workbench").mkdir(parents=True, exist_ok=True)
        (root / "workbench" / f"{name}.py").write_text("")
    for name in ("gui", "engine", "store", "providers", "formats", "core"):
        (root / "workbench" / name).mkdir(parents=True, exist_ok=True)
        (root / "workbench" / name / "__init__.py").write_text("")
    (root / "workbench" / "__init__.py").write_text("")
    for relative, source in extra.items():
        (root / relative).write_text(source)
    (root / "pyproject.toml").write_text((REPO_ROOT / "pyproject.toml").read_text())


@pytest.mark.parametrize(
    ("module", "source", "broken", "chain"),
    [
        (
            "workbench/store/search.py",
            "import workbench.formats\n",
            "Layers",
            "workbench.store.search -> workbench.formats",
        ),
        (
            "workbench/core/tokens.py",
            "from workbench.engine import run\n",
            "Layers",
            "workbench.core.tokens -> workbench.engine",
        ),
        (
            "workbench/engine/app.py",
            "import workbench.cli\n",
            "Layers",
            "workbench.engine.app -> workbench.cli",
        ),
        (
            "workbench/engine/view.py",
            "from PySide6 import QtCore\n",
            "Only the GUI imports Qt",
            "workbench.engine.view -> PySide6",
        ),
        (
            "workbench/gui/window.py",
            "import workbench.store\n",
            "The GUI reaches the store, providers and formats only through the engine",
            "workbench.gui.window -> workbench.store",
        ),
        (
            "workbench/gui/window.py",
            "def connect():\n    from workbench.providers import openai\n",
            "The GUI reaches the store, providers and formats only through the engine",
            "workbench.gui.window -> workbench.providers",
        ),
        (
            "workbench/gui/window.py",
            "from workbench.formats import read_conversations\n",
            "The GUI reaches the store, providers and formats only through the engine",
            "workbench.gui.window -> workbench.formats",
        ),
        (
            "workbench/cli.py",
            "from workbench.store import repository\n",
            "The CLI reaches the store, providers and formats only through the engine",
            "workbench.cli -> workbench.store",
        ),
        (
            "workbench/cli.py",
            "import workbench.providers\n",
            "The CLI reaches the store, providers and formats only through the engine",
            "workbench.cli -> workbench.providers",
        ),
        (
            "workbench/cli.py",
            "def run():\n    import workbench.formats\n",
            "The CLI reaches the store, providers and formats only through the engine",
            "workbench.cli -> workbench.formats",
        ),
    ],
    ids=[
        "sibling", "upward", "engine-to-cli", "qt-in-engine",
        "gui-to-store", "gui-to-providers-lazily", "gui-to-formats",
        "cli-to-store", "cli-to-providers", "cli-to-formats-lazily",
    ],
)
def test_contracts_catch_a_violation(
    tmp_path: Path, module: str, source: str, broken: str, chain: str
) -> None:
    _write_fake_workbench(tmp_path, {module: source})
    result = _run_lint_imports(tmp_path)
    report = result.stdout + result.stderr
    assert result.returncode != 0, report
    broken_lines = [line for line in report.splitlines() if line.endswith(" BROKEN")]
    assert [line.startswith(broken) for line in broken_lines] == [True], report
    assert chain in " ".join(report.split()), report


def test_fake_tree_without_violations_passes(tmp_path: Path) -> None:
    # Allowed directions: cli -> gui -> engine -> store -> core -> errors, and gui -> Qt.
    _write_fake_workbench(
        tmp_path,
        {
            "workbench/cli.py": "import workbench.gui\n",
            "workbench/gui/window.py": "import PySide6\nimport workbench.engine\n",
            "workbench/engine/run.py": "import workbench.store\nimport workbench.formats\n",
            "workbench/store/repo.py": "import workbench.core\n",
            "workbench/core/types.py": "import workbench.errors\n",
        },
    )
    result = _run_lint_imports(tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr


def _imported_modules(tree: ast.AST) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_only_the_gui_package_imports_qt() -> None:
    gui = PACKAGE / "gui"
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if gui in path.parents:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        # Catches lazy imports inside functions too, which a grep of line starts could miss.
        if any(name.split(".")[0] == "PySide6" for name in _imported_modules(tree)):
            offenders.append(str(path.relative_to(REPO_ROOT)))
    assert offenders == []


def test_the_qt_scan_sees_nested_imports() -> None:
    tree = ast.parse("def open_window():\n    from PySide6.QtWidgets import QWidget\n")
    assert "PySide6.QtWidgets" in _imported_modules(tree)


WORKSPACE_NAMES = {"ws", "workspace", "_workspace"}


def _names_a_workspace(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in WORKSPACE_NAMES
    return isinstance(node, ast.Attribute) and node.attr in WORKSPACE_NAMES


def _repo_reads(tree: ast.AST) -> list[int]:
    """Lines that read an attribute named ``repo`` (``ws.repo``, ``getattr(ws, "repo")``),
    or a workspace's ``db`` (the store's Database; ``args.db`` is a command-line path)."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and (
            node.attr == "repo" or (node.attr == "db" and _names_a_workspace(node.value))
        ):
            lines.append(node.lineno)
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Name)
            and node.func.id in {"getattr", "hasattr"}
            and len(node.args) >= 2
            and isinstance(node.args[1], ast.Constant)
            and node.args[1].value == "repo"
        ):
            lines.append(node.lineno)
    return lines


def test_gui_and_cli_never_reach_the_store_through_the_workspace() -> None:
    # Import contracts cannot see ``workspace.repo``: the store object comes in through an
    # engine attribute, not an import. ARCHITECTURE.md forbids that path as well.
    offenders = []
    for top in ("gui", "cli"):
        for path in sorted((PACKAGE / top).rglob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
            offenders += [f"{path.relative_to(REPO_ROOT)}:{n}" for n in _repo_reads(tree)]
    assert offenders == []


def test_the_repo_scan_sees_every_way_of_reading_it() -> None:
    source = (
        "info = ctx.workspace.repo.get_session(1)\n"
        "def edit(ws):\n"
        "    repo, stored = ws.repo, None\n"
        "    return getattr(ws, 'repo')\n"
        "ok = ws.get_session(1)\n"
        "settings = ProviderSettings(self.ctx.workspace.db)\n"
        "path = args.db\n"
    )
    assert sorted(_repo_reads(ast.parse(source))) == [1, 3, 4, 6]


# -- import cycles ---------------------------------------------------------------------------

# Everything below the GUI: the engine and the floors under it (ARCHITECTURE.md: "import
# cycles are broken by moving code, not by imports inside functions").
ACYCLIC = ("workbench.engine", "workbench.store", "workbench.providers", "workbench.formats",
           "workbench.core", "workbench.errors")


def _cycles(graph: grimp.ImportGraph, prefixes: tuple[str, ...]) -> list[list[str]]:
    """The import cycles among the modules named by ``prefixes``: each strongly connected
    group of two or more modules (Tarjan), with one import line per edge in it."""
    modules = sorted(
        m for m in graph.modules if any(m == p or m.startswith(p + ".") for p in prefixes)
    )
    inside = set(modules)
    edges = {m: sorted(graph.find_modules_directly_imported_by(m) & inside) for m in modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for other in edges[module]:
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in on_stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in modules:
        if module not in index:
            visit(module)
    return [
        [
            f"{a} -> {b} (line {d['line_number']})"
            for a in group
            for b in edges[a]
            if b in group
            for d in graph.get_import_details(importer=a, imported=b)
        ]
        for group in groups
    ]


def test_no_import_cycles_below_the_gui() -> None:
    # grimp sees every import: at module level, inside functions and under TYPE_CHECKING.
    graph = grimp.build_graph("workbench", cache_dir=None)
    assert _cycles(graph, ACYCLIC) == []


@pytest.mark.parametrize(
    "second",
    [
        "def late():\n    from fakecycle import first\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from fakecycle import first\n",
    ],
    ids=["function-level", "type-checking"],
)
def test_the_cycle_check_sees_hidden_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, second: str
) -> None:
    package = tmp_path / "fakecycle"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "first.py").write_text("from fakecycle import second\n")
    (package / "second.py").write_text(second)
    (package / "third.py").write_text("from fakecycle import first\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    graph = grimp.build_graph("fakecycle", cache_dir=None)
    (cycle,) = _cycles(graph, ("fakecycle",))
    assert [line.split(" (")[0] for line in cycle] == [
        "fakecycle.first -> fakecycle.second",
        "fakecycle.second -> fakecycle.first",
    ]


# -- one error tree ----------------------------------------------------------------------------


def _workbench_modules() -> list[ModuleType]:
    import workbench

    modules = [workbench]
    for info in pkgutil.walk_packages(workbench.__path__, "workbench."):
        if info.name.endswith("__main__"):  # running it is the command line itself
            continue
        modules.append(importlib.import_module(info.name))
    return modules


def test_every_exception_class_of_the_workbench_is_in_the_error_tree() -> None:
    from workbench.errors import WorkbenchError

    defined = [
        (module.__name__, name, cls)
        for module in _workbench_modules()
        for name, cls in vars(module).items()
        if inspect.isclass(cls)
        and issubclass(cls, BaseException)
        and cls.__module__ == module.__name__
    ]
    assert len(defined) > 25  # the walk did reach the modules
    outside = [f"{module}.{name}" for module, name, cls in defined
               if not issubclass(cls, WorkbenchError)]
    assert outside == []


def _documented_tree(doc: str) -> dict[str, str | None]:
    """``{class: parent}`` as the tree in ``workbench.errors``'s docstring draws it."""
    parents: dict[str, str | None] = {}
    path: list[str] = []
    for line in doc.splitlines():
        stripped = line.strip()
        if stripped == "WorkbenchError":
            path = ["WorkbenchError"]
            parents["WorkbenchError"] = None
            continue
        if not path or not any(mark in line for mark in ("├── ", "└── ")):
            continue
        start = max(line.find("├── "), line.find("└── "))
        depth = start // 4  # the root is drawn at column 4, each level 4 columns further
        name = line[start + 4:].split()[0]
        del path[depth:]
        parents[name] = path[-1]
        path.append(name)
    return parents


def test_the_error_tree_is_documented_as_it_is() -> None:
    import workbench.errors as errors

    classes = {
        name: cls for name, cls in vars(errors).items()
        if inspect.isclass(cls) and issubclass(cls, BaseException)
        and cls.__module__ == errors.__name__
    }
    drawn = _documented_tree(errors.__doc__ or "")
    actual = {
        name: (None if name == "WorkbenchError" else cls.__bases__[0].__name__)
        for name, cls in classes.items()
    }
    assert drawn == actual


def test_no_workbench_error_shadows_a_standard_name() -> None:
    import asyncio
    import builtins
    import concurrent.futures

    standard = set(dir(builtins)) | set(dir(asyncio)) | set(dir(concurrent.futures))
    import workbench.errors as errors

    clashes = [name for name in vars(errors) if name in standard and name[0].isupper()
               and name.endswith("Error")]
    assert clashes == []
