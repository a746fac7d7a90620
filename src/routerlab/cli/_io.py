"""Small shared pieces of the CLI: opening a table argument, printing JSON, checking an output path (and refusing
to overwrite one without ``--force``)."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar, cast

import typer
from typer.models import OptionInfo

from routerlab._atomic import probe_writable
from routerlab.errors import Interrupted, UsageError

F = TypeVar("F", bound=Callable[..., Any])

if TYPE_CHECKING:
    from routerlab.data.table import RoutingTable

# Seeds are 32-bit: numpy refuses negative seeds, and some seeded draws pack the seed into an int64 array.
SEED_MAX = 2**32 - 1


def seed_option(help_text: str = "Seed for splits, draws, routers and the bootstrap.") -> OptionInfo:
    """The ``--seed`` option every command shares: an integer in 0..2^32-1 (a usage error otherwise)."""
    option: OptionInfo = typer.Option(min=0, max=SEED_MAX, help=help_text)
    return option


def json_option(help_text: str = "Print one JSON object instead of text.") -> OptionInfo:
    """A plain ``--json`` flag (no ``<bool>`` in the help)."""
    option: OptionInfo = typer.Option("--json", metavar="", help=help_text)
    return option


FORCE_HELP = "Overwrite an output that already exists (files of the same names are replaced, no other is removed)."


def force_option(help_text: str = FORCE_HELP) -> OptionInfo:
    """The ``--force`` flag of every command that writes a file or directory (see :func:`refuse_overwrite`)."""
    option: OptionInfo = typer.Option("--force", metavar="", help=help_text)
    return option


def refuse_overwrite(path: Path, force: bool, *, option: str = "-o", what: str | None = None) -> None:
    """The one rule of every output a command writes: one that is already there (a file, or a directory that is
    not empty) is overwritten only with ``--force``; without it, one UsageError (exit 2) naming the option and the
    path, before anything is loaded. ``what`` says what is there where the caller knows (a routerlab table).
    Resumable outputs (the results store, the audit and call caches, extract's signals directory) do not come
    here: a rerun reusing them is what they are for."""
    if force:
        return
    if what is None:
        if path.is_dir():
            try:
                if not any(path.iterdir()):
                    return
            except OSError:  # an unreadable directory: whether it holds anything is unknown
                pass
            what = "already exists and is not empty"
        elif path.exists() or path.is_symlink():
            what = "already exists"
        else:
            return
    raise UsageError(f"{option} {path}: {what}; pass --force to overwrite it")


def on_interrupt(say: Callable[[dict[str, Any]], str | None]) -> Callable[[F], F]:
    """Decorate a long command (under ``@app.command``) with its own Ctrl-C line: ``say(arguments)``, given the
    command's arguments by name, tells what was kept and how to resume (None: the generic line). The CLI prints
    it and exits with code 130 (:class:`routerlab.errors.Interrupted`); a line raised deeper down wins."""
    def decorate(fn: F) -> F:
        @functools.wraps(fn)
        def command(*args: Any, **kwargs: Any) -> Any:
            try:
                return fn(*args, **kwargs)
            except Interrupted:
                raise
            except KeyboardInterrupt:
                line = say(kwargs)
                if line is None:
                    raise
                raise Interrupted(line) from None

        return cast(F, command)

    return decorate


def call_cache_kept(cache_dir: Path | None, what: str, lost: str) -> str:
    """The Ctrl-C line of a command whose LLM calls go through the on-disk call cache: ``what`` came back so far
    and is kept there, ``lost`` says what was not written; the same command resumes."""
    from routerlab.llm.cache import default_cache_dir

    where = cache_dir if cache_dir is not None else default_cache_dir()
    return (f"the {what} received so far are kept in the call cache {where}, {lost}; rerun the same command to "
            "resume (a cached call is not made again)")


def open_table(path: Path | None) -> RoutingTable:
    """A saved table directory, or the embedded demo benchmark when no path is given."""
    if path is None:
        from routerlab.datasets import demo

        return demo()
    from routerlab.data.store import load

    return load(path)


def print_json(obj: Any) -> None:
    from routerlab.reports.files import dumps

    sys.stdout.write(dumps(obj) + "\n")


def emit_record(record: dict[str, Any], output: Path | None, name: str, as_json: bool, text: Callable[[], str]
                ) -> None:
    """The end of a command with one JSON result: ``output/name`` written (atomically) when ``-o`` was given,
    then either the record as JSON or ``text()`` on stdout, and the ``wrote PATH`` line (on stderr with JSON)."""
    from routerlab.reports.files import say_written, write_json

    written = []
    if output is not None:
        output.mkdir(parents=True, exist_ok=True)
        write_json(output / name, record)
        written.append(output / name)
    if as_json:
        print_json(record)
    else:
        typer.echo(text())
    say_written(written, to_stderr=as_json)


def check_output_dir(path: Path, *, option: str = "-o") -> None:
    """Refuse, before any data is loaded or computed, an output directory that cannot be written: an
    existing file (or a path under one), a directory without write permission, or a new path whose
    nearest existing parent cannot be written. One UsageError naming the path."""
    if path.exists() and not path.is_dir():
        raise UsageError(f"{option} {path}: is an existing file, not a directory")
    probe = path
    while not probe.exists():
        if probe.is_symlink():  # a dangling link: the directory could never be created through it
            raise UsageError(f"{option} {path}: {probe} is a broken symbolic link")
        parent = probe.parent
        if parent == probe:
            break
        probe = parent
    if not probe.is_dir():
        raise UsageError(f"{option} {path}: cannot create a directory under {probe}, which is a file")
    if not probe_writable(probe):
        where = "" if probe == path else f" (its nearest existing parent {probe} is not writable)"
        raise UsageError(f"{option} {path}: cannot write there{where}")


def check_file_parent(path: Path, *, option: str = "-o") -> None:
    """Refuse, before anything is loaded, an output file whose directory cannot be made or written: a dangling
    link or a file on the way, or a nearest existing parent without write permission. One UsageError."""
    probe = path.parent
    while not probe.exists():
        if probe.is_symlink():
            raise UsageError(f"{option} {path}: {probe} is a broken symbolic link")
        if probe.parent == probe:
            break
        probe = probe.parent
    if not probe.is_dir():
        raise UsageError(f"{option} {path}: cannot create it under {probe}, which is a file")
    if not probe_writable(probe):
        raise UsageError(f"{option} {path}: cannot write there ({probe} is not writable)")
