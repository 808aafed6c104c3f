"""pathdiv: a testbed for multipath transport research in data-center networks."""

from setuptools import find_packages, setup

# The product's top-level folders install as one `pathdiv` package: pathdiv.experiments is
# experiments/, and so on, so nothing generic lands at the top of site-packages. The
# package's own top is pathdiv/__init__.py, the face that gives `import pathdiv` the
# public API (pathdiv.run, pathdiv.network, ...: docs/api.md) without moving a folder.
FOLDERS = ("topologies", "experiments", "analysis", "kernels")

setup(
    name="pathdiv",
    version="0.1.0",
    description=(
        "Emulated fat trees with ECMP, packet spraying and MPTCP, measured from "
        "packet captures and compared with two-way MANOVA"
    ),
    python_requires=">=3.11",
    packages=["pathdiv",
              *(f"pathdiv.{p}" for p in find_packages(include=[f"{f}*" for f in FOLDERS]))],
    package_dir={"pathdiv": "pathdiv", **{f"pathdiv.{f}": f for f in FOLDERS}},
    package_data={"pathdiv.analysis.references": ["*.yaml"],
                  # the lab kernel's recipe: the schema's schedulers and CCs are read from it
                  "pathdiv.kernels": ["patches/*.patch", "uml.config"],
                  # the link captures' program, compiled on first use (fabric/linkcap.py)
                  "pathdiv.experiments.fabric": ["linkcap.c"]},
    install_requires=[
        "pyyaml>=6",
        "numpy>=1.24",
        "pandas>=2.0",
        "scipy>=1.10",
        "statsmodels>=0.14",
        "scapy>=2.5",
        "dpkt>=1.9.8",
        "matplotlib>=3.7",
        "tqdm>=4.66",
    ],
    # nbclient/nbformat/ipykernel: the test suite executes docs/notebooks/
    # pytest-xdist: `make test` runs the unit tests in two processes
    extras_require={"dev": ["pytest>=7.4", "pytest-xdist>=3.5", "ruff>=0.6", "mypy>=1.10",
                            "nbclient>=0.10", "nbformat>=5.9", "ipykernel>=6.29"]},
    entry_points={"console_scripts": ["pathdiv=pathdiv.experiments.cli:main"]},
)
