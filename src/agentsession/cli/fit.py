"""Tables that fit the width they are printed at (the CLI's listings at 80 columns).

A :class:`FitTable` is a rich renderable: when printed it drops its least needed
columns until the rest fit the console's width, gives its text columns what is left
(they wrap), and never cuts a column that does not wrap, nor an id inside a text
column (a wrapping column is never narrower than its longest word holding an id), so
an id is always whole on one line and can be copied into the next command. The caption
names the columns left out; ``--json`` has every field. A table without rows is one
line saying so (``no runs``), not a row of headers.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Literal

from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, RenderResult
from rich.table import Table
from rich.text import Text

from ..ids import ID_PATTERN

__all__ = ["Cell", "Column", "FitTable"]

#: A cell: a ``Text`` shown as it is, a ``str`` read as rich markup (a coloured status).
Cell = str | Text


@dataclass(frozen=True)
class Column:
    """One column of a :class:`FitTable`.

    Attributes:
        header: the column's heading.
        drop: 0 for a column always shown; when the width is short, the column with
            the highest rank is left out first (then the next, until the rest fit).
        wrap: 0 for a column shown whole on one line (ids, numbers, statuses, times);
            else a text column that wraps, down to this many characters wide.
        justify: the cells' alignment.
    """

    header: str
    drop: int = 0
    wrap: int = 0
    justify: Literal["left", "right"] = "left"


def _width(cell: Text) -> int:
    """The widest line of a cell, in terminal cells."""
    return max((cell_len(line) for line in cell.plain.split("\n")), default=0)


def _id_word(cell: Text) -> int:
    """The widest word of a cell that holds an id (0 if none): a wrapping column this
    narrow still shows it on one line."""
    words = (w for w in cell.plain.split() if ID_PATTERN.search(w))
    return max((cell_len(w) for w in words), default=0)


class FitTable:
    """A table of text cells that picks its columns for the width it is printed at.

    Args:
        title: the table's title.
        columns: the columns, in display order.
        rows: one sequence of cells per row, one cell per column.
        empty: the line printed instead of the table when there are no rows
            (``no runs``).
    """

    def __init__(
        self, title: str, columns: Sequence[Column], rows: Iterable[Sequence[Cell]], empty: str
    ) -> None:
        self.title = title
        self.empty = empty
        self.columns = tuple(columns)
        self.rows = [
            tuple(c if isinstance(c, Text) else Text.from_markup(c) for c in row) for row in rows
        ]
        self.natural = [
            max([cell_len(col.header), *(_width(row[i]) for row in self.rows)])
            for i, col in enumerate(self.columns)
        ]
        self.id_words = [
            max((_id_word(row[i]) for row in self.rows), default=0)
            for i in range(len(self.columns))
        ]

    def _least(self, i: int) -> int:
        """The narrowest column ``i`` may be: its whole width, or its wrap width but
        never narrower than its widest word holding an id."""
        wrap = self.columns[i].wrap
        return max(min(self.natural[i], wrap), self.id_words[i]) if wrap else self.natural[i]

    def _needed(self, shown: Sequence[int]) -> int:
        """The table's width with ``shown`` at their least: a border before each column
        and after the last, one space of padding each side of a cell."""
        return sum(self._least(i) for i in shown) + 3 * len(shown) + 1

    def fitting(self, width: int) -> list[int]:
        """The indexes of the columns shown at ``width``: every column, less the
        highest ``drop`` ranks (latest first among equals) until the rest fit, never
        one of rank 0."""
        shown = list(range(len(self.columns)))
        ranked = (i for i, col in enumerate(self.columns) if col.drop)
        droppable = sorted(ranked, key=lambda i: (-self.columns[i].drop, -i))
        for i in droppable:
            if self._needed(shown) <= width:
                break
            shown.remove(i)
        return shown

    def _wrap_widths(self, shown: list[int], width: int) -> dict[int, int]:
        """Widths of the wrapping columns: each its least, then what is left to the
        ones that need the least more first (a date that unfolds before long text)."""
        wrapping = [i for i in shown if self.columns[i].wrap]
        widths = {i: self._least(i) for i in wrapping}
        left = width - self._needed(shown)
        for i in sorted(wrapping, key=lambda i: self.natural[i] - widths[i]):
            more = min(left, self.natural[i] - widths[i])
            widths[i] += more
            left -= more
        return widths

    def table(self, width: int) -> Table:
        """The rich table for a console ``width`` cells wide."""
        shown = self.fitting(width)
        fits = self._needed(shown) <= width
        widths = self._wrap_widths(shown, width) if fits else {}
        left_out = [col.header for i, col in enumerate(self.columns) if i not in shown]
        caption = (
            f"not shown at this width: {', '.join(left_out)} (--json has every field)"
            if left_out
            else None
        )
        table = Table(title=self.title, caption=caption)
        for i in shown:
            col = self.columns[i]
            table.add_column(
                col.header,
                justify=col.justify,
                no_wrap=not col.wrap,
                width=widths.get(i),
                overflow="fold",  # a long word folds (one holding an id fits: _least)
            )
        for row in self.rows:
            table.add_row(*(row[i] for i in shown))
        return table

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        yield self.table(options.max_width) if self.rows else Text(self.empty)
