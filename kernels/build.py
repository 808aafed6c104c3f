"""The lab kernel's build: Debian's linux-source-6.12, the patch series in kernels/patches
(MPTCP schedulers ``rb`` and ``roundrobin``) and kernels/uml.config on top of
``make ARCH=um defconfig``, built as User-Mode Linux (one ``linux`` binary that runs as a
process: kernels/uml.py boots it). Images are cached by a hash of everything that goes
into them (source version, patches, fragment, builder), so a second build is a no-op.

Pure parts (the recipe hash, patch and fragment reading) come first; the functions that
run processes (:func:`build_lab_kernel`) after them.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

KERNELS_DIR = Path(__file__).resolve().parent
SOURCE_PACKAGE = "linux-source-6.12"
SOURCE_TARBALL = Path("/usr/src/linux-source-6.12.tar.xz")
CACHE_DIR = Path(os.environ.get("PATHDIV_CACHE", "/var/cache/pathdiv"))
BUILD_DIR = CACHE_DIR / "kernel-build"
IMAGES_DIR = CACHE_DIR / "kernels"
OUT_DIR = BUILD_DIR / "out-um"
FRAGMENT = "uml.config"
IMAGE_NAME = "linux"
# Part of the recipe: a change to how the binary is configured or built gives a new digest.
BUILDER = "pathdiv-uml-1 make ARCH=um defconfig + kernels/uml.config"
# Fixed build identity so two builds of one recipe give the same image.
BUILD_ENV = {
    "KBUILD_BUILD_TIMESTAMP": "2025-01-01 00:00:00 UTC",
    "KBUILD_BUILD_USER": "pathdiv",
    "KBUILD_BUILD_HOST": "pathdiv",
    "KBUILD_BUILD_VERSION": "1",
}

Log = Callable[[str], None]


class LabKernelError(RuntimeError):
    """The lab kernel cannot be built, or cannot run the command."""


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


def config_key(rec: KernelRecipe) -> str:
    """What the configured tree depends on: a change reconfigures before building."""
    return hashlib.sha256(rec.configurator.encode() + rec.config_fragment).hexdigest()


# ------------------------------------------------------------------- reading the machine


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


def current_recipe(kernels_dir: Path = KERNELS_DIR) -> KernelRecipe:
    patches = tuple(
        (p.name, p.read_bytes()) for p in sorted((kernels_dir / "patches").glob("*.patch"))
    )
    if not patches:
        raise LabKernelError(
            f"no patches in {kernels_dir / 'patches'}; expected 000N-*.patch files")
    return KernelRecipe(source_version=_source_version(), patches=patches,
                        config_fragment=(kernels_dir / FRAGMENT).read_bytes(),
                        configurator=BUILDER)


def find_lab_kernel(rec: KernelRecipe | None = None) -> Path | None:
    """The cached ``linux`` for the current patches and fragment, or None if not built."""
    image = IMAGES_DIR / (rec or current_recipe()).digest() / IMAGE_NAME
    return image if image.is_file() else None


IMAGE_HASH = "linux.sha256"  # beside the image: its SHA-256, recorded when it was built


def file_sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


def unsafe_paths(image: Path, top: Path, euid: int) -> list[str]:
    """Why ``image`` and the folders from ``top`` down to it could have been replaced by
    someone other than root (or ``euid``): a symlink, another owner, group or other write
    permission. Empty when only root could have written them."""
    problems = []
    chain = [image, *[p for p in image.parents if p == top or top in p.parents]]
    for path in chain:
        try:
            st = path.lstat()
        except OSError as exc:
            problems.append(f"{path}: {exc.strerror}")
            continue
        if path.is_symlink():
            problems.append(f"{path} is a symlink")
        if st.st_uid not in (0, euid):
            problems.append(f"{path} is owned by uid {st.st_uid}")
        if st.st_mode & 0o022:
            problems.append(f"{path} is writable by group or others (mode {st.st_mode & 0o777:o})")
    return problems


def verify_image(image: Path, log: Log | None = None) -> None:
    """Refuse to boot a cached image that may have been tampered with: its folders must be
    root's alone and its content must match the SHA-256 recorded at build time. An image
    built before hashes were recorded gets its hash recorded now (once, when its folders
    pass the check)."""
    problems = unsafe_paths(image, CACHE_DIR, os.geteuid())
    if problems:
        raise LabKernelError(f"the lab kernel {image} is not safe to run as root: "
                             f"{'; '.join(problems)}. Fix the ownership and mode, or remove "
                             "the image and rebuild it (`make kernel`)")
    recorded_file = image.parent / IMAGE_HASH
    actual = file_sha256(image)
    if not recorded_file.exists():
        recorded_file.write_text(actual + "\n")
        if log is not None:
            log(f"lab kernel: recorded the SHA-256 of {image} ({actual[:16]}...)")
        return
    recorded = next(iter(recorded_file.read_text().split()), "")
    if recorded != actual:
        raise LabKernelError(f"the lab kernel {image} does not match the SHA-256 recorded "
                             f"when it was built ({recorded[:16]}... recorded, "
                             f"{actual[:16]}... now): it changed since. Remove "
                             f"{image.parent} and rebuild it (`make kernel`)")


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
    log(f"lab kernel: extracting {SOURCE_TARBALL} into {src.parent}")
    # --touch: newer than any object left in out/ from another tree, so nothing stale survives
    _run(["tar", "--touch", "-xf", str(SOURCE_TARBALL), "-C", str(src.parent)], log_file)
    if not src.is_dir():
        raise LabKernelError(f"{SOURCE_TARBALL} did not unpack to {src}; check the package layout")
    stamp.write_text(version)


def _apply_patches(src: Path, applied: Path, patches: Sequence[tuple[str, bytes]],
                   log_file: Path, log: Log) -> bool:
    """Make ``src`` carry exactly ``patches``; return False if the tree must be re-extracted.

    Only the patches after the longest prefix the tree already carries are reverted and
    applied: a reverted and re-applied patch gives its files new times, and make rebuilds
    everything that includes them (0005 touches include/linux/tcp.h: most of the kernel)."""
    old = sorted(applied.glob("*.patch")) if applied.is_dir() else []
    keep = 0
    while (keep < min(len(old), len(patches))
           and (old[keep].name, old[keep].read_bytes()) == tuple(patches[keep])):
        keep += 1
    if keep == len(old) == len(patches):
        return True
    for p in reversed(old[keep:]):
        try:
            _run(["patch", "-R", "-p1", "-s", "-d", str(src), "-i", str(p)], log_file)
        except LabKernelError:
            log(f"lab kernel: cannot revert {p.name}; re-extracting the source")
            return False
        p.unlink()
    applied.mkdir(parents=True, exist_ok=True)
    for name, text in patches[keep:]:
        (applied / name).write_bytes(text)
        log(f"lab kernel: applying {name}")
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


def _configure(src: Path, out: Path, rec: KernelRecipe, log_file: Path, log: Log) -> None:
    stamp = out / ".pathdiv-config"
    key = config_key(rec)
    if stamp.exists() and stamp.read_text() == key and (out / ".config").exists():
        return
    log("lab kernel: configuring (make ARCH=um defconfig + kernels/uml.config)")
    _run(["make", "-C", str(src), f"O={out}", "ARCH=um", "defconfig"], log_file)
    with (out / ".config").open("ab") as config:
        config.write(b"\n" + rec.config_fragment)
    _run(["make", "-C", str(src), f"O={out}", "ARCH=um", "olddefconfig"], log_file)
    missing = missing_options(rec.config_fragment.decode(), (out / ".config").read_text())
    if missing:
        raise LabKernelError(
            f"options of kernels/{FRAGMENT} not in the final config: {', '.join(missing)}; "
            "add the options they depend on to the fragment"
        )
    stamp.write_text(key)


def build_lab_kernel(jobs: int | None = None, log: Log = print) -> Path:
    """Build (or find) the lab kernel for the current recipe and return its path."""
    rec = current_recipe()
    digest = rec.digest()
    image_dir = IMAGES_DIR / digest
    if (image_dir / IMAGE_NAME).is_file():
        log(f"lab kernel: cached {image_dir / IMAGE_NAME}")
        return image_dir / IMAGE_NAME
    if not SOURCE_TARBALL.exists():
        raise LabKernelError(f"{SOURCE_TARBALL} is missing; run "
                       f"`apt-get install {SOURCE_PACKAGE}`")
    build = BUILD_DIR
    build.mkdir(parents=True, exist_ok=True)
    src, applied = build / SOURCE_PACKAGE, build / "applied"
    log_file = build / "build.log"
    with (build / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (image_dir / IMAGE_NAME).is_file():  # built by another process meanwhile
            return image_dir / IMAGE_NAME
        log_file.write_text("")
        start = time.monotonic()
        _prepare_source(src, rec.source_version, log_file, log)
        if not _apply_patches(src, applied, rec.patches, log_file, log):
            shutil.rmtree(src)
            shutil.rmtree(applied, ignore_errors=True)
            _prepare_source(src, rec.source_version, log_file, log)
            _apply_patches(src, applied, rec.patches, log_file, log)
        OUT_DIR.mkdir(exist_ok=True)
        _configure(src, OUT_DIR, rec, log_file, log)
        jobs = jobs or os.cpu_count() or 1
        log(f"lab kernel: building linux (ARCH=um) with -j{jobs}; log in {log_file}")
        env = dict(os.environ, **BUILD_ENV)
        incremental = (OUT_DIR / IMAGE_NAME).exists()
        _run(["nice", "-n", "19", "make", "-C", str(src), f"O={OUT_DIR}", "ARCH=um",
                    f"-j{jobs}", IMAGE_NAME], log_file, env=env)
        release = subprocess.run(
            ["make", "-s", "-C", str(src), f"O={OUT_DIR}", "ARCH=um", "kernelrelease"],
            capture_output=True, text=True, env=env,
        ).stdout.strip()
        tmp = IMAGES_DIR / f".{digest}.tmp"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        shutil.copy2(OUT_DIR / IMAGE_NAME, tmp / IMAGE_NAME)
        (tmp / IMAGE_HASH).write_text(file_sha256(tmp / IMAGE_NAME) + "\n")
        shutil.copy2(OUT_DIR / ".config", tmp / "config")
        shutil.copy2(log_file, tmp / "build.log")
        (tmp / "kernel.release").write_text(release + "\n")
        (tmp / "recipe.json").write_text(json.dumps({
            "digest": digest,
            "arch": "um",
            "source_package": SOURCE_PACKAGE,
            "source_version": rec.source_version,
            "patches": [name for name, _ in rec.patches],
            "configurator": rec.configurator,
            "build_seconds": round(time.monotonic() - start, 1),
            "jobs": jobs,
            "incremental": incremental,
        }, indent=2) + "\n")
        tmp.rename(image_dir)
    log(f"lab kernel: built {image_dir / IMAGE_NAME} ({release})")
    return image_dir / IMAGE_NAME


# --------------------------------------------------------------------------- CLI


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m pathdiv.kernels.build", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="cmd", required=True)
    b = sub.add_parser("build", help="build the lab kernel (no-op when cached), print its path")
    b.add_argument("-j", "--jobs", type=int, default=None)
    sub.add_parser("find", help="print the cached lab kernel's path; exit 1 if not built")
    args = parser.parse_args(argv)
    try:
        if args.cmd == "build":
            print(build_lab_kernel(args.jobs, log=lambda m: print(m, file=sys.stderr)))
        else:
            image = find_lab_kernel()
            if image is None:
                print("the lab kernel is not built; run `make kernel`", file=sys.stderr)
                return 1
            print(image)
    except LabKernelError as exc:
        print(f"lab kernel: {exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
