"""Every real table of ../shared/data survives save/load unchanged, and every importer is registered."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from routerlab.data.importers import importers
from routerlab.data.importers.long import read_long_format
from routerlab.data.importers.mmlu_pro import read_mmlu_pro
from routerlab.data.importers.routeprofile import read_routeprofile
from routerlab.data.importers.routerbench import read_routerbench
from routerlab.data.importers.routerdc import read_routerdc
from routerlab.data.importers.steps import read_steps_format
from routerlab.data.store import load
from routerlab.data.table import RoutingTable


@pytest.mark.parametrize("name", ["llmrouter", "routerbench", "routeprofile", "mmlu-pro"])
def test_real_table_survives_save_and_load(real_table: Callable[[str], RoutingTable], name: str,
                                           tmp_path: Path) -> None:
    table = real_table(name)
    back = load(table.save(tmp_path / "t"), verify=True)
    assert back.content_hash == table.content_hash
    assert {k: v.tolist() for k, v in back.queries.extra.items()} == {
        k: v.tolist() for k, v in table.queries.extra.items()
    }


def test_every_importer_is_registered() -> None:
    known = {name: info.fn for name, info in importers().items()}
    assert known == {"long": read_long_format, "mmlu-pro": read_mmlu_pro, "routerbench": read_routerbench,
                     "routerdc": read_routerdc, "routeprofile": read_routeprofile, "steps": read_steps_format}
