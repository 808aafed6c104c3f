"""Before the lab kernel boots, the host compiles the P4 programs the guest will load
(the guest sees the host's files read-only); fake tools stand in for p4lang's."""

from __future__ import annotations

from pathlib import Path

import pytest

from pathdiv.experiments.config.load import validate
from pathdiv.experiments.dataplane.bmv2.programs import MODE_PROGRAMS
from pathdiv.experiments.dataplane.bmv2.tools import CLI, COMPILER, SWITCH
from pathdiv.experiments.dataplane.select import choose, prepare_for_lab_kernel
from pathdiv.experiments.plan.runs import expand

# p4c-bm2-ss's interface as pathdiv calls it: `-o JSON --p4runtime-files P4INFO MAIN.p4`
FAKE_COMPILER = """#!/bin/sh
[ "$1" = --version ] && { echo "p4c-bm2-ss"; echo "Version 9.9.9 (fake)"; exit 0; }
while [ $# -gt 0 ]; do
  case "$1" in -o) out=$2; shift;; --p4runtime-files) info=$2; shift;; esac; shift
done
echo '{}' > "$out"; echo 'pkg_info {}' > "$info"; echo "$out" >> "$COMPILED_LOG"
"""


@pytest.fixture
def fake_p4(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "prefix" / "bin"
    bindir.mkdir(parents=True)
    for name in (SWITCH, CLI):
        (bindir / name).write_text("#!/bin/sh\necho fake 1.0\n")
    (bindir / COMPILER).write_text(FAKE_COMPILER)
    for exe in bindir.iterdir():
        exe.chmod(0o755)
    monkeypatch.setenv("P4_PREFIX", str(tmp_path / "prefix"))
    monkeypatch.setenv("PATHDIV_P4_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("COMPILED_LOG", str(tmp_path / "compiled.log"))
    return tmp_path


def p4_lines(wanted: list[str]) -> list[str]:
    """What prepare_for_lab_kernel did for P4 (its first line is the link captures')."""
    lines = prepare_for_lab_kernel(wanted)
    assert lines[0].startswith("link captures: "), lines
    return lines[1:]


def test_the_host_compiles_every_mode_program_once_when_bmv2_will_run(fake_p4: Path) -> None:
    lines = p4_lines(["auto", "nftables"])  # auto: every P4 plane found may be chosen
    assert len(lines) == 1 and str(fake_p4 / "cache") in lines[0], lines
    compiled = (fake_p4 / "compiled.log").read_text().splitlines()
    assert sorted(Path(p).stem for p in compiled) == sorted(set(MODE_PROGRAMS.values()))
    assert p4_lines(["bmv2"])  # again: from the cache, nothing recompiled
    assert len((fake_p4 / "compiled.log").read_text().splitlines()) == len(compiled)


def test_nothing_is_compiled_for_the_nftables_plane(fake_p4: Path) -> None:
    assert p4_lines(["nftables"]) == []
    assert p4_lines(["kernel"]) == []  # its former name
    assert not (fake_p4 / "compiled.log").exists()


def _choice(dataplane: str):
    return choose(expand(validate({"dataplane": dataplane}))[0])


def test_check_resolves_each_plane_or_says_why_it_cannot_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("P4_PREFIX", str(tmp_path / "none"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    auto = _choice("auto")
    assert auto.plane == "nftables" and "simple_switch" in auto.rule
    assert "scripts/install-p4.sh" in auto.hint
    assert _choice("kernel").plane == "nftables"
    bmv2 = _choice("bmv2")
    assert bmv2.plane is None and "install-p4.sh" in bmv2.rule


def test_p4_ebpf_without_its_tools_is_refused_naming_what_is_missing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("P4_PREFIX", str(tmp_path / "none"))
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    choice = _choice("p4-ebpf")
    assert choice.plane is None
    assert "dataplane: p4-ebpf was asked for" in choice.rule
    assert all(tool in choice.rule for tool in ("p4c-ebpf", "clang", "llc")), choice.rule
    assert "install-p4.sh" in choice.rule


def test_flowlet_and_lossy_links_are_refused_on_p4_ebpf_at_check() -> None:
    from pathdiv.experiments.config.load import ConfigError

    with pytest.raises(ConfigError, match=r"dataplane: p4-ebpf: switching.mode: 'flowlet' "
                       r"cannot run on p4-ebpf: its P4 program has no PSA version"):
        validate({"dataplane": "p4-ebpf", "switching": {"mode": "flowlet"}})
    with pytest.raises(ConfigError, match="p4-ebpf switches read before"):
        validate({"dataplane": "p4-ebpf",
                  "topology": {"links": {"core": {"loss_pct": 1.0}}}})
    validate({"dataplane": "p4-ebpf", "switching": {"mode": "spray"}})  # allowed
