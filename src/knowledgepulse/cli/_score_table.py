"""``kp score --table``: every trace's score and breakdown, fitted to the terminal's width.

On a terminal (or with ``$COLUMNS`` set) the table is made to fit: the novelty's note becomes
a mark, long trace ids are cut with ``…``, the profile is left out of ``domain → profile``,
and then whole columns are left out, the least telling first. A footnote says which, since
every figure is still in the ``-o`` file. Written to a file or a pipe, the table is whole.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

__all__ = ["print_score_table", "table_row"]

#: (header, right-aligned) for each column of a row made by :func:`table_row`.
COLUMNS = (
    ("line", True),
    ("trace", False),
    ("domain → profile", False),
    ("score", True),
    ("complexity", True),
    ("novelty", True),
    ("tools", True),
    ("outcome", True),
    ("rules fired", False),
)
#: Left out in this order when the table does not fit (line, trace, score and novelty stay).
DROP_ORDER = ("rules fired", "tools", "outcome", "complexity", "domain → profile")
#: Marks that replace the novelty's note in a narrow table.
NOVELTY_MARKS = {" (no embedder)": ("*", "no embedder (0.5)"), " (first)": ("°", "first trace")}
#: A trace id is cut to this before the profile is left out, and never shorter than MIN_TRACE.
TRACE_CUT = 24
MIN_TRACE = 12


def table_row(line: Any) -> tuple[str, ...]:
    """A score line's row, in the order of :data:`COLUMNS`."""
    source = {"embedding": "", "empty_cache": " (first)", "no_embedder": " (no embedder)"}
    return (
        str(line.line),
        str(line.id).removeprefix("kp:trace:")[:40],
        line.profile if line.profile == line.domain else f"{line.domain} → {line.profile}",
        f"{line.score:.3f}" + (" ✓" if line.passed else ""),
        f"{line.complexity:.3f}",
        f"{line.novelty:.3f}{source[line.novelty_source]}",
        f"{line.tool_diversity:.3f}",
        f"{line.outcome:.3f}",
        ", ".join(line.rules),
    )


def print_score_table(
    rows: Sequence[tuple[str, ...]], threshold: float | None, output: str | None
) -> None:  # output: the -o file, named in the footnote
    """Print the table on stdout, fitted to the terminal (see the module's docstring)."""
    from rich.table import Table

    from ..runs import console_class

    title = "value scores" + (
        f" (✓ = passed threshold {threshold:g})" if threshold is not None else ""
    )
    Console = console_class()
    console = Console()
    width = console.width if console.is_terminal or _columns_set() else None
    names, fitted, notes = fit_columns(rows, width)
    table = Table(title=title, title_justify="left")
    for name in names:
        right = dict(COLUMNS).get(name, False)
        table.add_column(name, justify="right" if right else "left", no_wrap=True)
    for row in fitted:
        table.add_row(*row)
    if width is None:  # a file: the whole table, however wide
        width = sum(_column_width(names, fitted, i) for i in range(len(names)))
        width += 3 * len(names) + 1
    printer = Console(width=width)
    printer.print(table)
    for note in notes:
        if note.startswith("left out") and output not in (None, "-"):
            note += " (the -o file has every figure)"
        printer.print(note, markup=False, highlight=False)  # wrapped to the width too


def _columns_set() -> bool:
    return os.environ.get("COLUMNS", "").strip().isdigit()


def fit_columns(
    rows: Sequence[tuple[str, ...]], width: int | None
) -> tuple[list[str], list[tuple[str, ...]], list[str]]:
    """The columns and rows that fit in ``width`` cells (None: all), and notes saying what
    was marked or left out. Each step is taken only when the table does not fit yet."""
    names = [name for name, _ in COLUMNS]
    table = [tuple(row) for row in rows]
    if width is None or _table_width(names, table) <= width:
        return names, table, []
    notes: list[str] = []
    left_out: list[str] = []
    # 1. The novelty's note as a mark; long trace ids may be cut to TRACE_CUT.
    novelty = names.index("novelty")
    used: dict[str, str] = {}
    for number, row in enumerate(table):
        cell = row[novelty]
        for note, (mark, meaning) in NOVELTY_MARKS.items():
            if cell.endswith(note):
                cell = cell.removesuffix(note) + mark
                used[mark] = meaning
        table[number] = _replaced(row, novelty, cell)
    if used:
        notes.append("novelty: " + ", ".join(f"{mark} {what}" for mark, what in used.items()))
    # 2. The domain without its profile.
    if _table_width(names, table, trace=TRACE_CUT) > width:
        domain = names.index("domain → profile")
        table = [_replaced(row, domain, row[domain].split(" → ")[0]) for row in table]
        names[domain] = "domain"
        left_out.append("profile")
    # 3. Whole columns, the least telling first, until the rest fits with ids cut short.
    for name in DROP_ORDER:
        if _table_width(names, table, trace=MIN_TRACE) <= width:
            break
        shown = "domain" if name == "domain → profile" else name
        index = names.index(shown)
        del names[index]
        table = [row[:index] + row[index + 1 :] for row in table]
        left_out.append(shown)
    # 4. Long trace ids cut to the room left.
    trace = names.index("trace")
    room = max(width - _table_width(names, table, trace=0), MIN_TRACE)
    table = [_replaced(row, trace, _cut(row[trace], room)) for row in table]
    if left_out:
        notes.append(f"left out to fit {width} columns: " + ", ".join(left_out))
    return names, table, notes


def _replaced(row: tuple[str, ...], index: int, cell: str) -> tuple[str, ...]:
    return (*row[:index], cell, *row[index + 1 :])


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"


def _column_width(names: Sequence[str], rows: Sequence[tuple[str, ...]], index: int) -> int:
    from rich.cells import cell_len

    return max([cell_len(names[index])] + [cell_len(row[index]) for row in rows])


def _table_width(
    names: Sequence[str], rows: Sequence[tuple[str, ...]], *, trace: int | None = None
) -> int:
    """Cells the table takes: each column, its padding (2) and its left border, one more."""
    widths = [
        trace if trace is not None and name == "trace" else _column_width(names, rows, i)
        for i, name in enumerate(names)
    ]
    if trace is not None and "trace" in names:
        i = names.index("trace")
        widths[i] = min(_column_width(names, rows, i), trace)
    return sum(widths) + 3 * len(names) + 1
