"""The package layout: one `pathdiv` namespace, no import circles, every module importable."""

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


def modules() -> dict[str, Path]:
    """Dotted name (pathdiv.…) -> file, for every module of the product's folders."""
    out = {}
    for folder in FOLDERS:
        for path in sorted((REPO / folder).rglob("*.py")):
            rel = path.relative_to(REPO).with_suffix("")
            if not (path.parent / "__init__.py").exists():
                continue  # a script beside the packages (none expected)
            parts = rel.parts[:-1] if rel.name == "__init__" else rel.parts
            out[".".join(("pathdiv", *parts))] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """pathdiv modules `path` imports, at module level or inside functions."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            targets = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in known and t != name}
    return found


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


def test_find_cycle_finds_a_planted_circle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


def test_no_module_imports_itself_back_even_inside_a_function():
    mods = modules()
    graph = {name: imports_of(name, path, set(mods)) for name, path in mods.items()}
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph) or [])


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
    assert sorted(p.name for p in (target / "pathdiv").iterdir()) == sorted(FOLDERS)
    res = subprocess.run(
        [sys.executable, "-c",
         "import sys; sys.path.insert(0, sys.argv[1]); import pathdiv.analysis;"
         " import pathdiv.analysis.stats.spec as m; print(m.__file__)", str(target)],
        capture_output=True, text=True, cwd=tmp_path, timeout=60,
    )
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip().startswith(str(target / "pathdiv" / "analysis")), res.stdout
