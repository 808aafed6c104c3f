"""The link captures' program: which tool `capture.tool` gives, linkcap's command line and
closing report, and its build (with the machine's C compiler, into a cache, once)."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from pathdiv.experiments.fabric.linkcap import (
    LinkcapError,
    LinkCapture,
    binary_path,
    build_linkcap,
    choose_tool,
    linkcap_argv,
    parse_report,
    source_digest,
)

BUILT = Path("/cache/tools/linkcap-x/linkcap")


def test_auto_takes_linkcap_where_it_is_built_and_tcpdump_where_not() -> None:
    assert choose_tool("auto", BUILT) == "linkcap"
    assert choose_tool("auto", None, "no C compiler") == "tcpdump"
    assert choose_tool("tcpdump", BUILT) == "tcpdump"
    assert choose_tool("linkcap", BUILT) == "linkcap"


def test_insisting_on_linkcap_where_it_cannot_be_built_says_why_and_what_to_set() -> None:
    with pytest.raises(LinkcapError, match=r"no C compiler.*capture.tool: auto"):
        choose_tool("linkcap", None, "no C compiler (cc)")
    with pytest.raises(LinkcapError, match="'wireshark' is not one of auto, linkcap"):
        choose_tool("wireshark", BUILT)


def test_the_command_line_holds_one_quadruple_per_link() -> None:
    links = [LinkCapture("/proc/7/ns/net", "e1-eth2", 500, Path("/r/e1-eth2.pcap")),
             LinkCapture("/proc/9/ns/net", "a1-eth0", 20, Path("/r/a1-eth0.pcap"))]
    assert linkcap_argv(BUILT, 96, 4096, links) == [
        str(BUILT), "96", "4096", "/proc/7/ns/net", "e1-eth2", "500", "/r/e1-eth2.pcap",
        "/proc/9/ns/net", "a1-eth0", "20", "/r/a1-eth0.pcap"]
    with pytest.raises(ValueError, match="a1-eth0"):
        linkcap_argv(BUILT, 96, 4096, [links[1]._replace(max_packets=0)])


def test_the_report_gives_drops_full_files_and_errors_as_the_stop_records_them() -> None:
    report = parse_report(
        "linkcap: listening on 3 interfaces\n"
        "linkcap: e1-eth2: 1200 captured, 0 dropped by kernel, open\n"
        "linkcap: a1-eth0: 20 captured, 3 dropped by kernel, full\n"
        "linkcap: c1-eth1: 0 captured, 5 dropped by kernel, open\n")
    assert report == {"dropped_by_kernel": 8, "files_full": ["a1-eth0"],
                      "captured": {"e1-eth2": 1200, "a1-eth0": 20, "c1-eth1": 0},
                      "errors": []}
    failed = parse_report("linkcap: error: writing /r/x.pcap: No space left on device\n")
    assert failed["errors"] == ["linkcap: error: writing /r/x.pcap: No space left on device"]


def test_a_changed_source_or_flag_is_another_build() -> None:
    assert source_digest(b"int main;") != source_digest(b"int main; ")
    assert source_digest(b"x", ("-O2",)) != source_digest(b"x", ("-O0",))
    assert binary_path(Path("/c")).parent.parent == Path("/c/tools")


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="no C compiler (cc or gcc) to build linkcap")
def test_linkcap_is_built_once_into_its_cache_and_checks_its_arguments(tmp_path: Path) -> None:
    logged: list[str] = []
    binary = build_linkcap(tmp_path, logged.append)
    assert binary == binary_path(tmp_path) and len(logged) == 1
    built_at = binary.stat().st_mtime_ns
    assert build_linkcap(tmp_path, logged.append) == binary and len(logged) == 1
    assert binary.stat().st_mtime_ns == built_at
    assert [p.name for p in (tmp_path / "tools").iterdir()] == [binary.parent.name]
    assert binary.parent.stat().st_mode & 0o005 == 0o005  # the guest's user may run it
    usage = subprocess.run([str(binary)], capture_output=True, text=True)
    assert usage.returncode == 2 and "usage: linkcap SNAPLEN" in usage.stderr
    bad = subprocess.run([str(binary), "96", "4096", "/proc/1/ns/net", "lo", "0",
                          str(tmp_path / "x.pcap")], capture_output=True, text=True)
    assert bad.returncode == 2
    assert "COUNT must be a positive integer, not 0" in bad.stderr
    assert not (tmp_path / "x.pcap").exists()


def test_an_unwritable_cache_is_refused_with_the_reason(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    with pytest.raises(LinkcapError, match="not writable here"):
        build_linkcap(blocked)


@pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                    reason="no C compiler (cc or gcc) to build linkcap")
def test_a_program_others_could_have_replaced_is_not_run(tmp_path: Path) -> None:
    binary = build_linkcap(tmp_path)
    binary.parent.chmod(0o777)  # anyone could put another program there
    with pytest.raises(LinkcapError, match=r"not safe to run as root.*writable by group"):
        build_linkcap(tmp_path)
    binary.parent.chmod(0o755)
    assert build_linkcap(tmp_path) == binary
