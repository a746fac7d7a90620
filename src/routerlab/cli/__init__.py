"""The ``routerlab`` command: thin parsing and printing over the Python API.

Each command lives in a module of this package named after it and registers itself on ``app``.
User errors (:class:`routerlab.errors.RouterlabError`) and command-line usage errors (an unknown
option, a number out of range) print one line and exit with code 2. Ctrl-C prints one line saying
what was kept and how to go on (:class:`routerlab.errors.Interrupted` carries a command's own line)
and exits with code 130.

Start-up stays light (tests/test_startup.py, benchmarks/bench_startup.py): ``routerlab --version`` imports
no command module; a command line imports its own command module only and builds only that command; the
command list of ``routerlab -h`` reads each command's docstring without building it. Command modules import
heavy things (numpy, pyarrow, the protocols) inside their functions, and read a protocol's settings for an
option's help only when the command is built (two-model and perturb still read option defaults from their
protocol when imported).
"""

from __future__ import annotations

import contextlib
import copy
import importlib
import importlib.util
import inspect
import os
import re
import shutil
import sys
import textwrap
import warnings
from collections.abc import Callable, Iterator, MutableMapping
from importlib import metadata
from importlib.metadata import EntryPoint
from typing import Any

import typer
from typer._click import exceptions as click  # typer vendors click; its usage errors live here
from typer._click.core import Command, Context
from typer._click.formatting import HelpFormatter
from typer.core import TyperCommand, TyperGroup
from typer.models import CommandInfo, DefaultPlaceholder, TyperInfo

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


def interrupted_line(exc: KeyboardInterrupt) -> str:
    """The one line printed on Ctrl-C: the command's own (an :class:`Interrupted`) or the generic one."""
    said = str(exc).strip() if isinstance(exc, Interrupted) else ""
    return f"routerlab: interrupted: {said or INTERRUPTED_GENERIC}"

HELP_WIDTH = 120
"""Columns of a help page that goes to a pipe or a file (rich's own default there is 80, which cut option
defaults such as ``oracle,random,best-single,knn`` to ``oracle,random,best-single…``); in a terminal help
uses the terminal's width, and ``$COLUMNS`` overrides both. Below this width rich's tables would shorten long
tokens with "…", so a narrower page is plain click formatting instead, which wraps at spaces and drops
nothing."""


def _reflow(text: str | None) -> str | None:
    """Help text with each paragraph on one line: rich keeps a docstring's single line breaks in a command's
    description and in the command list, which broke sentences where the source lines ended."""
    if not text:
        return text
    paragraphs = inspect.cleandoc(text).split("\n\n")
    return "\n\n".join(p if p.startswith("\b") else " ".join(line.strip() for line in p.splitlines())
                       for p in paragraphs)


class _WholeWords(textwrap.TextWrapper):
    """Click's wrapping without its cuts: a line never breaks at a hyphen (``best-`` / ``single``) nor inside a
    token longer than the line, which stands on a line of its own instead. Keeps click's ``extra_indent``."""

    def __init__(self, width: int = 70, **kwargs: Any) -> None:
        super().__init__(width, **{**kwargs, "break_on_hyphens": False, "break_long_words": False})

    @contextlib.contextmanager
    def extra_indent(self, indent: str) -> Iterator[None]:
        saved = self.initial_indent, self.subsequent_indent
        self.initial_indent += indent
        self.subsequent_indent += indent
        try:
            yield
        finally:
            self.initial_indent, self.subsequent_indent = saved

    def indent_only(self, text: str) -> str:
        lines = text.splitlines()
        return "\n".join((self.initial_indent if i == 0 else self.subsequent_indent) + line
                         for i, line in enumerate(lines))


def _help_width() -> int:
    """The columns a help page may use: ``$COLUMNS``, else the terminal's width, else :data:`HELP_WIDTH` (a pipe
    or a file)."""
    columns = os.environ.get("COLUMNS", "")
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    if sys.stdout.isatty():
        return shutil.get_terminal_size((HELP_WIDTH, 24)).columns
    return HELP_WIDTH


def _format_wide(command: TyperCommand | TyperGroup, format_help: Callable[[Context, HelpFormatter], None],
                 ctx: Context, formatter: HelpFormatter) -> None:
    """Draw ``command``'s help page at :func:`_help_width` columns: rich's boxes when they fit without shortening
    a word, plain click formatting on a narrower page. Typer's and the command's own settings are restored
    afterwards (calling ``main()`` from Python leaves no state behind)."""
    width = _help_width()
    if width < HELP_WIDTH:
        from typer._click import _textwrap

        saved_mode, saved_wrapper = command.rich_markup_mode, _textwrap.TextWrapper
        command.rich_markup_mode = None  # typer's plain path: click's formatter
        setattr(_textwrap, "TextWrapper", _WholeWords)  # noqa: B010 (whose wrapper, for this page, keeps words whole)
        formatter.width = max(width - 2, 40)
        try:
            format_help(ctx, formatter)
        finally:
            command.rich_markup_mode = saved_mode
            setattr(_textwrap, "TextWrapper", saved_wrapper)  # noqa: B010
        return
    from typer import rich_utils

    saved = rich_utils.MAX_WIDTH
    if os.environ.get("TERMINAL_WIDTH") is None:  # typer's own setting, when a user gave it, stands
        rich_utils.MAX_WIDTH = width
    try:
        format_help(ctx, formatter)
    finally:
        rich_utils.MAX_WIDTH = saved


class _Command(TyperCommand):
    """A command whose help page is drawn wide (see :func:`_format_wide`)."""

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        _format_wide(self, super().format_help, ctx, formatter)


class _Group(TyperGroup):
    """A group of commands (``routerlab results``) whose help page is drawn wide."""

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        _format_wide(self, super().format_help, ctx, formatter)


Entry = CommandInfo | TyperInfo
"""A command (``@app.command``) or a group of them (``app.add_typer``, e.g. ``routerlab results``)."""


def _build(info: Entry) -> Command:
    """The click command of one registered command or group, its help reflowed and drawn wide."""
    info = copy.copy(info)  # the registered entry stays as it was
    if isinstance(info, TyperInfo):
        if info.cls is None or isinstance(info.cls, DefaultPlaceholder):
            info.cls = _Group
        group = typer.main.get_group_from_info(info, pretty_exceptions_short=_ROOT.pretty_exceptions_short,
                                               rich_markup_mode=_ROOT.rich_markup_mode,
                                               suggest_commands=_ROOT.suggest_commands)
        assert info.typer_instance is not None
        for sub in info.typer_instance.registered_commands:
            group.commands[_entry_name(sub)] = _build(sub)
        command: Command = group
    else:
        if info.cls in (None, TyperCommand):
            info.cls = _Command
        command = typer.main.get_command_from_info(info, pretty_exceptions_short=_ROOT.pretty_exceptions_short,
                                                   rich_markup_mode=_ROOT.rich_markup_mode)
    from routerlab.metrics.sources import resolve

    command.help = _help_text(command.help)
    command.short_help = _help_text(command.short_help) or _first_paragraph(command.help)
    for param in command.params:
        text = getattr(param, "help", None)
        if text:
            param.help = resolve(text)  # type: ignore[attr-defined]
    return command


_MODULE_OF = {"import": "data_cmds", "formats": "data_cmds", "info": "data_cmds",
              "scaling": "evaluate_cmd", "groups": "evaluate_cmd"}
"""The built-in commands whose module is not named after them (``<name>_cmd``, dashes as underscores)."""


def _entry_name(info: Entry) -> str:
    """The name a command or group is called by."""
    if isinstance(info, TyperInfo):
        name = info.name
        return "" if isinstance(name, DefaultPlaceholder) or name is None else name
    return info.name or (typer.main.get_command_name(info.callback.__name__) if info.callback else "")


def _registered() -> list[Entry]:
    """What registered on ``app`` so far, in the order help lists it: the commands by their module's place in
    this package (then plugins), each module's in the order it declares them, then the groups. Registration
    order alone would depend on which command ran first in the process."""
    import pkgutil

    rank = {f"{__name__}.{m.name}": i for i, m in enumerate(pkgutil.iter_modules(__path__))}

    def where(pair: tuple[int, CommandInfo]) -> tuple[int, int]:
        module = getattr(pair[1].callback, "__module__", "")
        return rank.get(module, len(rank)), pair[0]

    commands = [info for _, info in sorted(enumerate(app.registered_commands), key=where)]
    return [*commands, *app.registered_groups]


def _module_for(name: str) -> str:
    """The module of this package that defines the built-in command ``name``, if there is one."""
    return f"{__name__}.{_MODULE_OF.get(name, name.replace('-', '_') + '_cmd')}"


def _own_module(name: str) -> Entry | None:
    """The built-in command ``name`` found by importing its module alone (the cheap path of a command line);
    None when there is no such module, or when a plugin claims the name too (then the full registry, which
    reports the clash, decides)."""
    if not re.fullmatch(r"[a-z][a-z0-9-]*", name):
        return None
    module = _module_for(name)
    if importlib.util.find_spec(module) is None:
        return None
    if any(ep.name == name for ep in metadata.entry_points(group=COMMANDS.group or "")):
        return None
    importlib.import_module(module)
    return next((info for info in _registered() if _entry_name(info) == name), None)


def _help_text(text: str | None) -> str | None:
    """A command's help as users read it: one paragraph per line, a docstring's "SPEC 4" (the developers'
    specification) as the paper and section."""
    if not text:
        return text
    from routerlab.metrics.sources import resolve

    return _reflow(resolve(text))


def _first_paragraph(text: str | None) -> str | None:
    """The command list shows a command's whole first paragraph, wrapped (click would shorten it with "...")."""
    return text.split("\n\n")[0] if text else None


def _summary(info: Entry) -> Command:
    """What the command list needs of a command (its name and first paragraph), without building it: building
    evaluates every option's help, and some read a protocol's settings (numpy, pyarrow, the protocols)."""
    if isinstance(info, TyperInfo):
        text: str | None = typer.main.solve_typer_info_help(info)
        hidden, deprecated, panel = bool(info.hidden), bool(info.deprecated), None
    else:
        text = inspect.cleandoc(info.help) if info.help else inspect.getdoc(info.callback)
        hidden, deprecated, panel = info.hidden, info.deprecated, info.rich_help_panel
    text = _help_text(text)
    command = TyperCommand(name=_entry_name(info), help=text, short_help=_first_paragraph(text), hidden=hidden,
                           deprecated=deprecated)
    command.rich_help_panel = None if isinstance(panel, DefaultPlaceholder) else panel
    return command


class _LazyCommands(MutableMapping[str, Command]):
    """The root group's commands by name, in the order they registered. Running a command imports its own
    module only (start-up cost of that command alone); listing them (help, a misspelt name) imports every
    command module and the plugins. A command is built when first asked for."""

    def __init__(self, built: MutableMapping[str, Command]) -> None:
        self._built = dict(built)

    @staticmethod
    def _infos() -> dict[str, Entry]:
        COMMANDS.load()  # a name registered twice is a RegistryError here: one line, exit 2
        known = dict(COMMANDS.items())
        ordered = {_entry_name(info): info for info in _registered() if known.get(_entry_name(info)) is info}
        return {**ordered, **known}

    def __getitem__(self, name: str) -> Command:
        if name not in self._built:
            info = _own_module(name) or self._infos().get(name)
            if info is None:
                raise KeyError(name)
            self._built[name] = _build(info)
        return self._built[name]

    def __setitem__(self, name: str, command: Command) -> None:
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        del self._built[name]

    def __iter__(self) -> Iterator[str]:
        return iter(dict.fromkeys([*self._infos(), *self._built]))

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def summary(self, name: str) -> Command | None:
        """The command ``name`` as the command list shows it: built already, or a summary of it."""
        if name in self._built:
            return self._built[name]
        info = self._infos().get(name)
        return None if info is None else _summary(info)


class _LazyGroup(TyperGroup):
    """The ``routerlab`` group: its commands are :class:`_LazyCommands`, and its help is drawn wide."""

    def __init__(self, **attrs: Any) -> None:
        super().__init__(**attrs)
        self.commands = _LazyCommands(self.commands)

    def list_commands(self, ctx: Context) -> list[str]:
        return list(self.commands)  # the names only: typer's own builds every command to list them

    def format_help(self, ctx: Context, formatter: HelpFormatter) -> None:
        self._listing = True  # the command list reads summaries: no command is built to be listed
        try:
            _format_wide(self, super().format_help, ctx, formatter)
        finally:
            self._listing = False

    def invoke(self, ctx: Any) -> Any:
        """Run the command; a Ctrl-C while it runs reaches :func:`main`, which says what was kept."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt as exc:
            raise _Stopped(exc) from None

    def get_command(self, ctx: Context, cmd_name: str) -> Command | None:
        if getattr(self, "_listing", False) and isinstance(self.commands, _LazyCommands):
            return self.commands.summary(cmd_name)
        return super().get_command(ctx, cmd_name)


_ROOT = typer.Typer(
    name="routerlab",
    help="Measure whether LLM routing is accurate, cheap, fast, robust and meaningful, on real data.",
    cls=_LazyGroup,
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)
"""The ``routerlab`` group itself (its options and help); its commands come from ``app``, lazily."""

app = typer.Typer(add_completion=False, pretty_exceptions_enable=False,
                  context_settings={"help_option_names": ["-h", "--help"]})
"""Where every command registers (``@app.command("name")``); ``typer.main.get_command(app)`` builds them all."""


def _show_version(value: bool) -> None:
    if value:
        from routerlab._version import __version__

        typer.echo(f"routerlab {__version__}")
        raise typer.Exit()


@_ROOT.callback()
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


def _collect_commands(registry: Registry[Entry]) -> None:
    """Record every command and group typer holds (built-in modules and plugins are imported by now)."""
    for info in app.registered_commands:
        callback = info.callback
        if callback is not None:
            registry.add(_entry_name(info), info, origin=f"{callback.__module__}.{callback.__qualname__}")
    for group in app.registered_groups:
        registry.add(_entry_name(group), group, origin=f"the command group {_entry_name(group)!r}")


COMMANDS: Registry[Entry] = Registry(
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
        command = typer.main.get_command(_ROOT)  # no command is imported or built until it is asked for
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
    code = main()
    # CPython remembers a Ctrl-C that left any exec()/eval() of a string (an import interrupted inside
    # dataclasses' or scipy's generated code does) and, under ``python -m``, ends the process by SIGINT
    # instead of with this exit code; evaluating a string clears that memory.
    eval("None")
    sys.exit(code)
