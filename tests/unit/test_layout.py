"""The package layout: one `pathdiv` package whose top gives the public API, imports that
run one way (a layer table), no import circles, no function-level import but the heavy
optional ones, every module importable."""

from __future__ import annotations

import ast
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

FOLDERS = ("topologies", "experiments", "analysis", "kernels")
FACE = Path("pathdiv") / "__init__.py"  # the package's top: `import pathdiv` (setup.py)

# The layers, lowest first. A module imports its own unit and units of lower layers only;
# units that share a layer do not import each other. A module's unit is the longest entry
# its dotted name starts with. `analysis.safefiles` (files root opens without following
# links, standard library only) sits at the bottom: the rest of analysis and kernels
# both use it, as analysis/atomic.py, the one writer, is used by experiments.
# `analysis` needs only `topologies` (so `pathdiv analyze` runs without the emulation
# stack); `kernels` builds and boots and needs nothing of `experiments`. Inside
# `experiments` the data flow: what the user wrote (config) ← what will run (plan) ← the
# network's parts (fabric) ← data planes ← the assembled network (network) ← traffic ←
# executing a run ← the cluster's view of a plan ← runner ← the public API
# (pathdiv.experiments.api, the `experiments/api/` folder) ← cli.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("pathdiv.topologies", "pathdiv.analysis.safefiles"),
    ("pathdiv.kernels", "pathdiv.analysis"),
    ("pathdiv.experiments.running",),
    ("pathdiv.experiments.config", "pathdiv.experiments.manifest"),
    ("pathdiv.experiments.plan",),
    ("pathdiv.experiments.fabric",),
    ("pathdiv.experiments.dataplane",),
    ("pathdiv.experiments.network",),
    ("pathdiv.experiments.traffic", "pathdiv.experiments.fidelity"),
    ("pathdiv.experiments.execute",),
    ("pathdiv.experiments.cluster",),
    ("pathdiv.experiments.runner", "pathdiv.experiments.classroom"),
    ("pathdiv.experiments.api",),
    ("pathdiv.experiments.cli", "pathdiv.experiments", "pathdiv"),
)

# Imports that may stay inside a function: packages that are heavy to load or optional on
# a machine (the emulator, plotting, packet crafting, the statistics stack behind
# `pathdiv analyze`). Any other import belongs at the top of its module.
LAZY_ALLOWED = ("mininet", "matplotlib", "scapy", "dpkt", "pathdiv.analysis")


def modules() -> dict[str, Path]:
    """Dotted name (pathdiv.…) -> file, for every module of the product's folders and
    the package's top."""
    out = {"pathdiv": REPO / FACE}
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            if not (path.parent / "__init__.py").exists():
                continue  # a script beside the packages (none expected)
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[".".join(("pathdiv", *parts))] = path
    return out


def _targets(node: ast.AST) -> list[str]:
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
        return [node.module] + [f"{node.module}.{a.name}" for a in node.names]
    return []


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """pathdiv modules `path` imports, at module level or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        found |= {t for t in _targets(node) if t in known and t != name}
    return found


def function_level_imports(path: Path) -> list[tuple[int, str]]:
    """(line, module) of every import inside a function body of `path`."""
    out = []
    for func in ast.walk(ast.parse(path.read_text())):
        if isinstance(func, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for node in ast.walk(func):
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    out += [(node.lineno, t) for t in _targets(node)[:1]]
                    if isinstance(node, ast.Import):
                        out += [(node.lineno, t) for t in _targets(node)[1:]]
    return sorted(set(out))


def unit_of(name: str) -> tuple[int, str]:
    """(layer index, unit) of a dotted module name: the longest entry of LAYERS it starts with."""
    best: tuple[int, str] | None = None
    for level, units in enumerate(LAYERS):
        for unit in units:
            if (name == unit or name.startswith(unit + ".")) and \
                    (best is None or len(unit) > len(best[1])):
                best = (level, unit)
    if best is None:
        raise KeyError(f"{name} is in no layer of LAYERS; add its package there")
    return best


def layer_breaks(graph: dict[str, set[str]]) -> list[str]:
    """'a -> b (why)' for every import of `graph` that climbs a layer or crosses to a sibling."""
    out = []
    for name, targets in sorted(graph.items()):
        level, unit = unit_of(name)
        for target in sorted(targets):
            t_level, t_unit = unit_of(target)
            if t_unit == unit or t_level < level:
                continue
            why = "climbs a layer" if t_level > level else "crosses to a sibling unit"
            out.append(f"{name} -> {target} ({why}: {unit} is below or beside {t_unit})")
    return out


def product_graph(mods: dict[str, Path]) -> dict[str, set[str]]:
    # `from pkg import module` names the module too; keep only the deepest name per import
    return {name: imports_of(name, path, set(mods)) for name, path in mods.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import circle of `graph` as a list of modules, or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                return [*stack[stack.index(nxt):], nxt]
            if nxt not in state and (cycle := visit(nxt)):
                return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def private_uses(path: Path, root: Path = REPO) -> list[str]:
    """'file:line: name' for every private name (a leading underscore, not a dunder) of
    a pathdiv module that `path` imports or reaches through a module it imported."""
    tree = ast.parse(path.read_text())
    aliases: set[str] = set()  # names bound to pathdiv modules
    out = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            aliases |= {a.asname or a.name.split(".")[0] for a in node.names
                        if a.name.startswith("pathdiv")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("pathdiv"):
            for a in node.names:
                if a.name.startswith("_") and not a.name.startswith("__"):
                    out.append(f"{node.lineno}: {node.module}.{a.name}")
                aliases.add(a.asname or a.name)
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            base = node.value
            while isinstance(base, ast.Attribute):
                base = base.value
            if isinstance(base, ast.Name) and base.id in aliases:
                out.append(f"{node.lineno}: {ast.unparse(node)}")
    return [f"{path.relative_to(root)}:{line}" for line in sorted(set(out))]


def test_scripts_and_benchmarks_use_only_the_public_names_of_the_product():
    """scripts/ and benchmarks/ stand where a user stands: what they need of a module is
    made public there (a private helper may change or go without notice)."""
    found = [use for folder in ("scripts", "benchmarks")
             for path in sorted((REPO / folder).rglob("*.py")) for use in private_uses(path)]
    assert not found, "private names of pathdiv modules used outside the product:\n" + \
        "\n".join(found)


def test_private_uses_names_an_imported_and_a_reached_private_name(tmp_path):
    planted = tmp_path / "planted.py"
    planted.write_text("from pathdiv.analysis.capture.pcap import _MAGICS, read_pcap\n"
                       "import pathdiv.analysis.capture.pcap as pcap\n"
                       "pcap._record_offsets(b'', '<', None)\nprint(pcap.__name__)\n")
    assert private_uses(planted, tmp_path) == [
        "planted.py:1: pathdiv.analysis.capture.pcap._MAGICS",
        "planted.py:3: pcap._record_offsets"]


def test_find_cycle_finds_a_planted_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_imports_itself_back_even_inside_a_function():
    graph = product_graph(modules())
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


def test_every_module_has_a_layer_and_imports_only_downwards():
    graph = product_graph(modules())
    assert [unit_of(name) for name in graph]  # raises naming a module outside LAYERS
    breaks = layer_breaks(graph)
    assert not breaks, "imports against the layers (see LAYERS):\n" + "\n".join(breaks)


def test_layer_breaks_names_a_climbing_and_a_sideways_import():
    graph = {"pathdiv.kernels.uml": {"pathdiv.experiments.fabric.environment"},
             "pathdiv.analysis.stats.study": {"pathdiv.kernels.build"},
             "pathdiv.experiments.runner": {"pathdiv.experiments.config.load",
                                            "pathdiv.topologies.fattree"}}
    breaks = layer_breaks(graph)
    assert len(breaks) == 2
    assert breaks[0].startswith("pathdiv.analysis.stats.study -> pathdiv.kernels.build")
    assert "sibling" in breaks[0] and "climbs" in breaks[1]


def test_no_function_level_import_but_the_heavy_optional_ones():
    found = [f"{path.relative_to(REPO)}:{line}: import {target}"
             for path in modules().values()
             for line, target in function_level_imports(path)
             if not any(target == ok or target.startswith(ok + ".") for ok in LAZY_ALLOWED)]
    assert not found, ("imports inside functions (move them to the top of the module, or "
                       "add a heavy optional package to LAZY_ALLOWED):\n" + "\n".join(found))


@pytest.mark.parametrize("planted, expected", [
    ("from pathdiv.experiments.runner import run_plan\n", "climbs a layer"),
    ("def f():\n    import json\n    return json\n", "imports inside functions"),
])
def test_the_layout_tests_fail_on_a_planted_import(tmp_path, planted, expected):
    """A copy of the product with one bad import planted in kernels/build.py: the layer
    and function-level tests above, run on that copy, fail and say why."""
    copy = tmp_path / "copy"
    copy.mkdir()
    for folder in (*FOLDERS, FACE.parent.name):
        shutil.copytree(REPO / folder, copy / folder,
                        ignore=shutil.ignore_patterns("__pycache__", "*.patch"))
    (copy / "tests" / "unit").mkdir(parents=True)
    (copy / "tests" / "__init__.py").write_text("")
    (copy / "tests" / "unit" / "__init__.py").write_text("")
    (copy / "tests" / "conftest.py").write_text(
        f"from pathlib import Path\nREPO = Path({str(copy)!r})\n")
    shutil.copy(Path(__file__), copy / "tests" / "unit" / "test_layout.py")
    build = copy / "kernels" / "build.py"
    build.write_text(build.read_text() + "\n" + planted)
    tests = ["tests/unit/test_layout.py::test_every_module_has_a_layer_and_imports_only_downwards",
             "tests/unit/test_layout.py::test_no_function_level_import_but_the_heavy_optional_ones"]
    res = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                          "--rootdir", str(copy), "-c", "/dev/null", *tests],
                         capture_output=True, text=True, cwd=copy, timeout=300)
    assert res.returncode == 1, res.stdout[-3000:]
    assert "1 failed, 1 passed" in res.stdout, res.stdout[-3000:]
    assert expected in res.stdout and "kernels" in res.stdout, res.stdout[-3000:]


def test_every_module_imports_in_a_fresh_interpreter():
    names = sorted(modules())
    code = ("import importlib, sys\nbad = []\n"
            f"for n in {names!r}:\n"
            "    try:\n        importlib.import_module(n)\n"
            "    except Exception as e:\n        bad.append(f'{n}: {type(e).__name__}: {e}')\n"
            "print('\\n'.join(bad)); sys.exit(1 if bad else 0)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd="/", timeout=300)
    assert res.returncode == 0, res.stdout + res.stderr


@pytest.mark.slow
def test_pip_install_puts_one_pathdiv_package_into_site_packages(tmp_path):
    source, target = tmp_path / "source", tmp_path / "site"
    # a copy, so the build's own build/ folder does not land in the checkout
    shutil.copytree(REPO, source, ignore=shutil.ignore_patterns(
        ".git", ".venv", "results", "build", "*.egg-info", "__pycache__", ".*_cache"))
    res = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
         "--no-deps", "--use-pep517", "--target", str(target), str(source)],
        capture_output=True, text=True, timeout=600,
        env=dict(os.environ, PIP_NO_INPUT="1"),
    )
    assert res.returncode == 0, res.stderr[-3000:]
    top = sorted(p.name for p in target.iterdir() if not p.name.endswith(".dist-info"))
    assert top == ["bin", "pathdiv"] or top == ["pathdiv"], top
    assert sorted(p.name for p in (target / "pathdiv").iterdir()
                  if p.name != "__pycache__") == sorted([*FOLDERS, "__init__.py"])
    res = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.path.insert(0, sys.argv[1]); import pathdiv.analysis;"
         " import pathdiv.analysis.stats.spec as m; print(m.__file__)", str(target)],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().startswith(str(target / "pathdiv" / "analysis")), res.stdout


def test_import_pathdiv_gives_the_public_api_and_loads_it_only_when_asked():
    code = ("import sys, pathdiv, pathdiv.analysis.results\n"
            "assert not [m for m in sys.modules if m.startswith('pathdiv.experiments')]\n"
            "from pathdiv.experiments import api\n"
            "assert pathdiv.run is api.run and pathdiv.network is api.network\n"
            "assert sorted(dir(pathdiv)) == sorted(api.__all__)\n"
            "try:\n    pathdiv.runner\nexcept AttributeError as exc:\n    print(exc)\n")
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd="/", timeout=300)
    assert res.returncode == 0, res.stderr
    assert "no attribute 'runner'; its names are the public API's" in res.stdout
