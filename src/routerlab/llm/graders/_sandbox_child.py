"""The sandbox's supervisor: the process :func:`routerlab.llm.graders.sandbox.run_python` starts.

Run as a script (``python -I _sandbox_child.py KEY=VALUE...``), standard library only, never imported by routerlab,
and kept light to start: no json, typing, enum or contextlib (about half the supervisor's start-up time).
It makes itself a child subreaper, cuts itself off the network where the platform allows, then forks the runner:
the runner puts itself in its own process group, sets its resource limits, points stdout/stderr at size-capped
files and executes the program in this interpreter (one interpreter start per program), reporting how it ended
on a pipe. The supervisor enforces the wall-clock limit, kills the runner's process group and then every
process left under it (orphans come back to a subreaper, whatever session or group they moved to), and prints
on its stdout (after the runner's pid, which the runner writes first) one record (a dict's ``repr``: json would cost its
import at every start). See
:mod:`routerlab.llm.graders.sandbox` for the record and the limits.
"""

from __future__ import annotations

import _signal as signal  # signal without its enums: enum's import is a tenth of the start-up
import builtins
import ctypes
import os
import resource
import sys
import time

TYPE_CHECKING = False  # typing is not imported at run time: it pulls in re, enum, collections (start-up time)
if TYPE_CHECKING:
    from types import TracebackType
    from typing import Any

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
RECORD_MAX = 3500  # one write below PIPE_BUF: the runner never blocks on the pipe
CLEANUP_S = 5.0


class _WallTimeout(Exception):
    pass


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _write_file(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def isolate_network(libc: Any) -> str:
    """A new, empty network namespace for this process and its children: ``netns`` (as root), ``userns+netns``
    (unprivileged, through a user namespace mapping our own ids), or why neither worked."""
    if libc.unshare(CLONE_NEWNET) == 0:
        return "netns"
    first = os.strerror(ctypes.get_errno())
    uid, gid = os.geteuid(), os.getegid()
    if libc.unshare(CLONE_NEWUSER | CLONE_NEWNET) != 0:
        return f"not isolated: unshare: {first}; with a user namespace: {os.strerror(ctypes.get_errno())}"
    try:
        _write_file("/proc/self/setgroups", "deny")
        _write_file("/proc/self/uid_map", f"{uid} {uid} 1")
        _write_file("/proc/self/gid_map", f"{gid} {gid} 1")
    except OSError as exc:  # the namespaces exist; only the id maps failed (ids then read as nobody)
        return f"userns+netns (id map failed: {exc.strerror})"
    return "userns+netns"


def user_tasks(uid: int) -> int:
    """How many tasks (processes and threads) ``uid`` runs now: RLIMIT_NPROC counts them all."""
    total = 0
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            if os.stat(f"/proc/{name}").st_uid != uid:
                continue
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
            total += int(data[data.rindex(b")") + 2:].split()[17])
        except (OSError, ValueError, IndexError):
            continue
    return total


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` (from /proc)."""
    out = []
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                data = f.read()
            if int(data[data.rindex(b")") + 2:].split()[1]) == pid:
                out.append(int(name))
        except (OSError, ValueError, IndexError):
            continue
    return out


def kill_leftovers() -> tuple[int, int]:
    """Kill every process left under this one; returns (how many were left: killed or reaped, how many were
    still alive at the deadline).

    Only direct children are signalled: a child's pid cannot be reused before this process reaps it, so no
    unrelated process is ever hit. Killing a child orphans its children, which the kernel hands to this
    subreaper: they are direct children at the next round."""
    killed: set[int] = set()
    deadline = time.monotonic() + CLEANUP_S
    me = os.getpid()
    while True:
        while True:
            try:
                pid, _ = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return len(killed), 0
            if pid == 0:
                break
            killed.add(pid)
        kids = children_of(me)
        if time.monotonic() > deadline:
            return len(killed), len(kids)
        for pid in kids:
            try:
                os.kill(pid, signal.SIGKILL)
                killed.add(pid)
            except ProcessLookupError:
                pass
        time.sleep(0.001)


def _limit(which: int, soft: int, hard: int) -> None:
    """Set a limit, never above the hard limit this process already has (lowering is always allowed)."""
    _, current = resource.getrlimit(which)
    if current != resource.RLIM_INFINITY:
        soft, hard = min(soft, current), min(hard, current)
    resource.setrlimit(which, (soft, hard))


def set_limits(cfg: dict[str, Any]) -> None:
    cpu = int(cfg["cpu_s"])
    _limit(resource.RLIMIT_CORE, 0, 0)
    _limit(resource.RLIMIT_CPU, cpu, cpu + 1)  # SIGXCPU at the soft limit, SIGKILL a second later
    _limit(resource.RLIMIT_AS, cfg["memory_bytes"], cfg["memory_bytes"])
    _limit(resource.RLIMIT_FSIZE, cfg["output_bytes"], cfg["output_bytes"])
    _limit(resource.RLIMIT_NPROC, cfg["nproc_limit"], cfg["nproc_limit"])
    _limit(resource.RLIMIT_NOFILE, cfg["nofile"], cfg["nofile"])


def _failing_line(tb: TracebackType | None, path: str) -> int | None:
    """The line of ``path`` in the innermost traceback frame that belongs to the program."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == path:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _report(fd: int, record: dict[str, Any]) -> bool:
    try:
        os.write(fd, repr(record).encode()[:RECORD_MAX])
    except OSError:
        return False
    return True


def run_program(cfg: dict[str, Any], report: int) -> int:
    """The runner, in the forked child: limits, output files, then the program; returns the exit code."""
    try:
        os.setpgid(0, 0)
        # Its pid (= its process group) to the caller first, before any of the program runs: should the program
        # stop or kill the supervisor, the caller still kills this group.
        os.write(1, f"{os.getpid()}\n".encode())
        libc = _libc()
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        if os.getppid() != cfg["supervisor"]:  # the supervisor died before the line above: nobody to report to
            os._exit(4)
        null = os.open(os.devnull, os.O_RDONLY)
        out = os.open(cfg["stdout"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        err = os.open(cfg["stderr"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.dup2(null, 0)
        os.dup2(out, 1)
        os.dup2(err, 2)
        for fd in (null, out, err):
            os.close(fd)
        os.closerange(3, report)
        os.closerange(report + 1, 1 << 16)
        with open(cfg["program"], encoding="utf-8") as f:
            source = f.read()
        set_limits(cfg)
    except BaseException as exc:  # the sandbox could not be set up: the caller raises, this is no grade
        _report(report, {"status": "setup", "type": type(exc).__name__, "message": str(exc)[:600]})
        return 4
    runner = os.getpid()
    reserve = [bytearray(1 << 20)]  # freed on MemoryError so that the report can still be written
    path = cfg["program"]
    sys.argv = [path]
    namespace: dict[str, Any] = {"__name__": "__solution__", "__file__": path, "__builtins__": builtins}
    record: dict[str, Any]
    try:
        exec(compile(source, path, "exec"), namespace)
        sys.stdout.flush()
        sys.stderr.flush()
        record = {"status": "ok"}
    except BaseException as exc:
        reserve.clear()
        namespace.clear()
        tb = exc.__traceback__
        import traceback  # here, not at start-up: most programs never need it

        if tb is not None:
            traceback.clear_frames(tb)
        line = exc.lineno if isinstance(exc, SyntaxError) and exc.filename == path else _failing_line(tb, path)
        try:
            message = (exc.msg or "") if isinstance(exc, SyntaxError) else str(exc)
        except BaseException:  # a hostile __str__
            message = "?"
        record = {"status": "exit" if isinstance(exc, SystemExit) else "exception",
                  "type": type(exc).__name__, "message": message[:600], "line": line,
                  "errno": exc.errno if isinstance(exc, OSError) else None}
        for stream in (sys.stdout, sys.stderr):  # what was printed before the failure, for the tails
            try:
                if stream is sys.stderr:
                    traceback.print_exception(type(exc), exc, tb)
                stream.flush()
            except BaseException:
                pass
    if os.getpid() != runner:  # a child the program forked came back here: only the runner reports
        os._exit(0)
    if not _report(report, record):
        return 3
    return 0 if record["status"] == "ok" else 1


def supervise(cfg: dict[str, Any]) -> dict[str, Any]:
    libc = _libc()
    subreaper = libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0
    root = os.geteuid() == 0
    # counted before a user namespace hides other users' processes behind the overflow uid
    cfg["nproc_limit"] = cfg["nproc"] if root else user_tasks(os.geteuid()) + cfg["nproc"]
    network = isolate_network(libc) if cfg["isolate_network"] else "not isolated: not asked"
    read_end, write_end = os.pipe()
    cfg["supervisor"] = os.getpid()
    start = time.monotonic()
    pid = os.fork()
    if pid == 0:  # the runner: never returns
        code = 4
        try:
            os.close(read_end)
            code = run_program(cfg, write_end)
        finally:
            os._exit(code)
    os.close(write_end)

    def on_alarm(signum: int, frame: object) -> None:
        raise _WallTimeout

    timed_out = False
    signal.signal(signal.SIGALRM, on_alarm)
    try:
        signal.setitimer(signal.ITIMER_REAL, cfg["wall_s"])
        os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        signal.setitimer(signal.ITIMER_REAL, 0)
    except _WallTimeout:
        timed_out = True
    signal.setitimer(signal.ITIMER_REAL, 0)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    # The runner is not reaped yet, so its pid (= its group's id) cannot have been reused: kill the group.
    try:  # noqa: SIM105 - contextlib's import costs start-up time
        os.killpg(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    _, status, usage = os.wait4(pid, 0)
    seconds = time.monotonic() - start
    os.set_blocking(read_end, False)
    try:
        raw = os.read(read_end, 1 << 16)
    except BlockingIOError:
        raw = b""
    os.close(read_end)
    killed, alive = kill_leftovers()
    return {
        "runner": raw.decode(errors="replace"),
        "exit_code": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None,
        "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
        "timed_out": timed_out,
        "seconds": seconds,
        "cpu_seconds": usage.ru_utime + usage.ru_stime,
        "max_rss_bytes": usage.ru_maxrss * 1024,
        "network": network,
        "subreaper": subreaper,
        "nproc_enforced": not root,
        "leftover_killed": killed,
        "leftover_alive": alive,
    }


def main() -> None:
    cfg: dict[str, Any] = dict(arg.split("=", 1) for arg in sys.argv[1:])
    for key in ("wall_s",):
        cfg[key] = float(cfg[key])
    for key in ("cpu_s", "memory_bytes", "output_bytes", "nproc", "nofile"):
        cfg[key] = int(cfg[key])
    cfg["isolate_network"] = cfg["isolate_network"] == "1"
    result = supervise(cfg)
    sys.stdout.write(repr(result))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
