"""benchmarks/readme_walkthrough.py: the README's Use section, read from README.md, runs top to bottom (issue 21).

The fast tests pin how commands are read, substituted and skipped on small hand-written READMEs; the slow one runs
the real README in a fresh temporary checkout and fails on any step that does not exit 0.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests import missing_requirement

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "benchmarks"))

import readme_walkthrough as walk  # noqa: E402

MINI = '''# tool

## Set up

```bash
pip install tool          # not in the walkthrough
```

## Use

```bash
echo one -o a/           # a first step
# a comment line between commands is no step
X=../shared/data/x
cat "two
three" $X/y \\
    -o b
ls b                     # needs b
```

```python
print("not shell")
```

## Later

```bash
echo last
```
'''


def _steps(tmp_path: Path, text: str = MINI, sections: tuple[str, ...] = ("Use", "Later")) -> list[walk.Step]:
    readme = tmp_path / "README.md"
    readme.write_text(text)
    return walk.extract_steps(readme, sections)


def test_extract_joins_continuations_and_open_quotes(tmp_path: Path) -> None:
    steps = _steps(tmp_path)
    assert [s.line for s in steps] == [12, 14, 15, 18, 28]
    assert steps[0].readme == "echo one -o a/           # a first step"
    assert steps[2].readme == 'cat "two\nthree" $X/y \\\n    -o b'
    assert [s.readme for s in steps[3:]] == ["ls b                     # needs b", "echo last"]
    assert walk.outputs_of(steps[0].readme) == ["a"] and walk.outputs_of(steps[2].readme) == ["b"]
    assert walk.outputs_of("routerlab run x.toml") == ["routerlab-results"]
    assert walk.outputs_of("routerlab run x.toml --store s/") == ["s"]
    assert walk.outputs_of("routerlab results show --store s/") == []
    assert walk.outputs_of("routerlab serve knn --log logs/served.csv") == ["logs/served.csv"]
    assert walk.outputs_of("routerlab promote --log logs/test.csv --current a --candidate b") == []
    assert walk.mentions("ls b/c", "b") and not walk.mentions("ls bb", "b")


def test_extract_refuses_a_missing_section_and_an_unended_command(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="no section"):
        _steps(tmp_path, sections=("Use", "Usage"))
    with pytest.raises(SystemExit, match="never ends"):
        _steps(tmp_path, "## Use\n\n```bash\necho 'open\n```\n", ("Use",))


def test_substitutions_apply_per_step_and_a_stale_one_is_an_error(tmp_path: Path) -> None:
    steps = _steps(tmp_path)
    table = (walk.Substitution("rename", r"^cat", r"-o b$", "-o c", "why"),
             walk.Substitution("cluster", r"^echo last", r"last", "{dask}", "why"))
    walk.substitute(steps, table)
    assert steps[2].command.endswith("-o c") and steps[2].substitutions == ["rename"]
    assert steps[4].command == "echo {dask}" and steps[0].substitutions == []
    started: list[str] = []
    (tmp_path / "cwd").mkdir()
    walk.run_steps(steps[4:], tmp_path / "cwd", dict(os.environ), tmp_path / "logs", require_shared=False,
                   timeout=60, echo=lambda _: None, dask=lambda: started.append("x") or "tcp://127.0.0.1:1")
    assert steps[4].command == "echo tcp://127.0.0.1:1" and steps[4].status == "ok" and started == ["x"]
    stale = (walk.Substitution("gone", r"^routerlab", r"x", "y", "why"),)
    with pytest.raises(SystemExit, match=r"\['gone'\] match no README command"):
        walk.substitute(_steps(tmp_path), stale)


def _run(tmp_path: Path, *, shared: bool, require: bool) -> list[walk.Step]:
    steps = _steps(tmp_path)
    walk.substitute(steps, ())
    cwd = tmp_path / "root" / "checkout"
    cwd.mkdir(parents=True)
    if shared:
        (tmp_path / "root" / "shared" / "data" / "x").mkdir(parents=True)
        (tmp_path / "root" / "shared" / "data" / "x" / "y").write_text("")
    lines: list[str] = []
    walk.run_steps(steps, cwd, dict(os.environ), tmp_path / "logs", require_shared=require, timeout=60,
                   echo=lines.append)
    assert len([line for line in lines if line.startswith("[")]) == len(steps)
    return steps


def test_a_step_without_shared_data_is_skipped_and_so_is_what_needs_its_output(tmp_path: Path) -> None:
    steps = _run(tmp_path, shared=False, require=False)
    assert [s.status for s in steps] == ["ok", "ok", "skipped", "skipped", "ok"]
    assert steps[2].reason == "needs ../shared/data, which is missing"
    assert steps[3].reason == "needs b from skipped step 3"


def test_with_require_a_missing_shared_data_fails_the_step(tmp_path: Path) -> None:
    steps = _run(tmp_path, shared=False, require=True)
    assert steps[2].status == "failed" and "ROUTERLAB_REQUIRE_SHARED_DATA=1" in steps[2].reason


def test_steps_run_in_order_with_the_readme_variables_and_a_failure_is_reported(tmp_path: Path) -> None:
    steps = _run(tmp_path, shared=True, require=False)
    # cat "two\nthree" fails (no such file): the step fails with cat's exit code, and `ls b` after it too
    assert [(s.status, s.rc) for s in steps] == [("ok", 0), ("ok", 0), ("failed", 1), ("failed", 2), ("ok", 0)]
    assert all(s.seconds >= 0 for s in steps)


def test_a_promise_in_a_comment_must_be_printed(tmp_path: Path) -> None:
    text = '## Use\n\n```bash\necho "done: 3 of 3"   # prints "done: 3 of 3"\necho no   # prints "yes"\n```\n'
    steps = _steps(tmp_path, text, ("Use",))
    walk.substitute(steps, ())
    (tmp_path / "cwd").mkdir()
    walk.run_steps(steps, tmp_path / "cwd", dict(os.environ), tmp_path / "logs", require_shared=False,
                   timeout=60, echo=lambda _: None)
    assert [s.status for s in steps] == ["ok", "failed"]
    assert steps[1].reason == "the README says it prints 'yes'; it did not"


def test_the_readme_walkthrough_is_consistent() -> None:
    """The real README: every substitution changes a step, each step writes fresh outputs (the demo experiment's
    rerun into its own store is the one repeat, on purpose: it shows the reuse), LLM steps name SmolLM2."""
    steps = walk.extract_steps()
    walk.substitute(steps, walk.SUBSTITUTIONS, dask="tcp://127.0.0.1:1")
    assert len(steps) >= 40 and all(s.command.startswith(("routerlab ", "D=")) for s in steps)
    outputs = Counter(o for s in steps for o in walk.outputs_of(s.command))
    assert {o for o, n in outputs.items() if n > 1} == {"routerlab-results"}
    assert sum("examples/demo-experiment.toml" in s.command for s in steps) == 2
    assert not any("qwen" in s.readme for s in steps)  # the examples run on what the install commands fetch
    assert all((REPO / w).exists() for s in steps for w in walk._words(s.command) if w.startswith("examples/"))


class Walkthrough:
    """``benchmarks/readme_walkthrough.py --json`` running in the background in ``work``: its report goes to
    ``work/walkthrough.json``, its stdout and stderr to files there (not pipes: nobody reads them until it ends).

    tests/conftest.py starts it as soon as collection selects the test below, so that on CI's two cores its
    minutes of README commands (each a fresh ``routerlab`` process) overlap the rest of the suite, which runs on
    one core; the test then waits for it. Run alone, the test starts it itself."""

    STEP_TIMEOUT_S = 1800
    """One README command's limit: generous, since machines differ (extract on 80 questions took 2 minutes on one
    2-core machine and 10 on a slower one beside the suite); a command past it is stuck, not slow."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.report = work / "walkthrough.json"
        with (work / "stdout.txt").open("wb") as out, (work / "stderr.txt").open("wb") as err:
            self.proc = subprocess.Popen([sys.executable, str(REPO / "benchmarks" / "readme_walkthrough.py"),
                                          "--json", str(self.report), "--timeout", str(self.STEP_TIMEOUT_S)],
                                         stdin=subprocess.DEVNULL, stdout=out, stderr=err)

    def wait(self, timeout: float) -> tuple[int, str, str]:
        """Its exit code, stdout and stderr, once it has ended (killed after ``timeout`` seconds more)."""
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.stop()
            raise
        return rc, *((self.work / f).read_text(errors="replace") for f in ("stdout.txt", "stderr.txt"))

    def stop(self) -> None:
        """End it if it still runs (an interrupted or failed-fast session): SIGINT lets it stop its Dask cluster
        and remove its temporary checkout; SIGKILL after 30 s."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


WALKTHROUGH = pytest.StashKey[Walkthrough]()


@pytest.mark.slow  # the README's Use section, SmolLM2 included: a few minutes of CPU, overlapping the suite
@pytest.mark.shared_data
def test_readme_use_section_runs_top_to_bottom(request: pytest.FixtureRequest, tmp_path: Path) -> None:
    run = request.config.stash.get(WALKTHROUGH, None) or Walkthrough(tmp_path)
    rc, out, err = run.wait(timeout=3600)  # after the rest of the suite; run alone, its whole time
    assert rc == 0, out[-4000:] + err[-2000:]
    report = json.loads(run.report.read_text())
    assert report["failed"] == 0 and report["ok"] + report["skipped"] == len(report["steps"])
    assert "nothing to run: 16 of 16 cells reused" in " ".join(s["readme"] for s in report["steps"])
    skipped = [f"step {s['index']} ({s['readme'].split()[1]}): {s['reason']}" for s in report["steps"]
               if s["status"] == "skipped"]
    if skipped:  # reported, never passed silently: a skip here, a failure in CI
        missing_requirement(f"{len(skipped)} README steps skipped: " + "; ".join(skipped))


def test_an_experiment_file_reading_a_skipped_output_skips_its_run(tmp_path: Path) -> None:
    cwd = tmp_path / "root" / "checkout"
    (cwd / "examples").mkdir(parents=True)
    (cwd / "examples" / "exp.toml").write_text(
        'protocols = ["full"]\n[[tables]]\nname = "t"\npath = "../tables/t"\n[[tables]]\npath = "demo"\n')
    assert walk._paths_in_experiments("routerlab run examples/exp.toml --store s/", cwd) == ["tables/t"]
    assert walk._paths_in_experiments("routerlab run examples/none.toml", cwd) == []
    text = "## Use\n\n```bash\ncat ../shared/data/x -o tables/t\nrouterlab run examples/exp.toml\n```\n"
    steps = _steps(tmp_path, text, ("Use",))
    walk.substitute(steps, ())
    walk.run_steps(steps, cwd, dict(os.environ), tmp_path / "logs", require_shared=False, timeout=60,
                   echo=lambda _: None)
    assert [(s.status, s.reason) for s in steps] == [("skipped", "needs ../shared/data, which is missing"),
                                                    ("skipped", "needs tables/t from skipped step 1")]
