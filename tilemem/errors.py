"""The one error type for bad input: it names the file, the field and the record."""
from __future__ import annotations


class ReportError(Exception):
    """Bad input. ``str(e)`` is the one-line message the CLI prints after ``tilemem: error:``.

    >>> str(ReportError("alignment must be a power of two, got 3", path="v.json",
    ...                 field="vars[2].info.alignment", var=7, tile=0))
    'v.json: alignment must be a power of two, got 3 (field vars[2].info.alignment, var 7, tile 0)'
    """

    def __init__(self, message: str, *, path=None, field: str | None = None, var=None,
                 tile=None, eq_class=None):
        super().__init__(message)
        self.message = message
        self.path = path
        self.field = field
        self.var = var
        self.tile = tile
        self.eq_class = eq_class

    def with_path(self, path) -> "ReportError":
        if self.path is None:
            self.path = path
        return self

    def __str__(self) -> str:
        where = []
        if self.field is not None:
            where.append(f"field {self.field}")
        for label, value in (("var", self.var), ("tile", self.tile), ("class", self.eq_class)):
            if value is not None:
                where.append(f"{label} {value}")
        text = f"{self.path}: {self.message}" if self.path is not None else self.message
        return f"{text} ({', '.join(where)})" if where else text


class ReportWarning(UserWarning):
    """Input tilemem accepted after repairing it (e.g. names that are not valid UTF-8). The CLI
    prints ``tilemem: warning: FILE: what (field, record)`` once the command succeeds.

    >>> str(ReportWarning("2 names are not valid UTF-8", var=7).with_path("v.json"))
    'v.json: 2 names are not valid UTF-8 (var 7)'
    """

    def __init__(self, message: str, **where):
        super().__init__(message)
        self.error = ReportError(message, **where)

    def with_path(self, path) -> "ReportWarning":
        self.error.with_path(path)
        return self

    def __str__(self) -> str:
        return str(self.error)
