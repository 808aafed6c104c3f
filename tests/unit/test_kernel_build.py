"""The lab kernel's recipe: what goes into the cached image's digest, patches, fragment."""

from __future__ import annotations

import os
import shutil

import pytest

from pathdiv.kernels.build import (
    BUILDER,
    FRAGMENT,
    KERNELS_DIR,
    KernelRecipe,
    LabKernelError,
    fragment_options,
    missing_options,
    new_file_from_patch,
)

PATCHES = (("0001-a.patch", b"A"), ("0002-b.patch", b"B"))


def _recipe(**kw) -> KernelRecipe:
    args = {"source_version": "6.12.117-1~deb12u1", "patches": PATCHES,
            "config_fragment": b"CONFIG_MPTCP=y\n", "configurator": BUILDER}
    return KernelRecipe(**{**args, **kw})


def test_recipe_digest_depends_on_every_input():
    digest = _recipe().digest()
    assert digest == _recipe().digest()
    assert len(digest) == 16
    others = [
        _recipe(source_version="6.12.118-1"),
        _recipe(patches=(("0001-a.patch", b"A2"), ("0002-b.patch", b"B"))),
        _recipe(patches=(("0001-a.patch", b"A"),)),
        _recipe(config_fragment=b"CONFIG_MPTCP=y\nCONFIG_VETH=y\n"),
        _recipe(configurator="pathdiv-uml-2"),
    ]
    assert len({digest, *(r.digest() for r in others)}) == 1 + len(others)


def test_the_repository_fragment_has_what_the_lab_needs():
    options = fragment_options((KERNELS_DIR / FRAGMENT).read_text())
    for name in ("UML_TIME_TRAVEL_SUPPORT", "HOSTFS", "MPTCP", "NET_NS", "VETH", "BRIDGE",
                 "NET_SCH_HTB", "NET_SCH_NETEM", "NFT_NUMGEN", "NFT_HASH", "NFT_CT",
                 "IP_ROUTE_MULTIPATH", "PACKET", "INET_MPTCP_DIAG", "TCP_CONG_BBR"):
        assert options.get(f"CONFIG_{name}") == "y", name
    assert options["CONFIG_LOCALVERSION"] == '"-pathdiv"'


def test_the_repository_patches_create_the_allocation_files():
    patch = next((KERNELS_DIR / "patches").glob("0002-*.patch")).read_text()
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


def _file_patch(name: str, old: str, new: str) -> bytes:
    return (f"--- a/{name}\n+++ b/{name}\n@@ -1 +1 @@\n-{old}\n+{new}\n").encode()


@pytest.mark.skipif(not shutil.which("patch"), reason="no patch(1) to apply a series")
def test_a_changed_series_leaves_its_unchanged_prefix_untouched(tmp_path):
    # re-applying an unchanged patch would give its files new times and make would
    # rebuild everything including them
    from pathdiv.kernels.build import _apply_patches

    src, applied, log = tmp_path / "src", tmp_path / "applied", tmp_path / "log"
    src.mkdir()
    (src / "a.h").write_text("a0\n")
    (src / "b.c").write_text("b0\n")
    first = ("0001-a.patch", _file_patch("a.h", "a0", "a1"))
    assert _apply_patches(src, applied, [first, ("0002-b.patch", _file_patch("b.c", "b0", "b1"))],
                          log, lambda _: None)
    stamp = (src / "a.h").stat().st_mtime_ns
    os.utime(src / "a.h", ns=(stamp - 10**9, stamp - 10**9))
    series = [first, ("0002-b.patch", _file_patch("b.c", "b0", "b2")),
              ("0003-b.patch", _file_patch("b.c", "b2", "b3"))]
    assert _apply_patches(src, applied, series, log, lambda _: None)
    assert (src / "a.h").read_text() == "a1\n" and (src / "b.c").read_text() == "b3\n"
    assert (src / "a.h").stat().st_mtime_ns == stamp - 10**9
    assert sorted(p.name for p in applied.iterdir()) == [n for n, _ in series]
    # a shorter series reverts what it no longer has
    assert _apply_patches(src, applied, [first], log, lambda _: None)
    assert (src / "b.c").read_text() == "b0\n" and (src / "a.h").read_text() == "a1\n"
    assert [p.name for p in applied.iterdir()] == ["0001-a.patch"]
