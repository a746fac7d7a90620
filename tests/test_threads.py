"""torch_threads (routerlab/_threads.py): blocks that set torch's process-wide thread count from several threads
at once (routerlab serve) never run on another block's count, and the count before comes back at the end.
Run against a stand-in torch module that records the count, so no model (nor torch) is needed."""

from __future__ import annotations

import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager

import pytest

from routerlab import _threads
from routerlab._threads import torch_threads


class FakeTorch(types.ModuleType):
    def __init__(self, count: int) -> None:
        super().__init__("torch")
        self.count = count
        self.sets = 0

    def get_num_threads(self) -> int:
        return self.count

    def set_num_threads(self, n: int) -> None:
        self.sets += 1
        self.count = n


@pytest.fixture
def fake_torch(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeTorch]:
    fake = FakeTorch(4)
    monkeypatch.setitem(sys.modules, "torch", fake)
    yield fake
    assert _threads._held["count"] == 0


def naive(fake: FakeTorch) -> Callable[[int], AbstractContextManager[None]]:
    """The save / set / restore each caller used to write (for the harness's own check)."""
    from contextlib import contextmanager

    @contextmanager
    def block(n: int) -> Iterator[None]:
        before = fake.get_num_threads()
        fake.set_num_threads(n)
        try:
            yield
        finally:
            fake.set_num_threads(before)

    return block


def hammer(fake: FakeTorch, block: Callable[[int], AbstractContextManager[None]]) -> tuple[list[str], int]:
    """9 threads, wanting 1, 2 or 3 threads, each entering its block 25 times; what each block saw."""
    wrong: list[str] = []
    inside, most = [0], [0]
    lock = threading.Lock()

    def worker(n: int) -> None:
        for _ in range(25):
            with block(n):
                with lock:
                    inside[0] += 1
                    most[0] = max(most[0], inside[0])
                for _ in range(3):
                    if fake.count != n:
                        wrong.append(f"wanted {n}, ran on {fake.count}")
                    time.sleep(0.0003)
                with lock:
                    inside[0] -= 1

    workers = [threading.Thread(target=worker, args=(1 + i % 3,)) for i in range(9)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    return wrong, most[0]


def test_concurrent_blocks_run_on_their_own_count_and_restore_it(fake_torch: FakeTorch) -> None:
    wrong, most = hammer(fake_torch, torch_threads)
    assert wrong == []
    assert fake_torch.count == 4  # the count before, restored once the last block left
    assert most >= 2  # blocks that want the same count did run together


def test_the_harness_catches_the_plain_save_set_restore(fake_torch: FakeTorch) -> None:
    wrong, _ = hammer(fake_torch, naive(fake_torch))
    assert wrong  # interleaved blocks ran on each other's counts


def test_zero_leaves_the_count_and_nesting_keeps_the_outer_count(fake_torch: FakeTorch) -> None:
    with torch_threads(0):
        assert fake_torch.count == 4 and fake_torch.sets == 0
    with torch_threads(2):
        assert fake_torch.count == 2
        with torch_threads(1):  # nested in the same thread: would wait for itself; the outer count stands
            assert fake_torch.count == 2
        with torch_threads(0):
            assert fake_torch.count == 2
        assert fake_torch.count == 2
    assert fake_torch.count == 4
    with torch_threads(4):  # already the count: nothing to set
        pass
    assert fake_torch.sets == 2


def test_an_error_in_the_block_still_restores(fake_torch: FakeTorch) -> None:
    with pytest.raises(RuntimeError), torch_threads(1):
        raise RuntimeError("boom")
    assert fake_torch.count == 4
    with torch_threads(3):  # and the next block is not left waiting
        assert fake_torch.count == 3
