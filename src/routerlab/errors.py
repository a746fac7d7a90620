"""User-facing errors: each names what is wrong and where (file, row, field).

The CLI prints ``str(error)`` as one line and exits with code 2; a Python traceback is only
ever shown for a bug in routerlab itself.
"""

from __future__ import annotations

from pathlib import Path


class RouterlabError(Exception):
    """Base class of every error caused by the user's input or request."""


class DataError(RouterlabError):
    """Bad input data: a missing file, a wrong format or a malformed row.

    The message reads ``FILE, row R, field F: what is wrong`` with the parts that are known.
    Rows are 1-based as a person counts them in an editor (header lines count for CSV).
    """

    def __init__(
        self,
        message: str,
        *,
        file: str | Path | None = None,
        row: int | None = None,
        field: str | None = None,
    ) -> None:
        self.file = None if file is None else str(file)
        self.row = row
        self.field = field
        self.detail = message
        where = []
        if self.file is not None:
            where.append(self.file)
        if row is not None:
            where.append(f"row {row}")
        if field is not None:
            where.append(f"field {field!r}")
        super().__init__(f"{', '.join(where)}: {message}" if where else message)


class UsageError(RouterlabError):
    """A request that cannot be carried out as asked (unknown format, bad option value)."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during long work that keeps what it finished. The message says what was kept and how to resume
    (``"32 of 64 cells stored in DIR; rerun the same command to resume"``); the CLI prints it as one line and
    exits with code 130. A subclass of :class:`KeyboardInterrupt`, so every handler of a Ctrl-C still sees one."""
