"""The integration suite's two lanes: `make test` runs `pytest -m lab_lane` and
`pytest -m "not lab_lane"` side by side, as two processes (pytest-xdist's loadgroup is
not used: with pytest 9 its groups are silently ignored, xdist 3.8 writing a node id
attribute pytest no longer reads, so "grouped" tests ran at once).

Every test runs in the host lane (one test at a time, as the whole suite once ran)
unless its module is named below as a lab-kernel module. The host lane holds everything
that shares this machine's state: network namespaces, veths and bridges of host-kernel
networks and their fixed names, bmv2's fixed thrift ports and
/tmp/bmv2-<device>-notifications.ipc files (two bmv2 networks at once: "Address already
in use"), p4-ebpf's programs pinned in the bpffs, host sysctls a network changes and puts
back, `pathdiv clean` (it kills every lab process whose owner is gone, and asserts on
how many), global process listings (`pgrep`), and the wall-clock data planes.

A lab-kernel module runs its guests in User-Mode Linux on the virtual clock (its
figures do not depend on the host's load; kernels/uml.py) with the network inside the
guest, which sees the host's files read-only; on the host it has only its own jail, a
private uml_dir and scratch folders under its own tmp_path, and the lab kernel and P4
program caches, which are built under a lock or renamed into place whole
(kernels/build.py, experiments/dataplane/*/programs.py). Those modules run one after
the other in the lab lane, beside the host lane. Tests of such a module that leave lab
processes whose owner is gone on purpose (SIGKILL of the owner) stay in the host lane,
so that a concurrent `pathdiv clean` neither kills them for the test nor counts them.

A new module lands in the host lane until it is audited and listed here.
"""

from __future__ import annotations

import pytest

LAB_LANE = "lab_lane"  # the marker (pytest.ini) that selects the lab lane

# module file name -> tests of it that stay in the host lane (see above)
LAB_KERNEL_MODULES: dict[str, frozenset[str]] = {
    "test_api_lab.py": frozenset(),
    "test_ecn_marking.py": frozenset({"test_bmv2_marks_on_this_machines_kernel"}),
    "test_lab_cli.py": frozenset(),
    "test_lab_kernel.py": frozenset({"test_sigint_mid_run_leaves_no_uml_process",
                                     "test_sigkill_of_the_owner_ends_its_uml_without_clean"}),
    "test_lab_private_home.py": frozenset(),
    "test_lab_reuse.py": frozenset(),
    "test_mptcp_d_lab.py": frozenset(),
    "test_planes_query.py": frozenset(),
    "test_transfer_close.py": frozenset(),
    "test_uml_datafin.py": frozenset(),
    "test_uml_hostvariants.py": frozenset(),
    "test_uml_join.py": frozenset(),
    "test_uml_rbuf_opti.py": frozenset(),
    "test_uml_juggler.py": frozenset(),
    "test_uml_seed003.py": frozenset(),
}


def in_lab_lane(module: str, test: str) -> bool:
    """Whether test function `test` of module file `module` runs in the lab lane."""
    held = LAB_KERNEL_MODULES.get(module)
    return held is not None and test not in held


@pytest.hookimpl(tryfirst=True)  # before the tmp_path plugin reads --basetemp
def pytest_configure(config: pytest.Config) -> None:
    # both lanes get `make test`'s ARGS: a --basetemp given there would be emptied by
    # each lane at its start, so the lab lane takes a folder of its own beside it
    basetemp = config.option.basetemp
    if basetemp and config.option.markexpr == LAB_LANE:
        config.option.basetemp = f"{basetemp}-{LAB_LANE}"


@pytest.hookimpl(tryfirst=True)  # before -m deselects by the marker
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = getattr(item, "originalname", None) or item.name
        if in_lab_lane(item.path.name, name):
            item.add_marker(LAB_LANE)
