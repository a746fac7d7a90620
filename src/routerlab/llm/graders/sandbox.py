"""Run an untrusted Python program in a separate, limited process and say how it ended (:func:`run_python`).

The ``code`` grader runs every answer's code with its tests here. One call:

- makes a fresh temporary directory (the program's working directory, ``HOME`` and ``TMPDIR``), removed after;
- starts a supervisor (``python -I``, its own session, an environment of a few fixed variables and nothing from
  the caller's) that makes itself a child subreaper and moves into an empty network namespace where allowed;
- the supervisor forks the runner: its own process group, ``RLIMIT_CPU``/``AS``/``FSIZE``/``NPROC``/``NOFILE``
  and ``CORE=0``, stdin from /dev/null, stdout and stderr to files capped by ``RLIMIT_FSIZE`` (1 GB of output
  is never written, let alone read), and runs the program with ``__name__ == "__solution__"`` (a
  ``if __name__ == "__main__":`` demo in an answer does not run, as in HumanEval's harness);
- the supervisor stops the runner at the wall-clock limit, then kills its process group and every process
  still under it (escapes by ``setsid`` or a double fork come back to the subreaper), and reports;
- the caller kills the supervisor's group too, whatever happened, and reads the last bytes of each output.

docs/grading.md ("What the sandbox does and does not protect against") says what this isolates and what not.
"""

from __future__ import annotations

import ast
import contextlib
import math
import os
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from routerlab.errors import RouterlabError

__all__ = ["Limits", "SandboxError", "SandboxResult", "run_python"]

Reason = Literal["ok", "assertion", "error", "timeout", "memory", "output-limit", "cpu", "killed"]
_CHILD = Path(__file__).with_name("_sandbox_child.py")
_GRACE_S = 10.0  # the supervisor's cleanup may take up to 5 s after the wall limit
_EFBIG = 27


class SandboxError(RouterlabError):
    """The sandbox itself could not run (no interpreter, no fork, a broken supervisor): not a grade."""


@dataclass(frozen=True)
class Limits:
    """What one program may use. ``cpu_s`` is rounded up to whole seconds (``RLIMIT_CPU``'s unit);
    ``output_bytes`` caps each file the program writes, its stdout and stderr included (``RLIMIT_FSIZE``);
    ``nproc`` is how many more processes and threads the user may start (the kernel does not apply it to
    root)."""

    wall_s: float = 10.0
    cpu_s: float = 10.0
    memory_bytes: int = 1 << 30
    output_bytes: int = 1 << 20
    nproc: int = 64
    nofile: int = 256
    isolate_network: bool = True

    def __post_init__(self) -> None:
        for name in ("wall_s", "cpu_s", "memory_bytes", "output_bytes", "nproc", "nofile"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0 \
                    or not math.isfinite(value):
                raise ValueError(f"sandbox limit {name} must be a positive number, got {value!r}")


@dataclass(frozen=True)
class SandboxResult:
    """How one program ended. ``reason``: ``ok`` (ran to its end), ``assertion`` (an ``AssertionError``
    escaped), ``error`` (another exception, ``SystemExit`` included, or an exit before the end), ``timeout``
    (wall clock), ``memory`` (``MemoryError``), ``output-limit`` (a write past ``RLIMIT_FSIZE``), ``cpu``
    (``RLIMIT_CPU``), ``killed`` (another signal). ``detail`` is one line (``"ZeroDivisionError: division by
    zero"``); ``line`` the program's line where it failed (innermost frame of the program). ``stdout`` and
    ``stderr`` are the last bytes written (``*_bytes`` their full sizes). ``leftover_killed`` counts
    processes still running under the program when it ended (all killed); ``leftover_alive`` those that
    survived the cleanup (0 unless something outran it: a finding, not a grade)."""

    passed: bool
    reason: Reason
    detail: str
    seconds: float
    cpu_seconds: float = 0.0
    max_rss_bytes: int = 0
    exit_code: int | None = None
    signal: str | None = None
    line: int | None = None
    stdout: str = ""
    stderr: str = ""
    stdout_bytes: int = 0
    stderr_bytes: int = 0
    network: str = ""
    subreaper: bool = False
    nproc_enforced: bool = False
    leftover_killed: int = 0
    leftover_alive: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _environment(work: str) -> dict[str, str]:
    """The program's whole environment: a fixed PATH and locale, HOME and TMPDIR in its own directory, one
    thread for numeric libraries (sandboxes run side by side); nothing inherited from the caller."""
    return {"PATH": "/usr/local/bin:/usr/bin:/bin", "LANG": "C.UTF-8", "LC_ALL": "C.UTF-8", "HOME": work,
            "TMPDIR": work, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}


def _tail(path: Path, limit: int) -> tuple[str, int]:
    """The last ``limit`` bytes of a file, decoded, and its size (0 and "" when it is missing)."""
    try:
        with open(path, "rb") as f:
            size = f.seek(0, os.SEEK_END)
            f.seek(max(0, size - limit))
            data = f.read(limit)
    except OSError:
        return "", 0
    return data.decode("utf-8", errors="replace"), size


def _remove_tree(root: Path) -> None:
    """Remove the temporary directory whatever modes the program left on it (a directory it made unreadable is
    opened up again first: a user, unlike root, could not delete it)."""
    shutil.rmtree(root, ignore_errors=True)
    if not root.exists():
        return
    with contextlib.suppress(OSError):
        os.chmod(root, stat.S_IRWXU)
    for path, dirs, _files in os.walk(root):
        for name in dirs:
            with contextlib.suppress(OSError):
                os.chmod(os.path.join(path, name), stat.S_IRWXU)
    shutil.rmtree(root, ignore_errors=True)


def _signal_name(number: int | None) -> str | None:
    if number is None:
        return None
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> bool:
    """Wait for ``proc`` to exit WITHOUT reaping it (its pid, its group's id, stays reserved): True when it
    exited in time."""
    try:
        fd = os.pidfd_open(proc.pid)
    except (AttributeError, OSError):  # no pidfd (old kernel): Popen's wait reaps, a tiny pid-reuse window
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return False
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if poller.poll(left * 1000):
                return True
    finally:
        os.close(fd)


def _first_line(proc: subprocess.Popen[bytes]) -> str:
    """What the supervisor wrote first (its runner's pid), read without blocking (the rest is not needed then)."""
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    try:
        data = os.read(fd, 64)
    except (BlockingIOError, OSError):
        data = b""
    finally:
        os.set_blocking(fd, True)
    return data.decode(errors="replace").partition("\n")[0]


def _group_alive(pgid: int) -> bool:
    """Whether a process of group ``pgid`` is still running (a zombie is not: it waits for init to reap it)."""
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                fields = f.read().rpartition(b")")[2].split()
        except OSError:
            continue
        if len(fields) > 2 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):  # state, ppid, pgrp
            return True
    return False


def _kill_runner_group(pid_text: str) -> None:
    """Kill the runner's process group when the supervisor could not (a group id is never reused while a member
    of the group lives), and wait (up to 2 s) until its processes are dead: nobody else will wait for them."""
    if not pid_text.strip().isdigit():
        return
    pgid = int(pid_text)
    deadline = time.monotonic() + 2.0
    while time.monotonic() < deadline:
        try:
            os.killpg(pgid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            return
        if not _group_alive(pgid):
            return
        time.sleep(0.01)


def run_python(program: str, limits: Limits | None = None, *, tail_bytes: int = 2000) -> SandboxResult:
    """Run ``program`` (Python source) in the sandbox (module docstring) and say how it ended. Never raises for
    what the program does; raises :class:`SandboxError` when the sandbox itself cannot run."""
    limits = limits or Limits()
    if not sys.platform.startswith("linux"):
        raise SandboxError(f"sandbox: running code needs Linux (prctl, namespaces, /proc), not {sys.platform}")
    root = Path(tempfile.mkdtemp(prefix="routerlab-sandbox-"))
    proc: subprocess.Popen[bytes] | None = None
    try:
        work = root / "work"
        work.mkdir(mode=0o700)
        program_path = root / "solution.py"
        program_path.write_bytes(program.encode("utf-8", errors="replace"))  # a lone surrogate becomes '?'
        cfg = {"program": str(program_path), "stdout": str(root / "stdout"), "stderr": str(root / "stderr"),
               "wall_s": float(limits.wall_s), "cpu_s": math.ceil(limits.cpu_s),
               "memory_bytes": int(limits.memory_bytes), "output_bytes": int(limits.output_bytes),
               "nproc": int(limits.nproc), "nofile": int(limits.nofile),
               "isolate_network": bool(limits.isolate_network)}
        start = time.perf_counter()
        try:
            args = [f"{key}={int(value) if isinstance(value, bool) else value}" for key, value in cfg.items()]
            proc = subprocess.Popen([sys.executable, "-I", str(_CHILD), *args], cwd=work,
                                    env=_environment(str(work)), stdin=subprocess.DEVNULL,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
        except OSError as exc:
            raise SandboxError(f"sandbox: cannot start {sys.executable}: {exc}") from exc
        finished = _wait_exit(proc, limits.wall_s + _GRACE_S)
        if not finished:  # the supervisor is stuck (stopped by the program?): it still holds the runner, kill its group
            _kill_runner_group(_first_line(proc))
        # Whatever happened, kill the supervisor's whole group; it is not reaped yet, so the id is still its own.
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        seconds = time.perf_counter() - start
        runner_pid, _, record = out.decode(errors="replace").partition("\n")
        if not finished:
            return SandboxResult(False, "killed", f"the sandbox did not finish within {limits.wall_s + _GRACE_S:g} s "
                                 "and was killed", seconds)
        try:
            report = ast.literal_eval(record)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            report = None
        if not isinstance(report, dict):
            # the supervisor died (killed by the program?): its runner died with it, not the runner's children
            _kill_runner_group(runner_pid)
            last = (err.decode(errors="replace").strip().splitlines() or [f"exit code {proc.returncode}"])[-1]
            if proc.returncode is not None and proc.returncode < 0:
                return SandboxResult(False, "killed", f"the sandbox's supervisor was killed by "
                                     f"{_signal_name(-proc.returncode)}", seconds)
            raise SandboxError(f"sandbox: the supervisor failed: {last}")
        stdout, stdout_bytes = _tail(root / "stdout", tail_bytes)
        stderr, stderr_bytes = _tail(root / "stderr", tail_bytes)
        return _result(report, limits, stdout, stdout_bytes, stderr, stderr_bytes)
    finally:
        if proc is not None and proc.returncode is None:  # interrupted (Ctrl-C) while waiting: its whole group
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        _remove_tree(root)


def _result(report: dict[str, Any], limits: Limits, stdout: str, stdout_bytes: int, stderr: str,
            stderr_bytes: int) -> SandboxResult:
    """Classify the supervisor's report (see :class:`SandboxResult` for the reasons)."""
    runner: dict[str, Any] | None = None
    raw = report.get("runner") or ""
    if raw:
        try:
            parsed = ast.literal_eval(raw)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            parsed = None
        runner = parsed if isinstance(parsed, dict) else {"status": "exception", "type": "garbled report",
                                                            "message": raw[:200], "line": None, "errno": None}
    sig = report.get("signal")
    cpu = float(report.get("cpu_seconds", 0.0))
    line: int | None = None
    if runner is not None and runner.get("status") == "setup":
        raise SandboxError(f"sandbox: cannot set up the program: {runner.get('type')}: {runner.get('message')}")
    reason: Reason
    if report.get("timed_out"):
        reason, detail = "timeout", f"timeout after {limits.wall_s:g} s (wall clock)"
    elif runner is not None and runner.get("status") == "ok" and report.get("exit_code") == 0:
        reason, detail = "ok", "ok"
    elif runner is not None and runner.get("status") in ("exception", "exit"):
        kind, message, line = str(runner.get("type")), str(runner.get("message") or ""), runner.get("line")
        first = message.strip().splitlines()[0] if message.strip() else ""
        detail = f"{kind}: {first}" if first else kind
        if kind == "AssertionError":
            reason = "assertion"
        elif kind == "MemoryError":
            reason, detail = "memory", f"MemoryError (memory limit {limits.memory_bytes / 2**20:g} MiB)"
        elif runner.get("errno") == _EFBIG:
            reason, detail = "output-limit", f"output limit of {limits.output_bytes} bytes reached ({detail})"
        else:
            reason = "error"
            if runner.get("status") == "exit":
                detail = f"the program exited ({kind}: {first or 'None'}) before its end"
    elif sig == signal.SIGXCPU or (sig == signal.SIGKILL and cpu >= math.ceil(limits.cpu_s)):
        reason, detail = "cpu", f"CPU limit of {math.ceil(limits.cpu_s)} s reached"
    elif sig is not None:
        reason, detail = "killed", f"killed by {_signal_name(sig)}"
    else:
        reason, detail = "error", f"the program exited with code {report.get('exit_code')} before its end"
    return SandboxResult(
        passed=reason == "ok", reason=reason, detail=detail, seconds=float(report.get("seconds", 0.0)),
        cpu_seconds=cpu, max_rss_bytes=int(report.get("max_rss_bytes", 0)), exit_code=report.get("exit_code"),
        signal=_signal_name(sig), line=line if isinstance(line, int) else None, stdout=stdout, stderr=stderr,
        stdout_bytes=stdout_bytes, stderr_bytes=stderr_bytes, network=str(report.get("network", "")),
        subreaper=bool(report.get("subreaper")), nproc_enforced=bool(report.get("nproc_enforced")),
        leftover_killed=int(report.get("leftover_killed", 0)), leftover_alive=int(report.get("leftover_alive", 0)))
