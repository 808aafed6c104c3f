"""The notebooks in docs/notebooks/ run from top to bottom without an error, so they
never rot (executed with nbclient and ipykernel, the dev extras)."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import REPO

NOTEBOOKS = sorted((REPO / "docs" / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.stem)
def test_notebook_runs_green(path: Path, tmp_path):
    nbclient = pytest.importorskip("nbclient", reason="nbclient is not installed "
                                   "(pip install -e .[dev])")
    nbformat = pytest.importorskip("nbformat", reason="nbformat is not installed")
    pytest.importorskip("ipykernel", reason="ipykernel is not installed (pip install -e .[dev])")
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()
    outputs = [o for cell in nb.cells if cell.cell_type == "code" for o in cell.outputs]
    assert not [o for o in outputs if o.output_type == "error"]
    svgs = [o for o in outputs if "image/svg+xml" in o.get("data", {})]
    assert svgs and 'class="path"' in svgs[0]["data"]["image/svg+xml"]
