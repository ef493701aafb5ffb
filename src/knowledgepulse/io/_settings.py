"""Settings files (domain profiles, the agent rubric): TOML, YAML or JSON, chosen by suffix."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

__all__ = ["SETTINGS_SUFFIXES", "SettingsFileError", "read_settings_file"]

SETTINGS_SUFFIXES = (".toml", ".yaml", ".yml", ".json")


class SettingsFileError(ValueError):
    """A settings file that cannot be read or parsed; the message names the file."""


def read_settings_file(path: str | Path, what: str) -> Any:
    """The parsed content of the ``what`` file at ``path`` (``what`` names it in messages).

    Each parser has its own error class (YAML's is not even a ``ValueError``); all of them, a
    file that cannot be read and an unknown suffix become one :class:`SettingsFileError`, so a
    caller reports a bad file the same way whatever its format.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix not in SETTINGS_SUFFIXES:
        raise SettingsFileError(
            f"{path}: unsupported {what} file type {suffix!r} (use .toml, .yaml or .json)"
        )
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SettingsFileError(
            f"cannot read the {what} file {str(path)!r}: {exc.strerror}"
        ) from None
    except UnicodeDecodeError as exc:
        raise SettingsFileError(f"{path}: cannot parse: not UTF-8 text ({exc.reason})") from None
    try:
        if suffix == ".toml":
            if sys.version_info >= (3, 11):
                import tomllib
            else:  # Python 3.10
                import tomli as tomllib
            return tomllib.loads(text)
        if suffix == ".json":
            import json

            return json.loads(text)
        import yaml

        return yaml.safe_load(text)
    except Exception as exc:  # each parser has its own error class; all mean "not readable"
        raise SettingsFileError(f"{path}: cannot parse: {exc}") from None
