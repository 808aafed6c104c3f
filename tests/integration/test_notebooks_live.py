"""The notebooks of docs/notebooks/ that build networks (metadata `pathdiv.needs`) run
green: docs/notebooks/live-network.ipynb compares ECMP and spraying for one transfer in
the lab kernel through `api.network`."""

from __future__ import annotations

import pytest

from tests.unit.test_notebooks import NOTEBOOKS, execute, needs

pytestmark = [pytest.mark.root, pytest.mark.slow]


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if needs(p)], ids=lambda p: p.stem)
def test_live_notebook_runs_green(path, lab_kernel, root_fabric):
    outputs = execute(path, timeout_s=900)
    text = "".join(o.get("text", "") for o in outputs if o.output_type == "stream")
    assert "ecmp   FCT" in text and "paths used 1 of 4" in text, text
    assert "spray  FCT" in text and "paths used 4 of 4" in text, text
    svgs = [o["data"]["image/svg+xml"] for o in outputs if "image/svg+xml" in o.get("data", {})]
    assert [s.count('class="path"') for s in svgs] == [1, 4]
