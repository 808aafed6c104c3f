"""Every malformed or hostile config of tests/hostile_configs.py is refused by the real
`pathdiv check`: exit 2, one message naming the key and what is allowed, no traceback,
without a runaway (CPU time and memory bounded), and never showing the content of a file
the config names."""

from __future__ import annotations

import os
import re
import time
import tracemalloc
from pathlib import Path

import pytest

from pathdiv.experiments.cli import main
from pathdiv.experiments.config.load import load
from tests.conftest import REPO, open_for_guest
from tests.hostile_configs import CASES, FILES, SECRET

# a refusal uses at most this much CPU time (most take milliseconds; the slowest, a
# thousand events, about 1-2 s under tracemalloc). CPU time, not wall time: a busy host
# (CI beside a compile: 6.2 s of wall time once) slows the clock, not the work.
CPU_SECONDS = 10.0
# a FIFO is refused without waiting for a writer (who never comes): a minute of wall time
# tells such a wait from a busy host
WAIT_SECONDS = 60.0
MEGABYTES = 200      # and allocates at most this much Python memory


def _folder(tmp_path: Path) -> Path:
    for name, content in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, tuple) and content[0] == "link":
            path.symlink_to(content[1])
        elif isinstance(content, tuple) and content[0] == "fifo":
            os.mkfifo(path)
        elif isinstance(content, tuple):
            path.mkdir()
        else:
            path.write_text(str(content))
    return tmp_path


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_hostile_config_is_refused_with_one_clear_line(case, tmp_path, capsys):
    name, text, args, expected = case
    folder = _folder(tmp_path)
    files = [a.removeprefix("FILE:") for a in args if a.startswith("FILE:")]
    args = [a for a in args if not a.startswith("FILE:")]
    config = folder / (files[0] if files else "hostile.yaml")
    if isinstance(text, bytes):
        config.write_bytes(text)
    else:
        config.write_text(text)
    tracemalloc.start()
    t0 = time.process_time()
    try:
        code = main(["check", str(config), *args])
        took = time.process_time() - t0
        peak = tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()
    out, err = capsys.readouterr()
    assert code == 2, (out, err)
    assert "Traceback" not in err and "valid." not in out
    assert err.startswith("pathdiv: "), err
    pattern = expected.replace("{dir}", re.escape(str(folder)))
    lines = [line.removeprefix("  - ") for line in err.splitlines()]
    assert any(re.search(pattern, line) for line in lines), err
    assert len(err) < 4000  # no echo of a bomb, a long value or thousands of problems
    assert SECRET not in err
    assert took < CPU_SECONDS, f"{name} used {took:.1f} s of CPU"
    assert peak < MEGABYTES, f"{name} allocated {peak:.0f} MB"


def test_an_unexpected_error_is_one_line_and_debug_shows_the_traceback(monkeypatch, capsys):
    import pathdiv.experiments.cli as cli

    def broken(args):
        raise KeyError("k")

    monkeypatch.setattr(cli, "cmd_keys", broken)
    parser = cli.build_parser
    monkeypatch.setattr(cli, "build_parser", lambda: _with(parser(), broken))
    assert main(["keys"]) == 2
    err = capsys.readouterr().err
    assert err.splitlines() == ["pathdiv: unexpected KeyError ('k'); nothing more was "
                                "started. Run again with --debug for the traceback, and "
                                "report it"]
    with pytest.raises(KeyError):
        main(["--debug", "keys"])


def _with(parser, func):
    for action in parser._subparsers._group_actions:
        action.choices["keys"].set_defaults(func=func)
    return parser


def test_a_config_that_is_a_device_is_refused(capsys):
    assert main(["check", "/dev/zero"]) == 2
    assert "/dev/zero is not a regular file; a config is a YAML file" in capsys.readouterr().err


def test_a_cdf_file_is_read_relative_to_the_config_not_the_working_directory(
        tmp_path, monkeypatch, capsys):
    (tmp_path / "sizes.cdf").write_text("1000 0\n2000 0.5\n5000 1\n")
    config = tmp_path / "c.yaml"
    config.write_text("workload: {pattern: poisson, sizes: sizes.cdf, duration_s: 2}\n"
                      "topology: {links: {host: {bw_mbps: 20}}}\n")
    monkeypatch.chdir(REPO)
    assert main(["check", str(config)]) == 0, capsys.readouterr().err
    assert not os.path.exists(REPO / "sizes.cdf")


def test_a_config_that_is_a_fifo_is_refused_at_once(tmp_path, capsys):
    """open() of a FIFO waits for a writer: `check` would hang forever."""
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    started = time.monotonic()
    assert main(["check", str(fifo)]) == 2
    assert time.monotonic() - started < WAIT_SECONDS
    assert f"{fifo} is not a regular file; a config is a YAML file" in capsys.readouterr().err


def test_a_fifo_as_the_results_folder_is_refused_at_once(tmp_path, capsys):
    config = tmp_path / "c.yaml"
    config.write_text("name: fifo\n")
    os.mkfifo(tmp_path / "out")
    started = time.monotonic()
    assert main(["run", str(config), "--out", str(tmp_path / "out"), "--no-analyze"]) != 0
    assert time.monotonic() - started < WAIT_SECONDS
    assert f"{tmp_path}/out exists and is not a folder" in capsys.readouterr().err


def test_a_set_on_an_aliased_tier_changes_that_tier_alone(tmp_path):
    """edge and core written as aliases of the host tier: YAML hands the three the same
    mapping, and a --set of the host tier's rate would have changed all three."""
    config = tmp_path / "alias.yaml"
    config.write_text("name: alias\ntopology:\n  links:\n    host: &t {bw_mbps: 20}\n"
                      "    edge: *t\n    core: *t\n")
    cfg = load(config, ["topology.links.host.bw_mbps=5"])
    assert {tier: link["bw_mbps"] for tier, link in cfg.data["topology"]["links"].items()} \
        == {"host": 5, "edge": 20, "core": 20}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root (run as through sudo)")
def test_through_sudo_a_config_or_cdf_the_user_may_not_read_is_refused(
        tmp_path, monkeypatch, capsys):
    """`sudo pathdiv check /root/private.yaml` must not show what root reads there."""
    monkeypatch.setenv("SUDO_UID", "4321")
    monkeypatch.setenv("SUDO_GID", "4322")
    open_for_guest(tmp_path)
    private = tmp_path / "private.yaml"
    private.write_text("just the first words of a secret\n")
    private.chmod(0o600)
    assert main(["check", str(private)]) == 2
    err = capsys.readouterr().err
    assert "uid 4321, who ran pathdiv through sudo, may not read it" in err
    assert "secret" not in err
    (tmp_path / "private.cdf").write_text("1 0\n2 1\n")
    (tmp_path / "private.cdf").chmod(0o600)
    config = tmp_path / "c.yaml"
    config.write_text("workload: {pattern: poisson, sizes: private.cdf, duration_s: 1}\n")
    assert main(["check", str(config)]) == 2
    assert "private.cdf: uid 4321, who ran pathdiv through sudo, may not read it" in \
        capsys.readouterr().err
