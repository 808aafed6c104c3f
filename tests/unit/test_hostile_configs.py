"""Every malformed or hostile config of tests/hostile_configs.py is refused by the real
`pathdiv check`: exit 2, one message naming the key and what is allowed, no traceback,
quickly, and never showing the content of a file the config names."""

from __future__ import annotations

import os
import re
import time
import tracemalloc
from pathlib import Path

import pytest

from pathdiv.experiments.cli import main
from tests.conftest import REPO
from tests.hostile_configs import CASES, FILES, SECRET

SECONDS = 5.0        # a refusal takes at most this (most take milliseconds)
MEGABYTES = 200      # and allocates at most this much Python memory


def _folder(tmp_path: Path) -> Path:
    for name, content in FILES.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, tuple) and content[0] == "link":
            path.symlink_to(content[1])
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
    t0 = time.monotonic()
    try:
        code = main(["check", str(config), *args])
        took = time.monotonic() - t0
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
    assert took < SECONDS, f"{name} took {took:.1f} s"
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
