"""The integration suite's lanes (tests/integration/conftest.py) name only what exists: a
renamed module would drop out of the lab lane, and a renamed test held in the host lane
(it leaves orphaned lab processes on purpose) would silently join the lab lane."""

from __future__ import annotations

import ast

from tests.conftest import REPO
from tests.integration.conftest import LAB_KERNEL_MODULES, in_lab_lane

INTEGRATION = REPO / "tests" / "integration"


def functions_of(module: str) -> set[str]:
    tree = ast.parse((INTEGRATION / module).read_text())
    return {node.name for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}


def test_every_lab_lane_module_and_held_test_exists() -> None:
    for module, held in LAB_KERNEL_MODULES.items():
        assert (INTEGRATION / module).is_file(), module
        missing = held - functions_of(module)
        assert not missing, f"{module}: no test {sorted(missing)} to hold in the host lane"


def test_unlisted_modules_and_held_tests_run_in_the_host_lane() -> None:
    assert not in_lab_lane("test_fattree.py", "test_pingall_in_every_mode")
    assert not in_lab_lane("test_lab_kernel.py",
                           "test_sigkill_of_the_owner_ends_its_uml_without_clean")
    assert in_lab_lane("test_lab_kernel.py", "test_the_guest_writes_only_into_the_share")
    assert in_lab_lane("test_uml_seed003.py", "test_olia_carries_a_transfer")
