"""The ``routerlab`` command: thin parsing and printing over the Python API.

Each command lives in a module of this package named after it and registers itself on ``app``.
User errors (:class:`routerlab.errors.RouterlabError`) and command-line usage errors (an unknown
option, a number out of range) print one line and exit with code 2. Ctrl-C prints one line saying
what was kept and how to go on (:class:`routerlab.errors.Interrupted` carries a command's own line)
and exits with code 130.
"""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable
from importlib.metadata import EntryPoint
from typing import Any

import typer
from typer._click import exceptions as click  # typer vendors click; its usage errors live here
from typer.core import TyperGroup
from typer.models import CommandInfo

from routerlab._registry import Registry
from routerlab.errors import Interrupted, RouterlabError

INTERRUPTED_GENERIC = "nothing partial was written (files are published whole or not at all); rerun the same " \
    "command to start again"
"""The Ctrl-C line of a command that keeps no partial work (long ones raise :class:`Interrupted` with their own)."""


class _Stopped(Exception):
    """A Ctrl-C inside a command, carried out of click (which would end it as a silent exit 130)."""

    def __init__(self, cause: KeyboardInterrupt) -> None:
        super().__init__(str(cause))
        self.cause = cause


class _RootGroup(TyperGroup):
    """The ``routerlab`` group: a Ctrl-C while a command runs reaches :func:`main`, which says what was kept."""

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _Stopped(exc) from None


def interrupted_line(exc: KeyboardInterrupt) -> str:
    """The one line printed on Ctrl-C: the command's own (an :class:`Interrupted`) or the generic one."""
    said = str(exc).strip() if isinstance(exc, Interrupted) else ""
    return f"routerlab: interrupted: {said or INTERRUPTED_GENERIC}"


app = typer.Typer(
    cls=_RootGroup,
    name="routerlab",
    help="Measure whether LLM routing is accurate, cheap, fast, robust and meaningful, on real data.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _show_version(value: bool) -> None:
    if value:
        from routerlab._version import __version__

        typer.echo(f"routerlab {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: bool = typer.Option(False, "--version", callback=_show_version, is_eager=True, metavar="",
                                 help="Print the routerlab version and exit."),
) -> None:
    """Measure whether LLM routing is accurate, cheap, fast, robust and meaningful, on real data."""


def _warning_printer() -> Callable[..., None]:
    """A ``warnings.showwarning`` that prints each warning as one ``routerlab: warning:`` line, and a line it
    already printed during this command not again (e.g. one per interval left out for too few queries)."""
    shown: set[str] = set()

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int, file: Any = None,
             line: Any = None) -> None:
        text = f"routerlab: warning: {message}"
        if text not in shown:
            shown.add(text)
            print(text, file=sys.stderr)

    return show


def _plugin_command(name: str, fn: Callable[..., Any], ep: EntryPoint) -> CommandInfo:
    """A ``routerlab.commands`` entry point names a function; it becomes the command ``name``."""
    app.command(name)(fn)
    return app.registered_commands[-1]


def _collect_commands(registry: Registry[CommandInfo]) -> None:
    """Record every command typer holds (built-in modules and plugins are imported by now)."""
    for info in app.registered_commands:
        callback = info.callback
        if callback is not None:
            name = info.name or typer.main.get_command_name(callback.__name__)
            registry.add(name, info, origin=f"{callback.__module__}.{callback.__qualname__}")


COMMANDS: Registry[CommandInfo] = Registry(
    "command", package=__name__, group="routerlab.commands", from_plugin=_plugin_command,
    on_load=_collect_commands,
)
"""Every command by name. Typer keeps the commands themselves (``@app.command("name")`` in each
module of this package); this registry finds those modules and the plugins the same way as every
other registry, and makes two commands under one name an error (typer alone would keep the last)."""


def _register_commands() -> None:
    """Import every command module of this package and the plugin commands (once)."""
    COMMANDS.load()


def main(argv: list[str] | None = None) -> int:
    """Console entry point; returns the exit code (0 ok, 1 failure found, 2 user error).

    Warnings print as one ``routerlab: warning:`` line while a command runs (each line once); the process's own
    warning display and filters are restored on return, so calling ``main()`` from Python (a test,
    a notebook) leaves them as they were.
    """
    with warnings.catch_warnings():
        warnings.showwarning = _warning_printer()
        return _run_command(argv)


def _run_command(argv: list[str] | None) -> int:
    try:
        _register_commands()  # inside the try: a plugin's repeated name is one error line, exit 2
        command = typer.main.get_command(app)
        # not standalone: click's usage errors come here, to be printed as one line like ours
        rv = command.main(args=argv, prog_name="routerlab", standalone_mode=False)
        return rv if isinstance(rv, int) else 0
    except RouterlabError as exc:
        print(f"routerlab: error: {exc}", file=sys.stderr)
        return 2
    except click.NoArgsIsHelpError as exc:
        exc.show()  # a bare group or command prints its help
        return exc.exit_code
    except click.ClickException as exc:
        where = f" (see '{exc.ctx.command_path} -h')" if isinstance(exc, click.UsageError) and exc.ctx else ""
        message = " ".join(exc.format_message().split())
        print(f"routerlab: error: {message}{where}", file=sys.stderr)
        return exc.exit_code
    except _Stopped as exc:
        print(interrupted_line(exc.cause), file=sys.stderr)
        return 130
    except typer.Abort:  # end of input at a prompt
        print("routerlab: interrupted", file=sys.stderr)
        return 130
    except SystemExit as exc:
        return exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    except KeyboardInterrupt as exc:  # before a command started (loading the commands, parsing)
        print(interrupted_line(exc), file=sys.stderr)
        return 130


def run() -> None:
    sys.exit(main())
