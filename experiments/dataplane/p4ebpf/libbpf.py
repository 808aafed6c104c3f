"""Loading eBPF objects and reading and writing their maps, through the system's libbpf.

p4lang's control-plane tool for PSA-eBPF programs (psabpf/nikss) is not packaged, and
bpftool pins every map of an object at one global path (`LIBBPF_PIN_BY_NAME` under
/sys/fs/bpf), where the maps of twenty switches running the same program would be one
map. So pathdiv calls libbpf itself (`libbpf.so.1`, Debian's `libbpf1`, which iproute2
depends on) with ctypes: open the object with a per-switch pin root, load it, pin its
programs, run its map initializer (`bpf_prog_test_run_opts`), and update and look up
map entries by pinned path. Only the calls and structures of libbpf's stable 1.x ABI
are used; libbpf's messages and the verifier's log are kept for error reports.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from dataclasses import dataclass
from pathlib import Path

LIBBPF_NAMES = ("libbpf.so.1", "bpf")
BPF_PROG_TYPE_SCHED_CLS = 3
BPF_ANY = 0
BPF_F_STRICT_ALIGNMENT = 1 << 0
# p4c-ebpf's parsers read headers with loads of up to 8 bytes at any offset (the
# Ethernet header starts 2 bytes into an aligned buffer). A kernel whose architecture
# does not declare efficient unaligned access (User-Mode Linux: the lab kernel) makes the
# verifier refuse them ("misaligned packet access off 2+0+0+0 size 8"); the CPU under
# it (x86-64) does them fine, so the programs are loaded with the flag that lifts the
# check (kernel/bpf/verifier.c, bpf_check: BPF_F_ANY_ALIGNMENT overrides strictness).
BPF_F_ANY_ALIGNMENT = 1 << 1
LOG_BYTES = 1 << 20
_PRINT_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_char_p, ctypes.c_void_p)


class LibbpfError(RuntimeError):
    """A libbpf call failed; the message carries libbpf's own words."""


class _OpenOpts(ctypes.Structure):
    """`struct bpf_object_open_opts` up to `kernel_log_level` (libbpf >= 0.6)."""

    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("object_name", ctypes.c_char_p),
        ("relaxed_maps", ctypes.c_bool),
        ("pin_root_path", ctypes.c_char_p),
        ("_removed_attach_prog_fd", ctypes.c_uint32),
        ("kconfig", ctypes.c_char_p),
        ("btf_custom_path", ctypes.c_char_p),
        ("kernel_log_buf", ctypes.c_char_p),
        ("kernel_log_size", ctypes.c_size_t),
        ("kernel_log_level", ctypes.c_uint32),
    ]


class _TestRunOpts(ctypes.Structure):
    """`struct bpf_test_run_opts` up to `duration` (libbpf >= 0.7)."""

    _fields_ = [
        ("sz", ctypes.c_size_t),
        ("data_in", ctypes.c_void_p),
        ("data_out", ctypes.c_void_p),
        ("data_size_in", ctypes.c_uint32),
        ("data_size_out", ctypes.c_uint32),
        ("ctx_in", ctypes.c_void_p),
        ("ctx_out", ctypes.c_void_p),
        ("ctx_size_in", ctypes.c_uint32),
        ("ctx_size_out", ctypes.c_uint32),
        ("retval", ctypes.c_uint32),
        ("repeat", ctypes.c_int),
        ("duration", ctypes.c_uint32),
    ]


def find_libbpf() -> str | None:
    """The loadable name or path of libbpf 1.x, or None."""
    for name in LIBBPF_NAMES:
        found = name if name.endswith(".so.1") else ctypes.util.find_library(name)
        if not found:
            continue
        try:
            ctypes.CDLL(found)
        except OSError:
            continue
        return found
    return None


@dataclass(frozen=True)
class Loaded:
    """An object loaded for one switch: where its programs and maps are pinned."""

    pin_dir: Path
    programs: dict[str, Path]  # function name -> pinned program
    maps: dict[str, Path]  # map name -> pinned map


class Libbpf:
    """The few libbpf calls pathdiv needs, with errors that say what failed."""

    def __init__(self, path: str | None = None) -> None:
        found = path or find_libbpf()
        if found is None:
            raise LibbpfError("libbpf.so.1 not found: install Debian's libbpf1 (iproute2 "
                              "depends on it)")
        self.lib = ctypes.CDLL(found, use_errno=True)
        self.libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        self._declare()
        self.messages: list[str] = []
        self.last_duration_ns = 0
        self._print = _PRINT_FN(self._on_print)
        self.lib.libbpf_set_print(self._print)

    def _declare(self) -> None:
        lib, vp, cp, ci = self.lib, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int
        signatures: dict[str, tuple[object, list[object]]] = {
            "libbpf_set_print": (vp, [_PRINT_FN]),
            "bpf_object__open_file": (vp, [cp, ctypes.POINTER(_OpenOpts)]),
            "bpf_object__load": (ci, [vp]),
            "bpf_object__close": (None, [vp]),
            "bpf_object__next_program": (vp, [vp, vp]),
            "bpf_object__next_map": (vp, [vp, vp]),
            "bpf_program__name": (cp, [vp]),
            "bpf_program__section_name": (cp, [vp]),
            "bpf_program__set_type": (ci, [vp, ci]),
            "bpf_program__set_autoload": (ci, [vp, ctypes.c_bool]),
            "bpf_program__set_flags": (ci, [vp, ctypes.c_uint32]),
            "bpf_program__fd": (ci, [vp]),
            "bpf_map__name": (cp, [vp]),
            "bpf_map__pin_path": (cp, [vp]),
            "bpf_obj_pin": (ci, [ci, cp]),
            "bpf_obj_get": (ci, [cp]),
            "bpf_map_update_elem": (ci, [ci, vp, vp, ctypes.c_uint64]),
            "bpf_map_lookup_elem": (ci, [ci, vp, vp]),
            "bpf_prog_test_run_opts": (ci, [ci, ctypes.POINTER(_TestRunOpts)]),
            "bpf_prog_load": (ci, [ci, cp, cp, vp, ctypes.c_size_t, vp]),
        }
        for name, (restype, argtypes) in signatures.items():
            fn = getattr(lib, name)
            fn.restype, fn.argtypes = restype, argtypes
        self.libc.vsnprintf.argtypes = [cp, ctypes.c_size_t, cp, vp]

    def _on_print(self, level: int, fmt: bytes, args: int) -> int:
        buf = ctypes.create_string_buffer(4096)
        self.libc.vsnprintf(buf, len(buf), fmt, args)
        self.messages.append(buf.value.decode(errors="replace").rstrip())
        return 0

    def _fail(self, what: str, rc: int | None = None) -> LibbpfError:
        err = -rc if rc is not None and rc < 0 else ctypes.get_errno()
        said = "; ".join(m for m in self.messages[-6:] if m)
        return LibbpfError(f"{what}: {os.strerror(err) if err else 'failed'}"
                           + (f" (libbpf: {said})" if said else ""))

    # ---- objects -----------------------------------------------------------------
    def load(self, obj: Path, pin_dir: Path, tc_programs: tuple[str, ...],
             flags: int = BPF_F_ANY_ALIGNMENT) -> Loaded:
        """Load `obj` with its maps pinned under `pin_dir`; the functions named in
        `tc_programs` are loaded as tc classifiers (with the BPF_PROG_LOAD `flags`) and
        pinned there too, every other program of the object is left unloaded. The
        kernel's verifier log is in the error when a program is refused."""
        self.messages.clear()
        pin_dir.mkdir(parents=True, exist_ok=True)
        log = ctypes.create_string_buffer(LOG_BYTES)
        opts = _OpenOpts(sz=ctypes.sizeof(_OpenOpts), pin_root_path=str(pin_dir).encode(),
                         kernel_log_buf=ctypes.cast(log, ctypes.c_char_p),
                         kernel_log_size=LOG_BYTES)
        handle = self.lib.bpf_object__open_file(str(obj).encode(), ctypes.byref(opts))
        if not handle:
            raise self._fail(f"opening {obj}")
        try:
            programs = self._programs(handle)
            missing = [p for p in tc_programs if p not in programs]
            if missing:
                raise LibbpfError(f"{obj} has no program {', '.join(missing)} "
                                  f"(it has {', '.join(sorted(programs))})")
            for name, prog in programs.items():
                keep = name in tc_programs
                self.lib.bpf_program__set_autoload(prog, keep)
                if keep:
                    self.lib.bpf_program__set_type(prog, BPF_PROG_TYPE_SCHED_CLS)
                    self.lib.bpf_program__set_flags(prog, flags)
            rc = self.lib.bpf_object__load(handle)
            if rc != 0:
                verifier = log.value.decode(errors="replace").strip()
                tail = "\n".join(verifier.splitlines()[-25:])
                raise LibbpfError(str(self._fail(f"loading {obj}", rc))
                                  + (f"\nverifier log (end):\n{tail}" if tail else ""))
            pinned: dict[str, Path] = {}
            for name in tc_programs:
                path = pin_dir / name
                rc = self.lib.bpf_obj_pin(self.lib.bpf_program__fd(programs[name]),
                                          str(path).encode())
                if rc != 0:
                    raise self._fail(f"pinning program {name} at {path}", rc)
                pinned[name] = path
            return Loaded(pin_dir, pinned, self._maps(handle))
        finally:
            self.lib.bpf_object__close(handle)

    def _programs(self, handle: int) -> dict[str, int]:
        out: dict[str, int] = {}
        prog = self.lib.bpf_object__next_program(handle, None)
        while prog:
            out[self.lib.bpf_program__name(prog).decode()] = prog
            prog = self.lib.bpf_object__next_program(handle, prog)
        return out

    def _maps(self, handle: int) -> dict[str, Path]:
        out: dict[str, Path] = {}
        m = self.lib.bpf_object__next_map(handle, None)
        while m:
            pin = self.lib.bpf_map__pin_path(m)
            if pin:
                out[self.lib.bpf_map__name(m).decode()] = Path(pin.decode())
            m = self.lib.bpf_object__next_map(handle, m)
        return out

    def load_instructions(self, name: str, instructions: bytes, pin: Path) -> Path:
        """Load raw BPF instructions (8 bytes each) as a tc classifier and pin it."""
        self.messages.clear()
        rc = self.lib.bpf_prog_load(BPF_PROG_TYPE_SCHED_CLS, name.encode(), b"GPL",
                                    instructions, len(instructions) // 8, None)
        if rc < 0:
            raise self._fail(f"loading program {name}", rc)
        try:
            pin.parent.mkdir(parents=True, exist_ok=True)
            if self.lib.bpf_obj_pin(rc, str(pin).encode()) != 0:
                raise self._fail(f"pinning program {name} at {pin}")
        finally:
            os.close(rc)
        return pin

    # ---- pinned objects ------------------------------------------------------------
    def open_pinned(self, path: Path) -> int:
        fd = self.lib.bpf_obj_get(str(path).encode())
        if fd < 0:
            raise self._fail(f"opening pinned {path}")
        return int(fd)

    def run_once(self, program: Path, packet: bytes) -> int:
        """Run a pinned program once on `packet` (BPF_PROG_TEST_RUN); its return value."""
        return self.test_run(program, packet)[0]

    def test_run(self, program: Path, packet: bytes, ctx: bytes | None = None,
                 repeat: int = 1) -> tuple[int, bytes]:
        """Run a pinned tc program on `packet` (`repeat` times), with `ctx` as the start
        of its `struct __sk_buff` if given; (return value, the packet as the program left
        it). The kernel's mean time per run is then in `self.last_duration_ns`."""
        fd = self.open_pinned(program)
        try:
            data = ctypes.create_string_buffer(packet, len(packet))
            out = ctypes.create_string_buffer(len(packet) + 256)
            opts = _TestRunOpts(sz=ctypes.sizeof(_TestRunOpts),
                                data_in=ctypes.cast(data, ctypes.c_void_p),
                                data_size_in=len(packet),
                                data_out=ctypes.cast(out, ctypes.c_void_p),
                                data_size_out=len(out), repeat=repeat)
            if ctx is not None:
                ctx_in = ctypes.create_string_buffer(ctx, len(ctx))
                opts.ctx_in = ctypes.cast(ctx_in, ctypes.c_void_p)
                opts.ctx_size_in = len(ctx)
            rc = self.lib.bpf_prog_test_run_opts(fd, ctypes.byref(opts))
            if rc != 0:
                raise self._fail(f"running {program}", rc)
            self.last_duration_ns = int(opts.duration)
            return int(opts.retval), out.raw[:opts.data_size_out]
        finally:
            os.close(fd)

    def update(self, fd: int, key: bytes, value: bytes, what: str) -> None:
        rc = self.lib.bpf_map_update_elem(fd, key, value, BPF_ANY)
        if rc != 0:
            raise self._fail(f"writing {what}", rc)

    def lookup(self, fd: int, key: bytes, size: int) -> bytes | None:
        value = ctypes.create_string_buffer(size)
        rc = self.lib.bpf_map_lookup_elem(fd, key, value)
        return None if rc != 0 else value.raw
