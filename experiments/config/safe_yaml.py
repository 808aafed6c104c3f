"""YAML within bounds: moved to `pathdiv.analysis.safe_yaml`, the lowest reader of YAML
(`pathdiv analyze` reads a results folder's config.yaml through the same bounds as
`pathdiv check` reads a config). Its names stay importable from here."""

from pathdiv.analysis.safe_yaml import (
    MAX_TEXT_BYTES,
    YamlRefused,
    load_text,
    shorten,
    shorten_text,
)

__all__ = ["MAX_TEXT_BYTES", "YamlRefused", "load_text", "shorten", "shorten_text"]
