"""The notebooks in docs/notebooks/ run from top to bottom without an error, so they
never rot (executed with nbclient and ipykernel, the dev extras). A notebook whose
metadata says it needs the emulation (`pathdiv.needs`) runs in
tests/integration/test_notebooks_live.py instead."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import REPO

NOTEBOOKS = sorted((REPO / "docs" / "notebooks").glob("*.ipynb"))


def needs(path: Path) -> str:
    """What a notebook needs beyond Python (its metadata's `pathdiv.needs`), or ''."""
    return str(json.loads(path.read_text()).get("metadata", {}).get("pathdiv", {})
               .get("needs", ""))


def execute(path: Path, timeout_s: int = 300) -> list:
    """Run the notebook in its folder; every code cell's outputs, none an error."""
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed "
                                   "(pip install -e .[dev])")
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip install -e .[dev])")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=timeout_s, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    return outputs


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if not needs(p)], ids=lambda p: p.stem)
def test_notebook_runs_green(path: Path, tmp_path):
    outputs = execute(path)
    svgs = [o for o in outputs if "image/svg+xml" in o.get("data", {})]
    assert svgs and 'class="path"' in svgs[0]["data"]["image/svg+xml"]
