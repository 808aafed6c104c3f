"""The lab VM: build the pathdiv kernel from kernels/ and run commands in a VM booted on it.

The lab kernel is Debian's linux-source-6.12 plus the patch series in kernels/patches
(MPTCP schedulers ``rb`` and ``roundrobin``) and the config fragment kernels/pathdiv.config
on top of virtme-ng's minimal config. Images are cached by a hash of everything that goes
into them, so a second build is a no-op.

Pure parts (the recipe hash, patch reading, accelerator choice, command lines) are kept
apart from the functions that run processes (:func:`build_lab_kernel`, :func:`run_in_lab`).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from pathdiv.experiments.fabric.environment import OWNER_ENV

REPO_DIR = Path(__file__).resolve().parents[1]
KERNELS_DIR = REPO_DIR / "kernels"
SOURCE_PACKAGE = "linux-source-6.12"
SOURCE_TARBALL = Path("/usr/src/linux-source-6.12.tar.xz")
CACHE_DIR = Path(os.environ.get("PATHDIV_CACHE", "/var/cache/pathdiv"))
BUILD_DIR = CACHE_DIR / "kernel-build"
IMAGES_DIR = CACHE_DIR / "kernels"
SCHEDULERS_SYSCTL = Path("/proc/sys/net/mptcp/available_schedulers")
# Fixed build identity so two builds of one recipe give the same image.
BUILD_ENV = {
    "KBUILD_BUILD_TIMESTAMP": "2025-01-01 00:00:00 UTC",
    "KBUILD_BUILD_USER": "pathdiv",
    "KBUILD_BUILD_HOST": "pathdiv",
    "KBUILD_BUILD_VERSION": "1",
}
CONTROL_DIR = ".labvm"

Log = Callable[[str], None]


class LabKernelError(RuntimeError):
    """The lab kernel cannot be built, or the VM cannot run the command."""


# --------------------------------------------------------------------------- pure parts


@dataclass(frozen=True)
class KernelRecipe:
    """Everything that determines the lab kernel image."""

    source_version: str
    patches: tuple[tuple[str, bytes], ...]
    config_fragment: bytes
    configurator: str

    def digest(self) -> str:
        """Hex hash naming the cached image: source version + patches + config."""
        h = hashlib.sha256()
        for part in (
            b"pathdiv-lab-kernel-1",
            self.source_version.encode(),
            self.configurator.encode(),
            self.config_fragment,
        ):
            h.update(len(part).to_bytes(8, "big") + part)
        for name, text in self.patches:
            h.update(len(name).to_bytes(8, "big") + name.encode())
            h.update(len(text).to_bytes(8, "big") + text)
        return h.hexdigest()[:16]


def new_file_from_patch(patch_text: str, path: str) -> str:
    """Return the contents of a file that a unified diff creates (``--- /dev/null``)."""
    lines = patch_text.splitlines()
    for i, line in enumerate(lines):
        if line == f"+++ b/{path}" and i > 0 and lines[i - 1] == "--- /dev/null":
            body = []
            for hunk_line in lines[i + 1 :]:
                if hunk_line.startswith("@@"):
                    continue
                if not hunk_line.startswith("+"):
                    break
                body.append(hunk_line[1:])
            return "\n".join(body) + "\n"
    raise LabKernelError(
        f"the patch does not create {path!r} (no '--- /dev/null' / '+++ b/{path}' pair); "
        "regenerate kernels/patches with git format-patch"
    )


def fragment_options(fragment: str) -> dict[str, str]:
    """``CONFIG_X=value`` lines of a config fragment, as {name: value}."""
    options = {}
    for line in fragment.splitlines():
        line = line.strip()
        if line.startswith("CONFIG_") and "=" in line:
            name, value = line.split("=", 1)
            options[name] = value
    return options


def disabled_options(fragment: str) -> list[str]:
    """``# CONFIG_X is not set`` lines of a config fragment, as option names."""
    names = []
    for line in fragment.splitlines():
        words = line.split()
        if len(words) == 5 and words[0] == "#" and words[2:] == ["is", "not", "set"]:
            names.append(words[1])
    return names


def missing_options(fragment: str, config: str) -> list[str]:
    """Fragment options that the final .config does not carry as the fragment says."""
    have = fragment_options(config)
    wrong = [f"{k}={v}" for k, v in fragment_options(fragment).items() if have.get(k) != v]
    return wrong + [f"{k} unset" for k in disabled_options(fragment) if k in have]


@dataclass(frozen=True)
class Accel:
    """How QEMU runs the guest: ``kvm`` or ``tcg``, and why."""

    name: str
    reason: str


def choose_accel(kvm_usable: bool, modules: Iterable[str], cpu_flags: Iterable[str]) -> Accel:
    """KVM when a standard guest can run on it, else TCG.

    ``/dev/kvm`` is not enough: under a PVM host (module ``kvm_pvm``) only PVM guests run.
    A standard guest needs kvm_intel/kvm_amd and the vmx/svm CPU flag.
    """
    modules, cpu_flags = set(modules), set(cpu_flags)
    if not kvm_usable:
        return Accel("tcg", "/dev/kvm is missing or not read-writable")
    if "kvm_pvm" in modules:
        return Accel("tcg", "/dev/kvm belongs to kvm_pvm, which runs only PVM guests")
    if not ({"kvm_intel", "kvm_amd"} & modules) or not ({"vmx", "svm"} & cpu_flags):
        return Accel("tcg", "no kvm_intel/kvm_amd module with vmx/svm CPU support")
    return Accel("kvm", "/dev/kvm with hardware virtualisation")


def guest_script(argv: Sequence[str], cwd: Path, control: Path,
                 env: dict[str, str] | None = None) -> str:
    """Shell script run in the guest: the command's status and output go to ``control``.

    ``env`` is exported to the command (e.g. what the host knows about the VM).
    """
    c = shlex.quote(str(control))
    exports = "".join(f"export {k}={shlex.quote(v)}\n" for k, v in (env or {}).items())
    return (
        "#!/bin/sh\n"
        f"{exports}"
        f"uname -r > {c}/release\n"
        f"cd {shlex.quote(str(cwd))} || exit 111\n"
        f"{shlex.join(argv)} > {c}/stdout 2> {c}/stderr\n"
        f"echo $? > {c}/rc.tmp && mv {c}/rc.tmp {c}/rc\n"
    )


def vng_command(
    vng: str,
    kernel: Path,
    script: Path,
    share: Path,
    accel: Accel,
    cpus: int,
    memory_mb: int,
) -> list[str]:
    """The virtme-ng command line booting ``kernel`` on the host root and running ``script``."""
    argv = [vng, "--run", str(kernel), "--verbose", "--cpus", str(cpus),
            "--memory", f"{memory_mb}M"]
    argv += ["--rwdir", str(share), "--cwd", "/"]
    if accel.name == "tcg":
        argv += ["--disable-kvm", "--qemu-opts=-accel tcg,thread=multi"]
    argv += ["--exec", f"sh {shlex.quote(str(script))}"]
    return argv


def parse_schedulers(text: str) -> list[str]:
    return text.split()


# ------------------------------------------------------------------- reading the machine


def available_schedulers(path: Path = SCHEDULERS_SYSCTL) -> list[str]:
    """MPTCP schedulers of the running kernel, e.g. ``['default']`` on a stock kernel.

    Empty when the kernel has no MPTCP scheduler support (no sysctl file).
    """
    try:
        return parse_schedulers(path.read_text())
    except FileNotFoundError:
        return []


def detect_accel() -> Accel:
    """Inspect this machine and choose the accelerator (see :func:`choose_accel`)."""
    kvm_usable = os.access("/dev/kvm", os.R_OK | os.W_OK)
    modules = os.listdir("/sys/module") if os.path.isdir("/sys/module") else []
    flags: set[str] = set()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags.update(line.split(":", 1)[1].split())
                break
    except OSError:
        pass
    return choose_accel(kvm_usable, modules, flags)


def _tool(name: str) -> str:
    """A command from the venv (virtme-ng is a PyPI package) or the PATH."""
    local = Path(sys.executable).parent / name
    if local.exists():
        return str(local)
    found = shutil.which(name)
    if not found:
        raise LabKernelError(
            f"{name} not found next to {sys.executable} or on PATH; "
            "install it with `make setup` (virtme-ng is in setup.py)"
        )
    return found


def missing_vm_tools() -> list[str]:
    """Programs the lab VM needs (QEMU, virtme-ng) that this machine lacks, with the fix."""
    missing = [] if shutil.which("qemu-system-x86_64") else ["qemu-system-x86_64 (make setup)"]
    try:
        _tool("vng")
    except LabKernelError:
        missing.append("vng (virtme-ng, make setup)")
    return missing


def _source_version() -> str:
    try:
        out = subprocess.run(
            ["dpkg-query", "-W", "-f", "${Version}", SOURCE_PACKAGE],
            capture_output=True, text=True, check=True,
        )
    except (OSError, subprocess.CalledProcessError) as exc:
        raise LabKernelError(
            f"cannot read the version of {SOURCE_PACKAGE} ({exc}); "
            f"install it with `apt-get install {SOURCE_PACKAGE}` (scripts/install-deps.sh)"
        ) from exc
    return out.stdout.strip()


def _configurator_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"virtme-ng {version('virtme-ng')}"
    except PackageNotFoundError as exc:
        raise LabKernelError("virtme-ng is not installed; run `make setup`") from exc


def current_recipe(kernels_dir: Path = KERNELS_DIR) -> KernelRecipe:
    patches = tuple(
        (p.name, p.read_bytes()) for p in sorted((kernels_dir / "patches").glob("*.patch"))
    )
    if not patches:
        raise LabKernelError(
            f"no patches in {kernels_dir / 'patches'}; expected 000N-*.patch files")
    return KernelRecipe(
        source_version=_source_version(),
        patches=patches,
        config_fragment=(kernels_dir / "pathdiv.config").read_bytes(),
        configurator=_configurator_version(),
    )


def find_lab_kernel(recipe: KernelRecipe | None = None) -> Path | None:
    """The cached bzImage for the current patches and config, or None if not built yet."""
    image = IMAGES_DIR / (recipe or current_recipe()).digest() / "bzImage"
    return image if image.is_file() else None


def kernel_release(image: Path) -> str:
    """``uname -r`` of a cached image (recorded at build time)."""
    release = image.parent / "kernel.release"
    return release.read_text().strip() if release.exists() else "unknown"


# --------------------------------------------------------------------------- building


def _run(argv: list[str], log_file: Path, cwd: Path | None = None, env: dict | None = None) -> None:
    with log_file.open("a") as log:
        log.write(f"$ {shlex.join(argv)}\n")
        log.flush()
        rc = subprocess.run(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT).returncode
    if rc != 0:
        raise LabKernelError(f"`{shlex.join(argv)}` exited {rc}; read {log_file}")


def _prepare_source(src: Path, version: str, log_file: Path, log: Log) -> None:
    stamp = src / ".pathdiv-source"
    if stamp.exists() and stamp.read_text() == version:
        return
    if src.exists():
        shutil.rmtree(src)
    log(f"labvm: extracting {SOURCE_TARBALL} into {src.parent}")
    # --touch: newer than any object left in out/ from another tree, so nothing stale survives
    _run(["tar", "--touch", "-xf", str(SOURCE_TARBALL), "-C", str(src.parent)], log_file)
    if not src.is_dir():
        raise LabKernelError(f"{SOURCE_TARBALL} did not unpack to {src}; check the package layout")
    stamp.write_text(version)


def _apply_patches(src: Path, applied: Path, patches: Sequence[tuple[str, bytes]],
                   log_file: Path, log: Log) -> bool:
    """Make ``src`` carry exactly ``patches``; return False if the tree must be re-extracted."""
    old = sorted(applied.glob("*.patch")) if applied.is_dir() else []
    if [(p.name, p.read_bytes()) for p in old] == list(patches):
        return True
    for p in reversed(old):
        try:
            _run(["patch", "-R", "-p1", "-s", "-d", str(src), "-i", str(p)], log_file)
        except LabKernelError:
            log(f"labvm: cannot revert {p.name}; re-extracting the source")
            return False
        p.unlink()
    applied.mkdir(parents=True, exist_ok=True)
    for name, text in patches:
        (applied / name).write_bytes(text)
        log(f"labvm: applying {name}")
        try:
            _run(["patch", "-p1", "-s", "--forward", "-d", str(src), "-i", str(applied / name)],
                 log_file)
        except LabKernelError as exc:
            (applied / name).unlink()
            raise LabKernelError(
                f"kernels/patches/{name} does not apply to {SOURCE_PACKAGE}: {exc}; "
                "rebase the series on the installed source version"
            ) from exc
    return True


def _configure(src: Path, out: Path, recipe: KernelRecipe, log_file: Path, log: Log) -> None:
    stamp = out / ".pathdiv-config"
    key = hashlib.sha256(recipe.configurator.encode() + recipe.config_fragment).hexdigest()
    if stamp.exists() and stamp.read_text() == key and (out / ".config").exists():
        return
    log("labvm: configuring (virtme-ng minimal config + kernels/pathdiv.config)")
    fragment = out.parent / "pathdiv.config"
    fragment.write_bytes(recipe.config_fragment)
    _run([_tool("virtme-configkernel"), "--defconfig", "--custom", str(fragment), f"O={out}"],
         log_file, cwd=src)
    # virtme-ng appends some options of its own after the fragment: apply it once more
    with (out / ".config").open("ab") as config:
        config.write(b"\n" + recipe.config_fragment)
    _run(["make", "-C", str(src), f"O={out}", "olddefconfig"], log_file)
    missing = missing_options(recipe.config_fragment.decode(), (out / ".config").read_text())
    if missing:
        raise LabKernelError(
            f"options of kernels/pathdiv.config not in the final config: {', '.join(missing)}; "
            "add the options they depend on to the fragment"
        )
    stamp.write_text(key)


def build_lab_kernel(jobs: int | None = None, log: Log = print) -> Path:
    """Build (or find) the lab kernel for the current recipe and return its bzImage path."""
    recipe = current_recipe()
    digest = recipe.digest()
    image_dir = IMAGES_DIR / digest
    if (image_dir / "bzImage").is_file():
        log(f"labvm: cached {image_dir / 'bzImage'}")
        return image_dir / "bzImage"
    if not SOURCE_TARBALL.exists():
        raise LabKernelError(f"{SOURCE_TARBALL} is missing; run `apt-get install {SOURCE_PACKAGE}`")
    BUILD_DIR.mkdir(parents=True, exist_ok=True)
    src, out, applied = BUILD_DIR / SOURCE_PACKAGE, BUILD_DIR / "out", BUILD_DIR / "applied"
    log_file = BUILD_DIR / "build.log"
    with (BUILD_DIR / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (image_dir / "bzImage").is_file():  # built by another process meanwhile
            return image_dir / "bzImage"
        log_file.write_text("")
        start = time.monotonic()
        _prepare_source(src, recipe.source_version, log_file, log)
        if not _apply_patches(src, applied, recipe.patches, log_file, log):
            shutil.rmtree(src)
            shutil.rmtree(applied, ignore_errors=True)
            _prepare_source(src, recipe.source_version, log_file, log)
            _apply_patches(src, applied, recipe.patches, log_file, log)
        out.mkdir(exist_ok=True)
        _configure(src, out, recipe, log_file, log)
        jobs = jobs or os.cpu_count() or 1
        log(f"labvm: building bzImage with -j{jobs}; log in {log_file}")
        env = dict(os.environ, **BUILD_ENV)
        incremental = (out / "vmlinux").exists()
        _run(["nice", "-n", "19", "make", "-C", str(src), f"O={out}", f"-j{jobs}", "bzImage"],
             log_file, env=env)
        release = subprocess.run(
            ["make", "-s", "-C", str(src), f"O={out}", "kernelrelease"],
            capture_output=True, text=True, env=env,
        ).stdout.strip()
        tmp = IMAGES_DIR / f".{digest}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        shutil.copy2(out / "arch/x86/boot/bzImage", tmp / "bzImage")
        shutil.copy2(out / ".config", tmp / "config")
        shutil.copy2(log_file, tmp / "build.log")
        (tmp / "kernel.release").write_text(release + "\n")
        (tmp / "recipe.json").write_text(json.dumps({
            "digest": digest,
            "source_package": SOURCE_PACKAGE,
            "source_version": recipe.source_version,
            "patches": [name for name, _ in recipe.patches],
            "configurator": recipe.configurator,
            "build_seconds": round(time.monotonic() - start, 1),
            "jobs": jobs,
            "incremental": incremental,
        }, indent=2) + "\n")
        tmp.rename(image_dir)
    log(f"labvm: built {image_dir / 'bzImage'} ({release})")
    return image_dir / "bzImage"


# --------------------------------------------------------------------------- running


@dataclass(frozen=True)
class LabResult:
    """Outcome of one command run in the lab VM."""

    returncode: int
    stdout: str
    stderr: str
    accel: str
    kernel_release: str
    seconds: float


def run_in_lab(
    argv: Sequence[str],
    share: Path,
    kernel: Path,
    timeout_s: float | None,
    cpus: int = 2,
    memory_mb: int = 4096,
    cwd: Path | None = None,
    accel: Accel | None = None,
    env: dict[str, str] | None = None,
    poll: Callable[[], None] | None = None,
    poll_s: float = 2.0,
) -> LabResult:
    """Boot ``kernel`` on this machine's root file system, run ``argv`` and return its result.

    ``share`` is writable in the guest at the same path (everything else of the host root is
    read-only there). The exit status and output are the command's own, read back from
    ``share/.labvm/<id>/``: virtme-ng's own status is not (it exits 255 without udev).
    ``poll`` is called every ``poll_s`` seconds while the VM runs (progress, watchdogs);
    whatever it raises stops the VM and propagates, as does Ctrl-C: the VM never outlives
    this call.
    """
    if not kernel.is_file():
        raise LabKernelError(f"kernel image {kernel} does not exist; build it with `make kernel`")
    share = share.resolve()
    control = share / CONTROL_DIR / uuid.uuid4().hex[:12]
    control.mkdir(parents=True)
    script = control / "run.sh"
    script.write_text(guest_script(argv, (cwd or Path.cwd()).resolve(), control, env))
    accel = accel or detect_accel()
    console = control / "console.log"
    command = vng_command(_tool("vng"), kernel, script, share, accel, cpus, memory_mb)
    # vng starts virtme-run and friends by name: they sit next to it (venv bin). The lab
    # marker lets `pathdiv clean` stop a VM whose pathdiv was killed (SIGKILL).
    path_env = dict(os.environ, PATH=f"{Path(command[0]).parent}:{os.environ.get('PATH', '')}")
    path_env[OWNER_ENV] = str(os.getpid())
    start = time.monotonic()
    with console.open("w") as out:
        # its own session: a Ctrl-C reaches us, and we stop vng and QEMU together
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, env=path_env,
                                stderr=subprocess.STDOUT, start_new_session=True)
        try:
            while True:
                try:
                    proc.wait(timeout=poll_s)
                    break
                except subprocess.TimeoutExpired:
                    pass
                if timeout_s is not None and time.monotonic() - start > timeout_s:
                    raise LabKernelError(
                        f"the lab VM did not finish {shlex.join(argv)!r} within "
                        f"{timeout_s:.0f} s ({accel.name}); read {console}"
                    )
                if poll is not None:
                    poll()
        finally:
            if proc.poll() is None:
                stop_vm(proc)
    seconds = time.monotonic() - start
    rc_file = control / "rc"
    if not rc_file.exists():
        tail = console.read_text(errors="replace")[-1500:]
        raise LabKernelError(
            f"the lab VM ({kernel}, {accel.name}) ended without running the command to its "
            f"end; read {console}. Last console output:\n{tail}"
        )
    return LabResult(
        returncode=int(rc_file.read_text().strip()),
        stdout=(control / "stdout").read_text(errors="replace"),
        stderr=(control / "stderr").read_text(errors="replace"),
        accel=accel.name,
        kernel_release=(control / "release").read_text().strip(),
        seconds=seconds,
    )


def stop_vm(proc: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """Stop vng and its QEMU (one process group): SIGTERM, then SIGKILL."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)
        try:
            proc.wait(timeout=grace_s)
            return
        except subprocess.TimeoutExpired:
            continue


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pathdiv.kernels.vm", description=__doc__)
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the lab kernel (no-op when cached), print its path")
    b.add_argument("-j", "--jobs", type=int, default=None)
    sub.add_parser("find", help="print the cached image path; exit 1 if not built")
    sub.add_parser("accel", help="print the accelerator the VM would use and why")
    r = sub.add_parser("run", help="run a command in the lab VM")
    r.add_argument("--share", type=Path, default=Path("results"))
    r.add_argument("--timeout", type=float, default=600)
    r.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    try:
        if args.cmd == "build":
            print(build_lab_kernel(args.jobs, log=lambda m: print(m, file=sys.stderr)))
        elif args.cmd == "find":
            image = find_lab_kernel()
            if image is None:
                print("lab kernel not built; run `make kernel`", file=sys.stderr)
                return 1
            print(image)
        elif args.cmd == "accel":
            accel = detect_accel()
            print(f"{accel.name}: {accel.reason}")
        elif args.cmd == "run":
            command = args.command[1:] if args.command[:1] == ["--"] else args.command
            if not command:
                parser.error("run needs a command")
            image = find_lab_kernel() or build_lab_kernel(log=lambda m: print(m, file=sys.stderr))
            res = run_in_lab(command, args.share, image, args.timeout)
            sys.stdout.write(res.stdout)
            sys.stderr.write(res.stderr)
            print(f"labvm: {res.kernel_release} ({res.accel}) exit {res.returncode} "
                  f"in {res.seconds:.1f} s", file=sys.stderr)
            return res.returncode
    except LabKernelError as exc:
        print(f"labvm: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
