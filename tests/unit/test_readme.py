"""The README documents every config key the schema accepts (docs cannot drift)."""

import re

from pathdiv.experiments.config.schema import MapOf, iter_leaves
from tests.conftest import REPO


def documented_name(key: str, leaf) -> str:
    key = re.sub(r"^topology\.links\.(host|edge|core)\.", "topology.links.<tier>.", key)
    if isinstance(leaf, MapOf):
        return "factors.<factor>.<level>" if key == "factors" else f"{key}.<name>"
    return key


def test_every_config_key_is_in_the_readme():
    readme = (REPO / "README.md").read_text()
    missing = sorted({documented_name(k, leaf) for k, leaf in iter_leaves()
                      if f"`{documented_name(k, leaf)}`" not in readme})
    assert missing == [], f"README.md does not document: {', '.join(missing)}"
