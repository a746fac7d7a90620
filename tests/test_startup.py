"""Start-up (issue 21): a command imports what it uses and no more. ``routerlab --version`` imports neither numpy
nor pyarrow, ``routerlab routers`` neither pyarrow nor scipy, ``routerlab metrics`` no numpy; each command line
imports its own command module only, and the help pages are drawn wide with whole sentences."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from routerlab import cli
from routerlab.cli import main

SRC = Path(__file__).resolve().parents[1] / "src"
PROBE = ("import json, sys\nfrom routerlab.cli import main\nrc = main(sys.argv[1:])\n"
         "print(json.dumps(sorted(sys.modules)), file=sys.stderr)\nsys.exit(rc)\n")


def imported_by(*args: str) -> set[str]:
    """The modules a fresh interpreter holds after running ``routerlab ARGS``."""
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, timeout=120,
                          env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def test_version_imports_neither_numpy_nor_pyarrow() -> None:
    modules = imported_by("--version")
    assert not {"numpy", "pyarrow", "scipy", "sklearn", "torch"} & modules
    assert not [m for m in modules if m.startswith("routerlab.cli.")]  # no command module either


def test_plain_import_of_routerlab_is_light() -> None:
    proc = subprocess.run([sys.executable, "-c", "import json, sys, routerlab; print(json.dumps(sorted(sys.modules)))"],
                          capture_output=True, text=True, timeout=120, env={"PYTHONPATH": str(SRC)}, check=True)
    assert not {"numpy", "pyarrow"} & set(json.loads(proc.stdout))


def test_routers_imports_its_module_only_and_no_pyarrow_or_scipy() -> None:
    modules = imported_by("routers")
    assert {"numpy", "routerlab.cli.routers_cmd"} <= modules
    assert not {"pyarrow", "scipy", "sklearn", "torch", "matplotlib", "duckdb"} & modules
    assert [m for m in modules if m.startswith("routerlab.cli.") and not m.startswith("routerlab.cli._")] == [
        "routerlab.cli.routers_cmd"]


def test_metrics_reads_the_catalog_without_numpy() -> None:
    assert not {"numpy", "pyarrow"} & imported_by("metrics", "--protocol", "two-model")


def test_the_command_list_builds_no_command() -> None:
    # listing reads each command's docstring (a summary), never its options, whose help some commands read from
    # a protocol's settings: building them all imported pyarrow (through ope) and typer's pydantic adapters
    modules = imported_by("-h")
    assert not {"pyarrow", "pydantic", "scipy", "sklearn", "torch", "duckdb"} & modules
    assert not {"routerlab.protocols.ope", "routerlab.protocols.society", "routerlab.protocols.scaling",
                "routerlab.protocols.groups"} & modules


def test_every_built_in_command_lives_where_the_cheap_path_looks() -> None:
    # ``routerlab NAME`` imports cli._module_for(NAME) alone; a command defined elsewhere would only be found
    # through the full registry (slower), so every built-in must be where that path looks
    cli._register_commands()
    for name, entry in cli.COMMANDS.items():
        if isinstance(entry, cli.TyperInfo):
            assert entry.typer_instance is not None
            callbacks = [c.callback for c in entry.typer_instance.registered_commands]
        else:
            callbacks = [entry.callback]
        modules = {c.__module__ for c in callbacks if c is not None}
        assert modules == {cli._module_for(name)}, name


def test_the_root_lists_every_command_in_module_order(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["-h"]) == 0
    out = capsys.readouterr().out
    listed = [line.split()[1] for line in out.splitlines() if line.startswith("│ ") and len(line.split()) > 2
              and line.split()[1] in cli.COMMANDS]
    cli._register_commands()
    assert listed == [cli._entry_name(e) for e in cli._registered()]
    # by module, whichever command ran first in this process: agentic_cmd, audit_cmd, choose_cmd, collect_cmd,
    # data_cmds (import first)
    assert listed[:5] == ["agentic", "audit", "choose", "collect", "import"] and listed[-1] == "results"


def test_a_misspelt_command_is_one_line_with_a_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["evalute"]) == 2
    assert capsys.readouterr().err == ("routerlab: error: No such command 'evalute'. Did you mean 'evaluate'? "
                                       "(see 'routerlab -h')\n")
    assert main(["results", "qury"]) == 2
    assert "Did you mean 'query'?" in capsys.readouterr().err


def help_page(*args: str, capsys: pytest.CaptureFixture[str]) -> str:
    assert main([*args, "-h"]) == 0
    return capsys.readouterr().out


def test_help_is_drawn_wide_outside_a_terminal_and_cuts_no_word(capsys: pytest.CaptureFixture[str],
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    cli._register_commands()
    pages = {name: help_page(*name.split(), capsys=capsys) for name in
             [*(n for n in cli.COMMANDS.names() if n != "results"), "results query", "results show"]}
    pages["routerlab"] = help_page(capsys=capsys)
    for name, page in pages.items():
        widths = {len(line) for line in page.splitlines() if line.strip()}
        assert max(widths) == cli.HELP_WIDTH, name  # 80 before: rich's default outside a terminal
        assert "…" not in page, name  # 'oracle,random,best-single…' was cut
    # a docstring's line breaks no longer break sentences: each paragraph wraps as one ("(score, tokens," ended a
    # line of the command list, "voyager runs T rounds in which each" one of evaluate's description)
    assert any("(score, tokens, latency" in line for line in pages["routerlab"].splitlines())
    assert any("in which each router" in line for line in pages["evaluate"].splitlines())
    assert "[default: oracle,random,best-single,knn]" in pages["evaluate"]


def test_a_narrow_page_is_plain_and_cuts_no_word(capsys: pytest.CaptureFixture[str],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    # below HELP_WIDTH rich would shorten long tokens ("best-sin…"); click's plain formatter wraps instead, at
    # spaces only: no token is broken at a hyphen, and the command list shows whole first paragraphs
    monkeypatch.setenv("COLUMNS", "80")
    cli._register_commands()
    for name in [*(n for n in cli.COMMANDS.names() if n != "results"), "results query", "results show", ""]:
        page = help_page(*name.split(), capsys=capsys)
        assert "…" not in page and "╭" not in page, name
        assert not [ln for ln in page.splitlines() if ln.rstrip().endswith(("...", "-"))
                    and not ln.startswith("Usage:")], name  # "{paths}..." in a usage line means several
        assert all(len(ln) <= 80 or " " not in ln.strip() for ln in page.splitlines()), name
    assert "oracle,random,best-single,knn" in help_page("evaluate", capsys=capsys)
    root = help_page(capsys=capsys)
    assert "write\n               a routing table (score, tokens, latency, cost; option-letter" in root


def test_help_leaves_typer_s_width_as_it_was(capsys: pytest.CaptureFixture[str]) -> None:
    from typer import rich_utils

    before = rich_utils.MAX_WIDTH
    help_page("evaluate", capsys=capsys)
    assert before == rich_utils.MAX_WIDTH
