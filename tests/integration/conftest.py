"""The integration suite's two lanes (`make test`: pytest-xdist `-n 2 --dist loadgroup`).

Every test runs in the xdist group `host` (one worker, one test at a time, as the whole
suite once ran) unless its module is named below as a lab-kernel module. The `host` lane
holds everything that shares this machine's state: network namespaces, veths and
bridges of host-kernel networks and their fixed names, bmv2's fixed thrift ports and
/tmp/bmv2-<device>-notifications.ipc files, p4-ebpf's programs pinned in the bpffs,
host sysctls a network changes and puts back, the per-pid CPU cgroups, `pathdiv clean`
(it kills every lab process whose owner is gone, and asserts on how many), global
process listings (`pgrep`), and the wall-clock data planes.

A lab-kernel module runs its guests in User-Mode Linux on the virtual clock (its
figures do not depend on the host's load; kernels/uml.py) with the network inside the
guest; on the host it has only its own jail, a private uml_dir and scratch folders
under its own tmp_path, and the lab kernel and P4 program caches, which are built under
a lock or renamed into place whole (kernels/build.py, experiments/dataplane/*/programs.py).
Each such module is a group of its own, so its module-scoped fixtures are built once;
those groups share the other worker. Tests of such a module that leave lab processes
whose owner is gone on purpose (SIGKILL of the owner) stay in `host`, so that a
concurrent `pathdiv clean` neither kills them for the test nor counts them.

A new module lands in `host` until it is audited and listed here.
"""

from __future__ import annotations

import pytest

HOST_LANE = "host"

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
    "test_uml_hostvariants.py": frozenset(),
    "test_uml_juggler.py": frozenset(),
    "test_uml_seed003.py": frozenset(),
}


def lane_of(module: str, test: str) -> str:
    """The xdist group of test function `test` of module file `module`."""
    held = LAB_KERNEL_MODULES.get(module)
    if held is None or test in held:
        return HOST_LANE
    return f"lab-{module.removesuffix('.py')}"


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups into the node ids
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        name = getattr(item, "originalname", None) or item.name
        item.add_marker(pytest.mark.xdist_group(lane_of(item.path.name, name)))
