"""Reading and writing records: the one reader (files, directories, gzip, stdin and
concatenated JSON into located records or located rejections, never an exception for bad
content) and the line writers (whole lines, ``.gz`` as members, outputs that name an input
refused), and the settings-file parser."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_attributes

if TYPE_CHECKING:
    from ._reader import (
        MAX_DEPTH as MAX_DEPTH,
    )
    from ._reader import (
        RECORD_SUFFIXES as RECORD_SUFFIXES,
    )
    from ._reader import (
        STDIN as STDIN,
    )
    from ._reader import (
        InputRecord as InputRecord,
    )
    from ._reader import (
        expand_paths as expand_paths,
    )
    from ._reader import (
        iter_records as iter_records,
    )
    from ._reader import (
        json_type_name as json_type_name,
    )
    from ._reader import (
        parse_json_bytes as parse_json_bytes,
    )
    from ._reader import (
        skipped_files as skipped_files,
    )
    from ._settings import (
        SETTINGS_SUFFIXES as SETTINGS_SUFFIXES,
    )
    from ._settings import (
        SettingsFileError as SettingsFileError,
    )
    from ._settings import (
        read_settings_file as read_settings_file,
    )
    from ._writers import (
        LineWriter as LineWriter,
    )
    from ._writers import (
        OutputClosed as OutputClosed,
    )
    from ._writers import (
        dumps as dumps,
    )
    from ._writers import (
        same_file as same_file,
    )

# Each public name and its module; __all__ derives from it. Names load on first use.
_LAZY: dict[str, str] = {
    **dict.fromkeys(
        [
            "MAX_DEPTH",
            "RECORD_SUFFIXES",
            "STDIN",
            "InputRecord",
            "expand_paths",
            "iter_records",
            "json_type_name",
            "parse_json_bytes",
            "skipped_files",
        ],
        "._reader",
    ),
    **dict.fromkeys(["SETTINGS_SUFFIXES", "SettingsFileError", "read_settings_file"], "._settings"),
    **dict.fromkeys(["LineWriter", "OutputClosed", "dumps", "same_file"], "._writers"),
}

__all__ = sorted(_LAZY)

__getattr__, __dir__ = lazy_attributes(__name__, _LAZY, __all__)
