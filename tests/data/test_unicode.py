"""Text that is not valid Unicode (a lone UTF-16 surrogate escape in JSON) is refused at import with one line
naming the file, row and field, instead of a UnicodeEncodeError when the table is hashed or written."""

from __future__ import annotations

from pathlib import Path

import pytest

from routerlab.cli import main

LONE = "\\udc00"  # as written in the JSON file: an escape that decodes to a lone low surrogate
PAIR = "\\ud83d\\ude00"  # a valid pair (an emoji): must import


def _run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = main(list(args))
    return code, capsys.readouterr().err


def test_routerdc_json_with_a_lone_surrogate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "train.json"
    f.write_text('[{"question": "ok", "scores": {"a": 1.0, "b": 0.0}},'
                 f'{{"question": "bad {LONE} text", "scores": {{"a": 1.0, "b": 0.0}}}}]')
    code, err = _run(capsys, "import", "routerdc", str(f), "-o", str(tmp_path / "t"))
    assert code == 2
    assert "Traceback" not in err
    assert "train.json" in err and "[1].question" in err and "surrogate" in err
    assert not (tmp_path / "t").exists()


def test_surrogate_pairs_are_fine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    f = tmp_path / "train.json"
    f.write_text(f'[{{"question": "smile {PAIR}", "scores": {{"a": 1.0, "b": 0.0}}}}]')
    code, _ = _run(capsys, "import", "routerdc", str(f), "-o", str(tmp_path / "t"))
    assert code == 0
    import routerlab

    assert routerlab.load(tmp_path / "t").queries.text[0] == "smile \U0001f600"


@pytest.mark.parametrize("suffix", [".jsonl", ".json"])
def test_long_format_names_row_and_field(tmp_path: Path, capsys: pytest.CaptureFixture[str], suffix: str) -> None:
    rows = ['{"query_id": "q1", "actor": "a", "score": 1, "text": "fine"}',
            f'{{"query_id": "q2", "actor": "a", "score": 1, "text": "bad {LONE}"}}']
    f = tmp_path / f"cells{suffix}"
    f.write_text("\n".join(rows) + "\n" if suffix == ".jsonl" else "[" + ",".join(rows) + "]")
    code, err = _run(capsys, "import", "long", str(f), "-o", str(tmp_path / "t"))
    assert code == 2 and "Traceback" not in err
    assert f.name in err and "text" in err and "surrogate" in err
    if suffix == ".jsonl":
        assert "row 2" in err
