"""The lab kernel's recipe: what goes into the cached image's digest, patches, fragment."""

from __future__ import annotations

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
