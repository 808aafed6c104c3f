"""The lab VM runner's pure parts, and the capture analysis of kernels/mptcp_lab.py."""

from __future__ import annotations

import importlib.util
import struct
import subprocess

import dpkt
import pytest

from pathdiv.kernels import vm as labvm
from pathdiv.kernels.vm import (
    Accel,
    KernelRecipe,
    LabKernelError,
    available_schedulers,
    choose_accel,
    guest_script,
    missing_options,
    new_file_from_patch,
    run_in_lab,
    vng_command,
)


def _load_mptcp_lab():
    spec = importlib.util.spec_from_file_location(
        "mptcp_lab", labvm.KERNELS_DIR / "mptcp_lab.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


mptcp_lab = _load_mptcp_lab()


# ------------------------------------------------------------------ accelerator


def test_pvm_host_falls_back_to_tcg_and_says_why():
    accel = choose_accel(True, {"kvm", "kvm_pvm"}, {"hypervisor"})
    assert accel.name == "tcg"
    assert "kvm_pvm" in accel.reason


def test_real_kvm_is_used():
    assert choose_accel(True, {"kvm", "kvm_intel"}, {"vmx"}).name == "kvm"
    assert choose_accel(True, {"kvm", "kvm_amd"}, {"svm"}).name == "kvm"


def test_no_access_to_dev_kvm_means_tcg():
    accel = choose_accel(False, {"kvm", "kvm_intel"}, {"vmx"})
    assert accel == Accel("tcg", "/dev/kvm is missing or not read-writable")


def test_vng_command_for_tcg_and_kvm(tmp_path):
    kernel, script = tmp_path / "bzImage", tmp_path / "run.sh"
    tcg = vng_command("vng", kernel, script, tmp_path, Accel("tcg", ""), 2, 4096)
    assert tcg[:3] == ["vng", "--run", str(kernel)]
    assert "--disable-kvm" in tcg
    assert "--qemu-opts=-accel tcg,thread=multi" in tcg
    assert tcg[tcg.index("--rwdir") + 1] == str(tmp_path)
    assert tcg[tcg.index("--memory") + 1] == "4096M"
    assert tcg[-2:] == ["--exec", f"sh {script}"]
    kvm = vng_command("vng", kernel, script, tmp_path, Accel("kvm", ""), 2, 4096)
    assert "--disable-kvm" not in kvm
    assert not any(a.startswith("--qemu-opts") for a in kvm)


# ------------------------------------------------------------------ recipe and patches


def _recipe(**changes) -> KernelRecipe:
    base = {
        "source_version": "6.12.117-1~deb12u1",
        "patches": (("0001-a.patch", b"A"), ("0002-b.patch", b"B")),
        "config_fragment": b"CONFIG_MPTCP=y\n",
        "configurator": "virtme-ng 1.42",
    }
    return KernelRecipe(**{**base, **changes})


def test_recipe_digest_depends_on_every_input():
    digest = _recipe().digest()
    assert digest == _recipe().digest()
    assert len(digest) == 16
    others = [
        _recipe(source_version="6.12.118-1"),
        _recipe(patches=(("0001-a.patch", b"A2"), ("0002-b.patch", b"B"))),
        _recipe(patches=(("0001-a.patch", b"A"),)),
        _recipe(config_fragment=b"CONFIG_MPTCP=y\nCONFIG_VETH=y\n"),
        _recipe(configurator="virtme-ng 1.43"),
    ]
    assert len({digest, *(r.digest() for r in others)}) == 1 + len(others)


def test_the_repository_patches_create_the_allocation_files():
    patch = next((labvm.KERNELS_DIR / "patches").glob("0002-*.patch")).read_text()
    source = new_file_from_patch(patch, "net/mptcp/sched_rb_alloc.c")
    assert source.startswith("// SPDX-License-Identifier: GPL-2.0\n")
    assert "mptcp_rb_alloc_compute" in source
    assert "Recursive partition" in source


def test_new_file_from_patch_names_the_missing_file():
    with pytest.raises(LabKernelError, match=r"does not create 'net/mptcp/nope.c'"):
        new_file_from_patch("--- /dev/null\n+++ b/x.c\n@@ -0,0 +1 @@\n+x\n", "net/mptcp/nope.c")


def test_config_options_missing_from_the_final_config():
    fragment = ("# comment\nCONFIG_MPTCP=y\nCONFIG_NET_SCH_NETEM=y\nCONFIG_LOCALVERSION=\"-p\"\n"
                "# CONFIG_DRM is not set\n# CONFIG_SOUND is not set\n")
    config = ("CONFIG_MPTCP=y\n# CONFIG_NET_SCH_NETEM is not set\nCONFIG_LOCALVERSION=\"-p\"\n"
              "CONFIG_DRM=y\n# CONFIG_SOUND is not set\n")
    assert missing_options(fragment, config) == ["CONFIG_NET_SCH_NETEM=y", "CONFIG_DRM unset"]


def test_available_schedulers_reads_the_sysctl(tmp_path):
    f = tmp_path / "available_schedulers"
    f.write_text("default rb roundrobin\n")
    assert available_schedulers(f) == ["default", "rb", "roundrobin"]
    assert available_schedulers(tmp_path / "absent") == []


# ------------------------------------------------------------------ running


def test_guest_script_returns_the_commands_own_status_and_output(tmp_path):
    control = tmp_path / "ctl"
    control.mkdir()
    script = tmp_path / "run.sh"
    argv = ["sh", "-c", "echo out; echo err >&2; exit 3"]
    script.write_text(guest_script(argv, tmp_path, control))
    subprocess.run(["sh", str(script)], check=True)
    assert (control / "rc").read_text().strip() == "3"
    assert (control / "stdout").read_text() == "out\n"
    assert (control / "stderr").read_text() == "err\n"
    assert (control / "release").read_text().strip()


def test_run_in_lab_needs_a_kernel_image(tmp_path):
    with pytest.raises(LabKernelError, match=r"does not exist; build it with `make kernel`"):
        run_in_lab(["true"], tmp_path, tmp_path / "bzImage", timeout_s=5)


# ------------------------------------------------------------------ capture analysis


def _dss(dsn: int, ssn: int, length: int) -> bytes:
    # kind 30, len 20, subtype 2, flags: A (4-byte data ack), M, m (8-byte DSN)
    return struct.pack("!BBBBIQIH", 30, 22, 0x20, 0x01 | 0x04 | 0x08, 7, dsn, ssn, length)


def test_dss_mapping_is_parsed_after_nops_and_data_ack():
    opts = b"\x01\x01" + _dss(123456789, 1, 1400) + b"\x00\x00"
    assert mptcp_lab.dss_mapping(opts) == (123456789, 1, 1400)
    assert mptcp_lab.dss_mapping(b"\x01\x01\x08\x0a" + b"\x00" * 8) is None


def _segment(sport: int, dport: int, seq: int, flags: int, opts: bytes, payload: int) -> bytes:
    opts += b"\x00" * (-len(opts) % 4)
    tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq, flags=flags, opts=opts,
                       data=b"x" * payload)
    tcp.off = (20 + len(opts)) // 4
    ip = dpkt.ip.IP(src=bytes([10, 77, 0, 1]), dst=bytes([10, 77, 0, 10 + dport % 4]),
                    p=dpkt.ip.IP_PROTO_TCP, data=tcp)
    ip.len = 20 + len(bytes(tcp))
    return bytes(dpkt.ethernet.Ethernet(type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


def test_data_sequence_numbers_from_a_capture(tmp_path):
    pcap = tmp_path / "x.pcap"
    with pcap.open("wb") as f:
        w = dpkt.pcap.Writer(f)
        for port, isn in ((40000, 1000), (40001, 5000)):
            w.writepkt(_segment(mptcp_lab.PORT, port, isn, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK,
                                b"", 0))
        # subflow A: one mapping of 2 segments at DSN 0; subflow B: DSN 2000 in one segment
        w.writepkt(_segment(mptcp_lab.PORT, 40000, 1001, dpkt.tcp.TH_ACK, _dss(0, 1, 2000), 1000))
        w.writepkt(_segment(mptcp_lab.PORT, 40000, 2001, dpkt.tcp.TH_ACK, _dss(0, 1, 2000), 1000))
        w.writepkt(_segment(mptcp_lab.PORT, 40001, 5001, dpkt.tcp.TH_ACK, _dss(2000, 1, 1000),
                            1000))
    packets = mptcp_lab.data_packets(pcap)
    assert [(dsn, flow[3], n) for dsn, flow, n in packets] == [
        (0, 40000, 1000), (1000, 40000, 1000), (2000, 40001, 1000)]


def test_interleave_fraction_counts_subflow_changes_between_consecutive_dsns():
    a, b = ("a",), ("b",)
    alternating = [(k * 1400, a if k % 2 else b, 1400) for k in range(10)]
    # counting starts at DSN 1400, the first packet of the later subflow
    assert mptcp_lab.interleave_fraction(alternating) == (1.0, 8)
    runs = [(k * 1400, a if (k // 5) % 2 else b, 1400) for k in range(20)]
    assert mptcp_lab.interleave_fraction(runs) == (2 / 14, 14)


def test_interleave_fraction_skips_the_time_before_all_subflows_joined():
    a, b = ("a",), ("b",)
    early = [(k, a, 1) for k in range(50)]
    steady = [(50 + k, a if k % 2 else b, 1) for k in range(11)]
    # retransmitted copy of DSN 51 on the other subflow is ignored
    frac, pairs = mptcp_lab.interleave_fraction([*early, *steady, (51, b, 1)])
    assert (frac, pairs) == (1.0, 10)
