"""Every boot of the lab kernel finds pathdiv's modules compiled (kernels/guest_bytecode.py):
the host compiles the checkout's packages beside their sources, as the checkout's owner,
without descending into linked folders."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

from pathdiv.kernels.guest_bytecode import PACKAGES, compile_checkout, compile_command


def _checkout(root: Path) -> Path:
    repo = root / "repo"
    for name in PACKAGES:
        (repo / name / "sub").mkdir(parents=True)
        (repo / name / "__init__.py").write_text("X = 1\n")
        (repo / name / "sub" / "mod.py").write_text("def f():\n    return 2\n")
    return repo


def _compiled(source: Path) -> bool:
    return Path(importlib.util.cache_from_source(str(source))).is_file()


def test_every_module_of_the_packages_is_compiled_beside_its_source(tmp_path):
    repo = _checkout(tmp_path)
    (repo / "scripts").mkdir()
    (repo / "scripts" / "tool.py").write_text("Y = 3\n")
    assert compile_checkout(repo)
    for name in PACKAGES:
        assert _compiled(repo / name / "__init__.py"), name
        assert _compiled(repo / name / "sub" / "mod.py"), name
    assert not _compiled(repo / "scripts" / "tool.py")  # only the packages the guest imports


def test_a_stale_compiled_file_is_compiled_again(tmp_path):
    repo = _checkout(tmp_path)
    source = repo / "experiments" / "sub" / "mod.py"
    assert compile_checkout(repo)
    cached = Path(importlib.util.cache_from_source(str(source)))
    before = cached.read_bytes()
    source.write_text("def f():\n    return 3\n")
    os.utime(source, (1e9 + 1, 1e9 + 1))  # another timestamp than the compiled one holds
    assert compile_checkout(repo)
    assert cached.read_bytes() != before


def test_linked_folders_are_not_entered(tmp_path):
    repo = _checkout(tmp_path)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "mod.py").write_text("Z = 4\n")
    (repo / "analysis" / "linked").symlink_to(outside)
    (repo / "topologies").rename(tmp_path / "topologies-real")
    (repo / "topologies").symlink_to(tmp_path / "topologies-real")
    assert str(repo / "topologies") not in compile_command(repo)
    assert compile_checkout(repo)
    assert not _compiled(outside / "mod.py")
    assert not _compiled(tmp_path / "topologies-real" / "__init__.py")
    assert _compiled(repo / "analysis" / "__init__.py")
