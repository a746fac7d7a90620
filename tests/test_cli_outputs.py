"""Two rules every command follows. An output that already exists (a file, a directory that is not empty, a
table) is refused unless ``--force`` is given: one line naming the option and the path, exit 2. The rule is
checked over every command of the app, found by introspection. Ctrl-C prints one line saying what was kept and
how to resume, and exits with code 130."""

from __future__ import annotations

import inspect
import json
import os
import pathlib
import re
import signal
import subprocess
import sys
import time
import typing
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer

from routerlab.cli import INTERRUPTED_GENERIC, _register_commands, app, main
from routerlab.data.store import load
from routerlab.datasets import demo
from routerlab.llm import base as llm_base
from routerlab.llm.base import BackendSpec, Completion, Decoding, Message, register_backend
from tests.llm.test_collect import SCRIPT, ScriptedBackend
from tests.protocols.test_two_model import synthetic

REPO = Path(__file__).resolve().parents[1]

# ---------------------------------------------------------------------------------------------------------------
# What every path parameter of every command is. A new command or option that takes a path fails
# test_every_path_parameter_is_declared until it is declared here; a new output also needs a recipe below.

OUTPUT = "output"  # refused when it exists, unless --force
TABLE = "table"  # a table directory: refused when it holds a table, unless --force (other files: always refused)
RESUMED = "resumed"  # meant to be reused by a rerun (a store, a cache, a resumable directory): never refused
APPENDED = "appended"  # a log a command appends to
INPUT = "input"  # only read
OUTPUT_OF_TWO = "output of a two-value option"  # refused like OUTPUT; tested on its own (the recipe appends one value)

ROLES: dict[tuple[str, str], str] = {
    ("perturb", "review"): OUTPUT_OF_TWO, ("robustness", "reviewed"): INPUT,
    ("audit", "output"): OUTPUT, ("evaluate", "output"): OUTPUT, ("groups", "output"): OUTPUT,
    ("log", "output"): OUTPUT, ("ope", "output"): OUTPUT, ("perturb", "output"): OUTPUT,
    ("robustness", "output"): OUTPUT, ("scaling", "output"): OUTPUT, ("society", "output"): OUTPUT,
    ("two-model", "output"): OUTPUT, ("choose", "output"): OUTPUT, ("grade", "output"): OUTPUT,
    ("collect", "output"): TABLE, ("import", "output"): TABLE, ("join", "output"): TABLE,
    ("synth", "output"): TABLE,
    ("run", "store"): RESUMED,  # the results store: a rerun reuses the cells it holds
    ("extract", "output"): RESUMED,  # the signals directory: a rerun extracts only the questions not there yet
    ("audit", "cache_dir"): RESUMED, ("collect", "cache_dir"): RESUMED, ("extract", "cache_dir"): RESUMED,
    ("perturb", "cache_dir"): RESUMED, ("robustness", "cache_dir"): RESUMED, ("grade", "cache_dir"): RESUMED,
    ("serve", "log"): APPENDED,
    ("audit", "table_dir"): INPUT, ("audit", "logs"): INPUT, ("collect", "questions"): INPUT,
    ("collect", "data"): INPUT,
    ("collect", "variants"): INPUT, ("import", "paths"): INPUT, ("info", "table_dir"): INPUT,
    ("evaluate", "table_dir"): INPUT, ("scaling", "table_dir"): INPUT, ("groups", "table_dir"): INPUT,
    ("extract", "questions"): INPUT, ("join", "tables"): INPUT, ("log", "table_dir"): INPUT,
    ("ope", "table_dir"): INPUT, ("ope", "logs"): INPUT, ("ope", "train_logs"): INPUT,
    ("perturb", "table_dir"): INPUT, ("robustness", "table_dir"): INPUT, ("robustness", "variants_file"): INPUT,
    ("robustness", "outcomes"): INPUT, ("run", "experiment"): INPUT, ("serve", "table_dir"): INPUT,
    ("society", "table_dir"): INPUT, ("two-model", "table_dir"): INPUT,
    ("choose", "table_dir"): INPUT, ("two-model", "features"): INPUT,
    ("results query", "store"): INPUT, ("results show", "store"): INPUT,
    ("results paper", "experiment"): INPUT, ("results paper", "store"): INPUT,
    ("power", "table_dir"): INPUT, ("synth", "table_dir"): INPUT, ("grade", "answers"): INPUT,
    ("judge-check", "output"): OUTPUT, ("judge-check", "cache_dir"): RESUMED, ("judge-check", "labels"): INPUT,
    ("promote", "output"): OUTPUT, ("promote", "log"): INPUT, ("promote", "table_dir"): INPUT,
    ("agentic", "output"): OUTPUT, ("agentic", "table_dir"): INPUT, ("agentic", "single_turn"): INPUT,
}

# a parameter (not a flag) named like an output must be declared even when it is not typed as a path
OUTPUT_LIKE = re.compile(r"(^|_)(out|output|html|plot|png|save|export|report|dest|store|log|cache)(_|$)")


def _commands() -> Iterator[tuple[str, Any]]:
    _register_commands()

    def walk(cmd: Any, prefix: list[str]) -> Iterator[tuple[str, Any]]:
        if hasattr(cmd, "commands"):
            for name, sub in cmd.commands.items():
                yield from walk(sub, [*prefix, name])
        else:
            yield " ".join(prefix), cmd

    yield from walk(typer.main.get_command(app), [])


def _takes_path(annotation: Any) -> bool:
    return annotation is pathlib.Path or any(_takes_path(a) for a in typing.get_args(annotation))


def _path_parameters() -> dict[tuple[str, str], list[str]]:
    """(command, parameter) -> its option names, for every parameter typed as a path or named like an output."""
    found = {}
    for name, cmd in _commands():
        hints = typing.get_type_hints(inspect.unwrap(cmd.callback), include_extras=True)
        for p in cmd.params:
            named = OUTPUT_LIKE.search(p.name or "") and not getattr(p, "is_flag", False)
            if _takes_path(hints.get(p.name)) or named:
                found[(name, str(p.name))] = list(p.opts)
    return found


PATHS = _path_parameters()
WRITTEN = sorted(k for k in PATHS if ROLES.get(k) in (OUTPUT, TABLE))


def test_every_path_parameter_is_declared() -> None:
    undeclared = sorted(set(PATHS) - set(ROLES))
    stale = sorted(set(ROLES) - set(PATHS))
    assert not undeclared, f"declare these path parameters in ROLES (and give outputs a recipe): {undeclared}"
    assert not stale, f"ROLES names parameters no command has: {stale}"
    assert len(WRITTEN) == 19  # agentic: -o


def test_every_command_that_writes_has_force() -> None:
    opts = {name: {o for p in cmd.params for o in p.opts} for name, cmd in _commands()}
    missing = sorted(cmd for cmd, _ in WRITTEN if "--force" not in opts[cmd])
    assert not missing, f"commands with an output but no --force: {missing}"
    # and no command offers --force without an output it would overwrite
    assert sorted(c for c, o in opts.items() if "--force" in o) == sorted({c for c, _ in WRITTEN})


# ---------------------------------------------------------------------------------------------------------------
# One cheap run per output: the same arguments are refused while the output exists, and succeed with --force.


@dataclass
class Inputs:
    table: Path  # a small demo table
    pair: Path  # a table with a small (S) and a large (L) model
    left: Path  # two tables of the same queries with different actors
    right: Path
    long_csv: Path
    questions: Path
    cache: Path
    backend: str


@pytest.fixture(scope="module")
def inputs(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Inputs]:
    root = tmp_path_factory.mktemp("inputs")
    table = demo(240, seed=4)
    table.save(root / "demo")
    synthetic().save(root / "pair")
    names = table.actor_names
    table.select_actors(names[:2]).save(root / "left")
    table.select_actors(names[2:4]).save(root / "right")
    (root / "long.csv").write_text("query_id,actor,score\n1,m1,1\n1,m2,0\n2,m1,0\n2,m2,1\n")
    rows = [{"id": f"q{i}", "question": q, "choices": ["yes", "no"], "answer": "A", "dataset": "d"}
            for i, q in enumerate(["Which is a fruit?", "Which flies?"])]
    (root / "quiz.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    answers = [{"query_id": r["id"], "actor": "m", "question": r["question"], "answer": "A", "reference": "yes"}
               for r in rows]
    (root / "answers.jsonl").write_text("".join(json.dumps(r) + "\n" for r in answers))

    class Scripted(ScriptedBackend):
        def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None) -> None:
            super().__init__(spec, cache_dir=cache_dir, script=SCRIPT)

    register_backend("outputs-scripted")(Scripted)
    yield Inputs(root / "demo", root / "pair", root / "left", root / "right", root / "long.csv",
                 root / "quiz.jsonl", root / "cache", "outputs-scripted")
    llm_base._REGISTRY.remove("outputs-scripted")


RECIPES: dict[tuple[str, str], tuple[str, Callable[[Inputs], list[str]]]] = {
    # output parameter -> (the output's name, the other arguments of a cheap run)
    ("audit", "output"): ("report", lambda i: ["audit", str(i.table), "--only", "table", "--no-cache"]),
    ("evaluate", "output"): ("ev", lambda i: ["evaluate", str(i.table), "--routers", "oracle", "--n-boot", "40"]),
    ("groups", "output"): ("groups", lambda i: ["groups", str(i.table), "--m", "2", "--draws", "2", "--routers",
                                                "oracle", "--n-boot", "40"]),
    ("log", "output"): ("test.csv", lambda i: ["log", str(i.table), "--part", "test"]),
    ("ope", "output"): ("ope", lambda i: ["ope", str(i.table), "--routers", "best-single", "--n-boot", "40"]),
    ("perturb", "output"): ("v.jsonl", lambda i: ["perturb", str(i.table), "--levels", "character",
                                                  "--variants", "1"]),
    ("robustness", "output"): ("rob", lambda i: ["robustness", str(i.table), "--routers", "random", "--levels",
                                                 "character", "--variants", "1", "--n-boot", "40"]),
    ("scaling", "output"): ("scaling", lambda i: ["scaling", str(i.table), "--m", "2", "--samples", "2",
                                                  "--p", "1"]),
    ("society", "output"): ("society", lambda i: ["society", str(i.table)]),
    ("two-model", "output"): ("tm", lambda i: ["two-model", str(i.pair), "--small", "S", "--large", "L",
                                               "--routers", "oracle", "--split", "given", "--boot", "40"]),
    ("choose", "output"): ("choice", lambda i: ["choose", str(i.table), "--routers", "best-single", "--call-rate",
                                                "0.3", "--small", "tiny-2b", "--large", "frontier-235b"]),
    ("collect", "output"): ("collected", lambda i: ["collect", str(i.questions), "-a", f"x={i.backend}:m",
                                                    "--cache-dir", str(i.cache)]),
    ("import", "output"): ("imported", lambda i: ["import", "long", str(i.long_csv)]),
    ("grade", "output"): ("graded.jsonl", lambda i: ["grade", str(i.questions.parent / "answers.jsonl")]),
    ("join", "output"): ("joined", lambda i: ["join", str(i.left), str(i.right)]),
    ("synth", "output"): ("synth", lambda i: ["synth", str(i.table), "--society", "sa"]),
    ("judge-check", "output"): ("report.json", lambda i: ["judge-check", str(_labels(i)), "--judges",
                                                          f"judge:{i.backend}:m", "--cache-dir", str(i.cache)]),
    ("promote", "output"): ("promote", lambda i: ["promote", "--table", str(i.table), "--log", str(_log(i)),
                                                  "--current", "best-single", "--candidate", "best-single"]),
    ("agentic", "output"): ("agentic", lambda i: ["agentic", str(_episodes(i)), "--routers", "oracle", "--n-boot",
                                                  "40"]),
}


def _episodes(i: Inputs) -> Path:
    """A small table of agent episodes, beside the other inputs (for agentic)."""
    from tests.protocols.test_agentic import routed_table

    path = i.cache.parent / "episodes"
    if not path.exists():
        routed_table(40).save(path)
    return path


def _log(i: Inputs) -> Path:
    """A uniform log of the demo table's test split, beside the other inputs (for promote)."""
    from routerlab.data.logs import write_logs
    from routerlab.protocols.policies import simulate_logs

    path = i.cache.parent / "promote-log.csv"
    if not path.exists():
        write_logs(simulate_logs(load(i.table), "uniform", part="test", seed=1), path)
    return path


def _labels(i: Inputs) -> Path:
    """A two-row label file for judge-check, beside the other inputs."""
    path = i.cache.parent / "labels.csv"
    if not path.exists():
        path.write_text("question,answer,reference,label\nWhich is a fruit?,apple,apple,1\nWhich flies?,rock,bird,0\n")
    return path


def _one_error(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("routerlab: error: ") and "Traceback" not in err, err
    return err.removeprefix("routerlab: error: ").rstrip("\n")


@pytest.mark.parametrize("key", WRITTEN, ids=["/".join(k) for k in WRITTEN])
def test_an_existing_output_is_refused_without_force(key: tuple[str, str], inputs: Inputs, tmp_path: Path,
                                                     capsys: pytest.CaptureFixture[str],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")
    assert key in RECIPES, f"give {key} a recipe: a cheap run that writes it"
    name, argv = RECIPES[key]
    out = tmp_path / name
    option = PATHS[key][0]
    args = [*argv(inputs), option, str(out)]
    if ROLES[key] == TABLE:
        demo(30, seed=1).save(out)
        before = load(out).content_hash
        assert main(args) == 2
        assert _one_error(capsys) == f"{option} {out}: already holds a routerlab table; pass --force to overwrite it"
        assert load(out).content_hash == before
        assert main([*args, "--force"]) == 0
        assert load(out).content_hash != before  # replaced
        return
    if out.suffix:  # a file
        out.write_text("kept\n")
        assert main(args) == 2
        assert _one_error(capsys) == f"{option} {out}: already exists; pass --force to overwrite it"
        assert out.read_text() == "kept\n"
        assert main([*args, "--force"]) == 0
        assert out.read_text() != "kept\n"
        return
    out.mkdir()
    (out / "notes.txt").write_text("kept\n")
    assert main(args) == 2
    assert _one_error(capsys) == f"{option} {out}: already exists and is not empty; pass --force to overwrite it"
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    assert main([*args, "--force"]) == 0
    written = sorted(p.name for p in out.iterdir())
    assert "notes.txt" in written and len(written) > 1  # written into, and no other file removed
    assert (out / "notes.txt").read_text() == "kept\n"


def test_an_empty_directory_or_a_new_path_is_no_overwrite(inputs: Inputs, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / "empty").mkdir()
    for out in (tmp_path / "empty", tmp_path / "new" / "deeper"):
        assert main(["scaling", str(inputs.table), "--m", "2", "--samples", "2", "--p", "1", "-o", str(out)]) == 0
        assert (out / "scaling.json").is_file()
    # the log's actors side-file is part of its output: an existing one is refused too
    log = tmp_path / "l.csv"
    (tmp_path / "l.actors.csv").write_text("kept\n")
    capsys.readouterr()
    assert main(["log", str(inputs.table), "-o", str(log)]) == 2
    assert _one_error(capsys) == f"-o {tmp_path / 'l.actors.csv'}: already exists; pass --force to overwrite it"
    assert not log.exists()


def test_resumable_outputs_are_reused_without_force(inputs: Inputs, tmp_path: Path,
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    """The declared resumable outputs are not overwrites: the results store takes a rerun as it is."""
    exp = _experiment(tmp_path, seeds=[0])
    store = tmp_path / "store"
    assert main(["run", str(exp), "--store", str(store), "--backend", "serial"]) == 0
    assert main(["run", str(exp), "--store", str(store), "--backend", "serial"]) == 0
    assert "small: 2 of 2 cells reused" in capsys.readouterr().out


# ---------------------------------------------------------------------------------------------------------------
# Ctrl-C: one line, what was kept, how to resume, exit 130.


def _interrupted(capsys: pytest.CaptureFixture[str]) -> str:
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert "Traceback" not in err and lines, err
    assert lines[-1].startswith("routerlab: interrupted: "), err
    assert sum(line.startswith("routerlab: interrupted") for line in lines) == 1
    return lines[-1].removeprefix("routerlab: interrupted: ")


def _raise_interrupt(*args: Any, **kwargs: Any) -> Any:
    raise KeyboardInterrupt


def _experiment(tmp_path: Path, seeds: Sequence[int]) -> Path:
    path = tmp_path / "small.toml"
    path.write_text(f"""name = "small"
routers = ["oracle", "best-single"]
seeds = {list(seeds)}
protocols = ["full"]

[settings]
n_boot = 40

[[tables]]
name = "demo"
path = "demo"
n_queries = 300
split = "random"
test_fraction = 0.2
""")
    return path


def test_interrupt_generic_line(inputs: Inputs, tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    import routerlab.cli.society_cmd as society_cmd

    monkeypatch.setattr(society_cmd, "run_from_cli", _raise_interrupt)
    assert main(["society", str(inputs.table), "-o", str(tmp_path / "s")]) == 130
    assert _interrupted(capsys) == INTERRUPTED_GENERIC
    assert not (tmp_path / "s").exists()


def test_interrupted_run_says_how_many_cells_are_stored_and_resumes(
        tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    from routerlab.experiments.store import ResultStore

    exp = _experiment(tmp_path, seeds=[0, 1, 2])  # one task per seed, each of 2 cells
    store = tmp_path / "store"
    write = ResultStore.write_cells
    calls = []

    def second_interrupts(self: ResultStore, *args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        write(self, *args, **kwargs)

    monkeypatch.setattr(ResultStore, "write_cells", second_interrupts)
    argv = ["run", str(exp), "--store", str(store), "--backend", "serial"]
    assert main(argv) == 130
    assert _interrupted(capsys) == (f"2 of 6 cells stored in {store / 'results.duckdb'}; rerun the same command "
                                    "to resume")
    monkeypatch.setattr(ResultStore, "write_cells", write)
    assert main(argv) == 0
    assert "small: 2 of 6 cells reused" in capsys.readouterr().out


def test_interrupted_audit_keeps_its_finished_sections(inputs: Inputs, tmp_path: Path,
                                                       capsys: pytest.CaptureFixture[str],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from routerlab.reports.audit_cache import SectionCache

    store = SectionCache.store
    calls = []

    def second_interrupts(self: SectionCache, *args: Any, **kwargs: Any) -> None:
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        store(self, *args, **kwargs)

    monkeypatch.setattr(SectionCache, "store", second_interrupts)
    cache, out = tmp_path / "cache", tmp_path / "report"
    argv = ["audit", str(inputs.table), "--only", "table,bounds", "--cache-dir", str(cache), "-o", str(out)]
    assert main(argv) == 130
    assert _interrupted(capsys) == (f"1 of 2 audit sections done and kept in the audit cache {cache}, no report "
                                    "written; rerun the same command to resume")
    assert not out.exists()
    monkeypatch.setattr(SectionCache, "store", store)
    assert main(argv) == 0
    timings = json.loads((out / "results.json").read_text())["timings"]
    assert timings["table"]["from_cache"] and not timings["bounds"]["from_cache"]
    # without a cache nothing is kept, and the line says so
    monkeypatch.setattr(SectionCache, "store", _raise_interrupt)
    capsys.readouterr()
    assert main(["audit", str(inputs.table), "--only", "table,bounds", "--no-cache", "-o", str(tmp_path / "r2")]) \
        == 130
    assert _interrupted(capsys).startswith("0 of 2 audit sections were done, none kept (no cache)")


class _StopsAtThird(ScriptedBackend):
    """The scripted backend, interrupted (as by Ctrl-C) at its third call while ``armed``."""

    armed = True
    made = 0

    def __init__(self, spec: BackendSpec, *, cache_dir: Path | None = None) -> None:
        super().__init__(spec, cache_dir=cache_dir, script=SCRIPT)

    def _count(self) -> None:
        type(self).made += 1
        if self.armed and type(self).made == 3:
            raise KeyboardInterrupt

    def choice_scores(self, messages: Sequence[Message], letters: Sequence[str]) -> Any:
        self._count()
        return super().choice_scores(messages, letters)

    def complete(self, messages: Sequence[Message], decoding: Decoding = llm_base.GREEDY) -> Completion:
        self._count()
        return super().complete(messages, decoding)


@pytest.fixture()
def stops_at_third() -> Iterator[str]:
    _StopsAtThird.armed, _StopsAtThird.made = True, 0
    register_backend("stops-at-third")(_StopsAtThird)
    yield "stops-at-third"
    llm_base._REGISTRY.remove("stops-at-third")


def test_interrupted_collect_keeps_its_answers_in_the_call_cache(inputs: Inputs, tmp_path: Path,
                                                                 stops_at_third: str,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    rows = [{"id": f"q{i}", "question": f"Question {i}?", "choices": ["a", "b", "c"], "answer": "A"}
            for i in range(5)]
    quiz = tmp_path / "quiz.jsonl"
    quiz.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cache, out = tmp_path / "cache", tmp_path / "t"
    argv = ["collect", str(quiz), "-a", f"x={stops_at_third}:m", "--cache-dir", str(cache), "-o", str(out),
            "--timing-probes", "0"]
    assert main(argv) == 130
    assert _interrupted(capsys) == (f"the answers received so far are kept in the call cache {cache}, the table "
                                    "not written; rerun the same command to resume (a cached call is not made "
                                    "again)")
    assert not out.exists()
    _StopsAtThird.armed = False
    assert main(argv) == 0
    assert "calls 3 new, 2 cached" in capsys.readouterr().out  # the two answers before Ctrl-C were kept


def test_interrupted_perturb_names_the_call_cache_only_with_a_backend(
        inputs: Inputs, tmp_path: Path, stops_at_third: str, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    out, cache = tmp_path / "v.jsonl", tmp_path / "cache"
    _StopsAtThird.made = 2  # the first rewrite asked is interrupted
    assert main(["perturb", str(inputs.table), "--levels", "paraphrase", "--variants", "1", "--ask", "1",
                 "--backend", f"{stops_at_third}:m", "--cache-dir", str(cache), "-o", str(out)]) == 130
    assert _interrupted(capsys) == (f"the rewrites received so far are kept in the call cache {cache}, the "
                                    "variants file not written; rerun the same command to resume (a cached call "
                                    "is not made again)")
    assert not out.exists()
    import routerlab.cli.perturb_cmd as perturb_cmd

    monkeypatch.setattr(perturb_cmd, "perturb_queries", _raise_interrupt)  # no backend: nothing kept
    assert main(["perturb", str(inputs.table), "--levels", "character", "-o", str(out)]) == 130
    assert _interrupted(capsys) == INTERRUPTED_GENERIC


def test_interrupted_extract_counts_the_stored_questions(inputs: Inputs, tmp_path: Path,
                                                         capsys: pytest.CaptureFixture[str],
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    import numpy as np

    import routerlab.cli.extract_cmd as extract_cmd
    from routerlab.llm.extract import _Writer

    out = tmp_path / "signals"

    def two_rows_then_interrupt(spec: Any, qs: Any, output: Path, *args: Any) -> Any:
        writer = _Writer(output, 2)  # a shard of two questions is written, the third is lost with Ctrl-C
        for q in list(qs)[:3]:
            writer.add(f"key-{q.id}", np.zeros((2, 3), dtype=np.float32), {"key": f"key-{q.id}", "id": q.id})
        raise KeyboardInterrupt

    monkeypatch.setattr(extract_cmd, "_run", two_rows_then_interrupt)
    more = tmp_path / "more.jsonl"
    more.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Q{i}?", "choices": ["a", "b"], "answer": "A"})
                            + "\n" for i in range(4)))
    assert main(["extract", "--model", "local:smollm2-135m", "--questions", str(more), "-o", str(out),
                 "--shard-size", "2"]) == 130
    assert _interrupted(capsys) == (f"{out} holds the signals of 2 questions (a shard is written every 2); rerun "
                                    "the same command to resume")


def test_real_sigint_to_a_run(tmp_path: Path) -> None:
    """A real SIGINT to ``routerlab run`` in a child process: the one line, exit 130, no traceback."""
    exp = tmp_path / "long.toml"
    exp.write_text(_experiment(tmp_path, seeds=list(range(40))).read_text().replace(
        '["oracle", "best-single"]', '["oracle", "best-single", "knn:k=5", "linear"]'))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")]),
           "ROUTERLAB_PROGRESS": "0"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "routerlab", "run", str(exp), "--store", str(tmp_path / "store"), "--backend",
         "serial"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))  # as from a terminal, even under nohup
    try:
        assert proc.stdout is not None
        first = proc.stdout.readline()  # "small: 0 of 160 cells reused": the cells are running now
        assert "0 of 160 cells reused" in first
        time.sleep(1.0)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, (out, err)
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert re.fullmatch(r"routerlab: interrupted: \d+ of 160 cells stored in .*results\.duckdb; rerun the same "
                        r"command to resume", line), err


def test_a_ctrl_c_that_left_generated_code_still_exits_130_under_python_m(tmp_path: Path) -> None:
    """CI found it: a Ctrl-C landing inside an exec() of a string (an import interrupted in dataclasses' generated
    __init__) made ``python -m routerlab`` die by SIGINT (-2) after printing its line, not exit 130."""
    (tmp_path / "interrupted_in_exec.py").write_text(
        "import routerlab.cli as cli\n"
        "def interrupted(argv=None):\n"
        "    try:\n"
        "        exec('raise KeyboardInterrupt')\n"
        "    except KeyboardInterrupt:\n"
        "        return 130\n"
        "cli.main = interrupted\n"
        "cli.run()\n", encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO / "src"), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "interrupted_in_exec"], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 130, done.stderr


def test_an_existing_review_file_is_refused_without_force(inputs: Inputs, tmp_path: Path,
                                                          capsys: pytest.CaptureFixture[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")
    review = tmp_path / "review.csv"
    review.write_text("marked by a person\n", encoding="utf-8")
    args = ["perturb", str(inputs.table), "--levels", "character", "--variants", "1", "-o", str(tmp_path / "v.jsonl"),
            "--review", "3", str(review)]
    assert main(args) == 2
    assert _one_error(capsys).startswith(f"--review {review}: already exists; pass --force")
    assert review.read_text(encoding="utf-8") == "marked by a person\n"
    assert main([*args, "--force"]) == 0
    assert review.read_text(encoding="utf-8") != "marked by a person\n"
