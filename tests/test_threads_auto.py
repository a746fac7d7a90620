"""The torch thread count picked for a local model given no ``threads=`` (routerlab/_threads.py): the free cores
(``/proc/stat`` over a short window less this process's own use, else the load average), shared among the local
models of this process that may run at once. Readers and clock are fakes; no model is loaded."""

from __future__ import annotations

import os
import sys
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from routerlab import _threads
from routerlab._threads import (
    auto_threads,
    cpu_ticks,
    free_cores,
    hold_torch_user,
    measure_free_cores,
    torch_users,
)


def stat(*cpus: tuple[int, int]) -> str:
    """A /proc/stat text whose CPU i has (busy, idle) ticks ``cpus[i]`` (busy as user time)."""
    lines = ["cpu  0 0 0 0 0 0 0 0 0 0"]
    lines += [f"cpu{i} {busy} 0 0 {idle} 0 0 0 0 0 0" for i, (busy, idle) in enumerate(cpus)]
    return "\n".join([*lines, "intr 1 2 3", "ctxt 5"]) + "\n"


class Clock:
    def __init__(self) -> None:
        self.t = 100.0

    def __call__(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.t += s


def measure(texts: list[str | None], own: list[float], **kwargs: Any) -> int:
    clock = Clock()
    reads, owns = iter(texts), iter(own)
    return measure_free_cores(0.5, read_stat=lambda: next(reads), own_cpu=lambda: next(owns), clock=clock,
                              sleep=clock.sleep, **kwargs)


def test_free_cores_rounds_and_keeps_one() -> None:
    assert free_cores(2, 0.0) == 2 and free_cores(2, 0.6) == 1 and free_cores(2, 0.4) == 2
    assert free_cores(2, 5.0) == 1 and free_cores(16, 3.2) == 13 and free_cores(4, -1.0) == 4


def test_cpu_ticks_reads_the_allowed_cpus_only() -> None:
    text = stat((10, 90), (50, 50), (7, 3))
    assert cpu_ticks(text, [0, 1]) == (140, 200) and cpu_ticks(text, [2]) == (3, 10)
    assert cpu_ticks(text, [3]) is None and cpu_ticks("cpu0 x y\n", [0]) is None


def test_busy_cores_of_other_processes_are_not_free() -> None:
    # over 0.5 s: cpu0 fully busy (50 ticks), cpu1 idle; this process used nothing -> one core free
    assert measure([stat((0, 0), (0, 0)), stat((50, 0), (0, 50))], [1.0, 1.0], cpus=[0, 1]) == 1
    # the same busy core, but it was this process's own work (0.5 s of CPU in 0.5 s): both are free
    assert measure([stat((0, 0), (0, 0)), stat((50, 0), (0, 50))], [1.0, 1.5], cpus=[0, 1]) == 2
    # both cores busy with others: still one thread, never zero
    assert measure([stat((0, 0), (0, 0)), stat((50, 0), (50, 0))], [0.0, 0.0], cpus=[0, 1]) == 1
    # a third CPU outside the allowed set is busy: it does not count
    assert measure([stat((0, 0), (0, 0), (0, 0)), stat((0, 50), (0, 50), (50, 0))], [0.0, 0.0], cpus=[0, 1]) == 2


def test_without_proc_stat_the_load_average_decides() -> None:
    machine = list(range(os.cpu_count() or 1))
    n = len(machine)
    assert measure([None], [0.0], cpus=machine, loadavg=lambda: (0.2, 0.0, 0.0)) == n
    assert measure([None], [0.0], cpus=machine, loadavg=lambda: (n + 3.0, 0.0, 0.0)) == 1
    if n >= 2:
        assert measure([None], [0.0], cpus=machine, loadavg=lambda: (1.0, 0.0, 0.0)) == n - 1


def test_users_share_the_free_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_threads, "_users", type(_threads._users)())  # other tests' open backends apart
    assert torch_users() == 0
    first = hold_torch_user(("model-a", "bfloat16"))
    same = hold_torch_user(("model-a", "bfloat16"))  # shares model a's lock: never runs at once with it
    assert torch_users() == 1 and auto_threads(free=4) == 4
    other = hold_torch_user(("model-b", "bfloat16"))
    assert torch_users() == 2 and auto_threads(free=4) == 2 and auto_threads(free=1) == 1
    other()
    other()  # a second release does nothing
    assert torch_users() == 1
    first()
    assert torch_users() == 1  # 'same' still holds model a
    same()
    assert torch_users() == 0 and auto_threads(users=3, free=7) == 2


@pytest.fixture()
def fake_models(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """LocalBackend built without a model: torch/transformers stand-ins, and resolve_model/load_model fakes."""
    from routerlab.llm import local

    for name in ("torch", "transformers"):
        if name not in sys.modules:
            monkeypatch.setitem(sys.modules, name, types.ModuleType(name))

    def resolve(model: str, root: Path) -> Any:
        return local.ModelSource(model, "dir", f"id-{model}", lambda: root)

    monkeypatch.setattr(local, "resolve_model", resolve)
    monkeypatch.setattr(local, "load_model", lambda source, dtype, root: object())
    monkeypatch.setattr(_threads, "measure_free_cores", lambda *a, **k: 4)
    monkeypatch.setattr(_threads, "_users", type(_threads._users)())  # other tests' open backends apart
    yield
    assert torch_users() == 0


def test_a_local_backend_without_threads_picks_from_the_free_cores(fake_models: None, tmp_path: Path) -> None:
    from routerlab.llm.base import parse_backend_spec
    from routerlab.llm.local import LocalBackend

    a = LocalBackend(parse_backend_spec("local:a"), cache_dir=tmp_path)
    assert a.threads == 4 and a.threads_auto  # the only torch user: every free core
    a_again = LocalBackend(parse_backend_spec("local:a"), cache_dir=tmp_path)
    assert a_again.threads == 4  # the same model: its calls wait for one another
    b = LocalBackend(parse_backend_spec("local:b"), cache_dir=tmp_path)
    assert b.threads == 2  # two models that may run at once share the 4 free cores
    one = LocalBackend(parse_backend_spec("local:c,threads=1"), cache_dir=tmp_path)
    torch_own = LocalBackend(parse_backend_spec("local:d,threads=0"), cache_dir=tmp_path)
    assert (one.threads, one.threads_auto, torch_own.threads) == (1, False, 0)  # given: as given
    for backend in (a, a_again, b, one, torch_own):
        backend.close()
    b.close()  # closing twice is harmless
