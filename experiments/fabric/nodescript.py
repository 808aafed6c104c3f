"""A node's configuration commands as one script: batch files, few process executions.

Configuration is generated as argv lists (`fabric/hostsetup.py`, `fabric/shaping.py`,
the data planes), which stay the readable, testable form. `render` turns one node's
ordered list into a shell script that runs them with as few executions as possible,
because every exec costs (in the lab kernel, User-Mode Linux, 7-35 ms on the real clock;
under the emulated CPU of the former QEMU VM tens of milliseconds):

* consecutive `ip` / `tc` commands become one `ip -batch FILE` / `tc -batch FILE`,
  whose lines are exactly the argv lists minus the program name;
* `sysctl -w key=value` becomes writes to /proc/sys/key (shell builtins: no process);
* anything else (`ethtool`, `nft -f`) runs as it is.

The script runs inside the node's Mininet shell, in a subshell, in one round trip
(`run_scripts` sends every node's script before waiting for any). A failing step
prints a marker naming the command it stands for; `failure_message` turns that, and
the `Command failed FILE:LINE` of a batch, into an error naming node, command and line.

Each script keeps a state file beside it (`{stem}.state`, `state_path`): a line
`started`, then `step N of M` as each step ends (a shell builtin appending to a file,
no process). It is the sign of life of a build whose scripts all run at once: in the
lab kernel nothing else is written until they end, and its clock stands still while
they compute (experiments/execute/lab_runs.py, the frozen-guest watchdog); after a
failed or cut-off build it says how far each node got.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BATCHED = ("ip", "tc")
FAIL_MARK = "pathdiv-failed: "
_UNSAFE = re.compile(r"[\s\"'#\\]")
_BATCH_FAILED = re.compile(r"Command failed (\S+):(\d+)")


class ScriptError(RuntimeError):
    """A node script failed; the message names the node, the command and the line."""


@dataclass(frozen=True)
class NodeScript:
    """A rendered script, the batch files it reads (path -> text), and its step count."""

    script: str
    files: dict[str, str] = field(default_factory=dict)
    execs: int = 0


def batch_text(commands: list[list[str]], program: str) -> str:
    """`program -batch` file running `commands` (argv lists starting with `program`)."""
    lines = []
    for argv in commands:
        if not argv or argv[0] != program:
            raise ValueError(f"`{shlex.join(argv)}` is not a {program} command")
        bad = [a for a in argv[1:] if not a or _UNSAFE.search(a)]
        if bad:
            raise ValueError(f"`{shlex.join(argv)}`: {bad[0]!r} cannot go in a batch file")
        lines.append(" ".join(argv[1:]))
    return "\n".join(lines) + "\n"


def sysctl_writes(argv: list[str]) -> list[tuple[str, str]]:
    """(/proc/sys path, value) for each key=value of a `sysctl -w`/`-qw` argv."""
    if not argv or argv[0] != "sysctl":
        raise ValueError(f"`{shlex.join(argv)}` is not a sysctl command")
    letters = "".join(a[1:] for a in argv[1:] if a.startswith("-"))
    if "w" not in letters or set(letters) - {"q", "w"}:
        raise ValueError(f"`{shlex.join(argv)}`: only `sysctl -w`/`-qw` can be rendered")
    writes = []
    for item in argv[1:]:
        if item.startswith("-"):
            continue
        key, sep, value = item.partition("=")
        if not sep or "/" in key or not key:
            raise ValueError(f"`{shlex.join(argv)}`: {item!r} is not key=value")
        writes.append(("/proc/sys/" + key.replace(".", "/"), value))
    return writes


def _groups(commands: list[list[str]]) -> list[list[list[str]]]:
    """Consecutive commands of one batchable program together; others alone."""
    groups: list[list[list[str]]] = []
    for argv in commands:
        batchable = argv[0] in BATCHED and argv[1:2] != ["-batch"]
        if batchable and groups and groups[-1][0][0] == argv[0]:
            groups[-1].append(argv)
        else:
            groups.append([argv])
    return groups


def _guarded(line: str, shown: str) -> str:
    return f"{line} || pd_fail {shlex.quote(shown)}"


def state_path(stem: str) -> str:
    """The state file of the script rendered with `stem` (see the module's docstring)."""
    return f"{stem}.state"


_STEP = re.compile(r"step (\d+) of (\d+)\s*$")


def script_ended(state_tail: str) -> bool:
    """Whether a state file ending in `state_tail` says its script ran its last step
    (`started` alone counts as still running)."""
    lines = state_tail.strip().splitlines()
    if not lines:
        return False
    last = lines[-1].strip()
    if last == "started":
        return False
    found = _STEP.search(last)
    return found is not None and found.group(1) == found.group(2)


def render(commands: list[list[str]], stem: str, title: str = "") -> NodeScript:
    """The script for `commands` (in order); batch files are named `{stem}.{n}.{program}`,
    its progress goes to `state_path(stem)` (`started`, then `step N of M` as each ends)."""
    groups = _groups(commands)
    state = shlex.quote(state_path(stem))
    lines = [f"# {title or stem}: generated by pathdiv; runs in the node's namespace",
             f'pd_fail() {{ echo "{FAIL_MARK}$1"; exit 1; }}',
             f'pd_step() {{ echo "$1" >> {state}; }}',
             f"echo started > {state}"]
    files: dict[str, str] = {}
    execs = 0
    for n, group in enumerate(groups, 1):
        program = group[0][0]
        done = f'; pd_step "step {n} of {len(groups)}"'
        if program == "sysctl":
            writes = sysctl_writes(group[0])
            for i, (path, value) in enumerate(writes, 1):
                key = path.removeprefix("/proc/sys/").replace("/", ".")
                lines.append(_guarded(f"echo {shlex.quote(value)} > {shlex.quote(path)}",
                                      f"sysctl -w {key}={value}")
                             + (done if i == len(writes) else ""))
            continue
        execs += 1
        if program in BATCHED and group[0][1:2] != ["-batch"]:
            path = f"{stem}.{n}.{program}"
            files[path] = batch_text(group, program)
            argv = [program, "-batch", path]
        else:
            argv = group[0]
        lines.append(_guarded(shlex.join(argv), shlex.join(argv)) + done)
    return NodeScript("\n".join(lines) + "\n", files, execs)


def failure_message(node: str, output: str, rc: str, files: dict[str, str],
                    command: str = "the node script") -> str:
    """What failed in `node`: the command (from the script's failure marker, else
    `command`), and for a batch (`files`: path -> text) the failing line's number and
    text, then what the command said."""
    shown, said = command, []
    for line in output.splitlines():
        if line.startswith(FAIL_MARK):
            shown = line.removeprefix(FAIL_MARK)
        elif line.strip():
            said.append(line.strip())
    where = ""
    found = _BATCH_FAILED.search(output)
    if found:
        number = int(found.group(2))
        batch_lines = files.get(found.group(1), "").splitlines()
        where = f" at line {number}"
        if 0 < number <= len(batch_lines):
            where += f" (`{batch_lines[number - 1]}`)"
    text = " | ".join(said)[-800:] or "nothing"
    return f"{node}: `{shown}` failed{where} (exit {rc.strip() or '?'}): {text}"


def write(rendered: NodeScript, path: Path) -> None:
    """Write the script to `path` and its batch files to where the script reads them."""
    path.parent.mkdir(parents=True, exist_ok=True)
    for file, text in rendered.files.items():
        Path(file).write_text(text)
    path.write_text(rendered.script)


def run_scripts(scripts: list[tuple[str, Any, Path, NodeScript]]) -> None:
    """Run each (name, Mininet node, script path, rendered) in its node, all at once.

    Every script is sent before any is waited for, so the nodes configure in parallel;
    raises ScriptError for the first that failed (in the given order)."""
    for _, node, path, rendered in scripts:
        write(rendered, path)
        node.sendCmd(f"( . {shlex.quote(str(path))} ) 2>&1; echo __rc=$?")
    failures = []
    for name, node, _, rendered in scripts:
        out = node.waitOutput()
        body, _, rc = out.rpartition("__rc=")
        if rc.strip() != "0":
            failures.append(failure_message(name, body, rc, rendered.files))
    if failures:
        more = f" (and {len(failures) - 1} more node(s) failed)" if len(failures) > 1 else ""
        raise ScriptError(failures[0] + more)


def batch_commands(program: str, text: str) -> list[list[str]]:
    """The argv lists a `program -batch` file stands for (the inverse of `batch_text`,
    for batches generated as text, e.g. the nftables plane's routes)."""
    return [[program, *line.split()] for line in text.splitlines() if line.strip()]
