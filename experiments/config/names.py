"""Where a config named on the command line is: a path, or a name in configs/.

`pathdiv run noisy`, `pathdiv check noisy.yaml` and `make experiment CONFIG=noisy.yaml`
all mean configs/noisy.yaml: a name that is not an existing file is looked up in the
configs/ folder of the current directory, then in the checkout's own, with `.yaml` added
when left out. A name that matches nothing lists the configs there are.
"""

from __future__ import annotations

from pathlib import Path

from pathdiv.experiments.config.load import ConfigError

REPO_CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def config_folders(cwd: Path | None = None) -> list[Path]:
    folders = [(cwd or Path.cwd()) / "configs", REPO_CONFIGS]
    unique: list[Path] = []
    for folder in folders:
        if folder.is_dir() and folder.resolve() not in [f.resolve() for f in unique]:
            unique.append(folder)
    return unique


def resolve_config(name: str | Path, cwd: Path | None = None) -> Path:
    """The file `name` means; ConfigError listing the available configs if none."""
    given = Path(name)
    if given.is_file() or given.is_absolute() or len(given.parts) > 1:
        return given  # a path: read as given (a missing file is reported by load)
    folders = config_folders(cwd)
    candidates = [given.name] if given.suffix in (".yaml", ".yml") else [
        given.name, f"{given.name}.yaml"]
    for folder in folders:
        for candidate in candidates:
            if (folder / candidate).is_file():
                return folder / candidate
    available = sorted({p.stem for f in folders for p in f.glob("*.yaml")})
    where = " or ".join(str(f) for f in folders) or "configs/"
    raise ConfigError([f"no config {str(name)!r}: it is not a file, nor a config in {where}; "
                       f"configs there: {', '.join(available) or 'none'}"], str(name))
