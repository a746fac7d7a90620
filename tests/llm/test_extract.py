"""``llm.extract`` on the real SmolLM2-135M (the session fixture ``smollm2``): what is kept per question is
checked against independent forward passes of the same model, the call cache against ``collect``, and the
directory against a rerun and a changed question. About 25 short forward passes in all (CI has 2 cores).

Tolerances: the model runs in bfloat16, whose spacing at a logit of magnitude x is 2^(floor(log2|x|) - 7)
(0.25 for the ~30 these logits reach). Two passes that compute the same numbers in a different order (the
self-ask turn on the kept key/value states against a from-scratch pass) may differ by a step per logit, so a
difference of two logits is allowed two steps of its larger logit. Hidden states are float16-rounded means.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from routerlab.errors import UsageError
from routerlab.features.signals import load_signals
from routerlab.llm.base import BackendSpec, Message
from routerlab.llm.cache import CachedBackend, CallCache
from routerlab.llm.collect import choice_logits, collect, prompt_messages
from routerlab.llm.extract import SELF_ASK_PROMPT, ExtractReport, ExtractSettings, extract
from routerlab.llm.questions import Question
from tests.llm.test_collect import ScriptedBackend

MC = [
    Question("m1", "Which is a fruit?", "food", "test", ("stone", "apple", "chair"), "B", "mc"),
    Question("m2", "Which is a colour?", "art", "test", ("red", "dog", "car", "run"), "A", "mc"),
    Question("m3", "Which is a number?", "math", "test", ("cat", "seven", "sky", "hat"), "B", "mc"),
    Question("m4", "Which flies?", "nature", "test", ("rock", "fish", "bird", "tree"), "C", "mc"),
    Question("m5", "Which is frozen water?", "nature", "test", ("steam", "sand", "oil", "ice"), "D", "mc"),
    Question("m6", "What is 2 + 3?", "math", "test", ("4", "5", "6", "23", "1"), "B", "mc"),
]
SHORT = Question("s1", "What is 6 times 7?", "math", "test", None, "42", "short")
SETTINGS = ExtractSettings(samples=4, temperature=1.0, self_ask=True, seed=0)


def bf16_step(x: float) -> float:
    """The spacing of bfloat16 numbers (8 significant bits) at ``x``."""
    return 2.0 ** (math.floor(math.log2(abs(x))) - 7) if x else 2.0 ** -133


def rows_of(out: Path) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for meta in sorted((out / "shards").glob("*.json")):
        for row in json.loads(meta.read_text())["rows"]:
            rows[row["id"]] = row
    return rows


@pytest.fixture(scope="module")
def extracted(smollm2: Any, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, ExtractReport]:
    """The six questions and a short-answer one, extracted once for the module, shards of four."""
    root = tmp_path_factory.mktemp("extract")
    report = extract(smollm2, [*MC[:3], SHORT, *MC[3:]], root / "sig", SETTINGS, shard_size=4,
                     call_cache=CallCache(root / "calls"))
    return root / "sig", root / "calls", report


def test_report_shapes_and_skipped(extracted: tuple[Path, Path, ExtractReport]) -> None:
    out, _, report = extracted
    assert (report.rows, report.fresh, report.reused) == (6, 6, 0)
    assert report.skipped == {"not multiple choice": 1}  # the short-answer question, counted
    assert (report.layers, report.dim) == (31, 576)  # SmolLM2-135M: the embeddings and 30 blocks, width 576
    assert report.questions_per_s > 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert (manifest["layers"], manifest["dim"], manifest["rows"]) == (31, 576, 6)
    assert manifest["settings"] == {"samples": 4, "temperature": 1.0, "self_ask": True, "seed": 0}
    assert len(list((out / "shards").glob("*.npz"))) == 2  # 4 + 2 rows
    got = load_signals(out, [q.id for q in MC][::-1], texts=[q.text for q in MC][::-1])
    assert got["hidden"].shape == (6, 31, 576) and got["hidden"].dtype == np.float16
    assert got["option_logits"].shape == (6, 5) and got["option_logits"].dtype == np.float32
    assert np.isnan(got["option_logits"][1:, 4]).all() and np.isfinite(got["option_logits"][0]).all()  # m6: 5
    assert got["self_ask"].shape == (6,) and np.isfinite(got["self_ask"]).all()
    assert got["samples"].shape == (6, 4) and got["samples"].min() >= 0


def test_hidden_states_are_prompt_means_of_every_layer(smollm2: Any,
                                                       extracted: tuple[Path, Path, ExtractReport]) -> None:
    """Paper eq. 12: per layer, the mean over the prompt's tokens (an independent pass, averaged in float64)."""
    import torch

    out = extracted[0]
    q = MC[1]
    ids = smollm2.tokenizer(smollm2.prompt(prompt_messages(q)), add_special_tokens=False)["input_ids"]
    with smollm2._calling(), torch.inference_mode():  # on the backend's one thread
        states = smollm2.loaded.model(input_ids=torch.tensor([ids]), output_hidden_states=True).hidden_states
    want = np.stack([h[0].double().numpy().mean(axis=0) for h in states])
    got = load_signals(out, [q.id], texts=[q.text])["hidden"][0].astype(np.float64)
    assert rows_of(out)[q.id]["tokens"] == len(ids)
    np.testing.assert_allclose(got, want, rtol=2**-10, atol=1e-6)  # float16 keeps 11 significant bits
    assert not np.allclose(got[1], got[-1])  # the layers differ: not one layer repeated


def test_option_logits_equal_choice_scores(smollm2: Any, extracted: tuple[Path, Path, ExtractReport]) -> None:
    """The same forward pass as ``choice_scores``: equal within one bf16 step (rows keep 4 decimals)."""
    rows = rows_of(extracted[0])
    for q in MC:
        sc = smollm2.choice_scores(prompt_messages(q), tuple(q.letters))
        row = rows[q.id]
        assert row["letters"] == q.letters and row["choice"] == sc.choice
        tol = bf16_step(max(abs(v) for v in sc.logits)) + 1e-4
        np.testing.assert_allclose(row["option_logits"], sc.logits, rtol=0, atol=tol)


def test_call_cache_answers_collect(smollm2: Any, extracted: tuple[Path, Path, ExtractReport]) -> None:
    """After extract, collect --mode logits on the same questions asks the model nothing."""
    out, calls, _ = extracted
    cache = CallCache(calls)
    table = collect(MC, [("smol", CachedBackend(smollm2, cache))], mode="logits", timing_probes=0, progress=False)
    run = table.meta["collect"]["actors"]["smol"]
    assert (run["fresh_calls"], run["cached_calls"]) == (0, 6) and cache.misses == 0
    rows = rows_of(out)
    want = np.array([rows[q.id]["option_logits"] + [np.nan] * (5 - len(q.letters)) for q in MC])
    np.testing.assert_allclose(choice_logits(table, "smol")[:, :5], want, atol=1e-4)


def test_rerun_reuses_every_row(smollm2: Any, extracted: tuple[Path, Path, ExtractReport]) -> None:
    out = extracted[0]
    ids, texts = [q.id for q in MC], [q.text for q in MC]
    before = load_signals(out, ids, texts)
    report = extract(smollm2, MC, out, SETTINGS, shard_size=4)
    assert (report.fresh, report.reused, report.rows) == (0, 6, 6)
    assert (report.layers, report.dim) == (31, 576)  # from the manifest: nothing was computed
    after = load_signals(out, ids, texts)
    for name in before:
        np.testing.assert_array_equal(after[name], before[name])
    assert json.loads((out / "manifest.json").read_text())["runs"][-1]["fresh"] == 0


def test_changed_text_is_extracted_again(smollm2: Any, extracted: tuple[Path, Path, ExtractReport],
                                         tmp_path: Path) -> None:
    out = tmp_path / "copy"
    shutil.copytree(extracted[0], out)
    edited = Question("m4", "Which animal flies?", "nature", "test", ("rock", "fish", "bird", "tree"), "C", "mc")
    report = extract(smollm2, [MC[0], edited, edited], out, SETTINGS)  # asked twice: extracted once
    assert (report.fresh, report.reused, report.rows) == (1, 2, 7)
    new = load_signals(out, ["m4", "m1"], texts=[edited.text, MC[0].text])
    old = load_signals(out, ["m4"], texts=[MC[3].text])
    want = smollm2.choice_scores(prompt_messages(edited), tuple(edited.letters)).logits
    np.testing.assert_allclose(new["option_logits"][0, :4], want, atol=bf16_step(max(map(abs, want))) + 1e-4)
    assert not np.array_equal(new["hidden"][0], old["hidden"][0])
    assert not np.array_equal(new["option_logits"][0], old["option_logits"][0])


def test_one_question_under_two_ids_gets_a_row_for_each(smollm2: Any,
                                                       extracted: tuple[Path, Path, ExtractReport],
                                                       tmp_path: Path) -> None:
    """MMLU-Pro repeats questions under other ids: the same prompt is computed once, and every id gets its row
    (copied), whether its twin was extracted by an earlier run or by this one."""
    out = tmp_path / "copy"
    shutil.copytree(extracted[0], out)
    twin_of_old = Question("x1", MC[1].text, "art2", "test", MC[1].choices, MC[1].gold, "mc")
    new = Question("n1", "Which is a metal?", "chem", "test", ("iron", "wood", "salt"), "A", "mc")
    twin_of_new = Question("x2", new.text, "chem2", "test", new.choices, new.gold, "mc")
    report = extract(smollm2, [twin_of_old, new, twin_of_new], out, SETTINGS)
    assert (report.fresh, report.reused, report.rows) == (1, 2, 9)
    got = load_signals(out, ["m2", "x1", "n1", "x2"], [MC[1].text, MC[1].text, new.text, new.text])
    for name, arr in got.items():
        np.testing.assert_array_equal(arr[0], arr[1], err_msg=name)
        np.testing.assert_array_equal(arr[2], arr[3], err_msg=name)
    assert rows_of(out)["x2"]["dataset"] == "chem2"


def test_self_ask_continuation_equals_a_fresh_pass(smollm2: Any,
                                                   extracted: tuple[Path, Path, ExtractReport]) -> None:
    """The follow-up turn runs on the first pass's key/value states; from scratch it gives the same score.
    A pass over the follow-up's new tokens alone (the states ignored) gives a different one, so the
    tolerance does tell the two apart."""
    import torch

    tok, model = smollm2.tokenizer, smollm2.loaded.model
    yes = [int(tok(w, add_special_tokens=False)["input_ids"][0]) for w in ("Yes", " Yes", "yes", " yes")
           if len(tok(w, add_special_tokens=False)["input_ids"]) == 1]
    no = [int(tok(w, add_special_tokens=False)["input_ids"][0]) for w in ("No", " No", "no", " no")
          if len(tok(w, add_special_tokens=False)["input_ids"]) == 1]
    rows = rows_of(extracted[0])
    apart = 0
    for q in MC:
        row = rows[q.id]
        messages = prompt_messages(q)
        ids = tok(smollm2.prompt(messages), add_special_tokens=False)["input_ids"]
        follow = (*messages, Message("assistant", row["choice"]), Message("user", SELF_ASK_PROMPT))
        ids2 = tok(smollm2.prompt(follow), add_special_tokens=False)["input_ids"]
        assert ids2[:len(ids)] == ids  # so extract took the continuation path
        with smollm2._calling(), torch.inference_mode():
            full = model(input_ids=torch.tensor([ids2])).logits[0, -1].float()
            tail = model(input_ids=torch.tensor([ids2[len(ids):]])).logits[0, -1].float()
        y, n = max(float(full[j]) for j in yes), max(float(full[j]) for j in no)
        tol = 2 * bf16_step(max(abs(y), abs(n))) + 1e-4
        assert row["self_ask"] == pytest.approx(y - n, abs=tol), q.id
        wrong = max(float(tail[j]) for j in yes) - max(float(tail[j]) for j in no)
        apart += abs(wrong - (y - n)) > tol
    assert apart >= 4


def test_samples_reproducible_for_a_seed(smollm2: Any, tmp_path: Path) -> None:
    """Same seed, same draws; at a temperature near 0 every draw is the model's top token (a letter of the
    options when it is one, stripped)."""
    import torch

    qs = MC[:2]
    drawn = {}
    for name, seed in (("a", 3), ("b", 3), ("c", 4)):
        extract(smollm2, qs, tmp_path / name, ExtractSettings(samples=8, self_ask=False, seed=seed))
        drawn[name] = [rows_of(tmp_path / name)[q.id]["samples"] for q in qs]
    assert drawn["a"] == drawn["b"] and drawn["a"] != drawn["c"]
    assert all(len(s) == 8 for s in drawn["a"])
    extract(smollm2, qs, tmp_path / "cold", ExtractSettings(samples=3, temperature=1e-4, self_ask=False))
    tok = smollm2.tokenizer
    for q in qs:
        ids = tok(smollm2.prompt(prompt_messages(q)), add_special_tokens=False)["input_ids"]
        with smollm2._calling(), torch.inference_mode():
            logits = smollm2.loaded.model(input_ids=torch.tensor([ids])).logits[0, -1].float()
        tops = torch.nonzero(logits == logits.max()).flatten().tolist()  # bf16 logits can tie
        texts = [tok.decode([t]).strip() for t in tops]
        want = {t.strip("().:").upper() if t.strip("().:").upper() in q.letters else t for t in texts}
        got = rows_of(tmp_path / "cold")[q.id]["samples"]
        assert len(got) == 3 and set(got) <= want, (got, want)


def test_refusals(smollm2: Any, tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="only a local model gives"):
        extract(ScriptedBackend(BackendSpec("scripted", "x")), MC, tmp_path / "a")
    with pytest.raises(UsageError, match="shard_size must be >= 1"):
        extract(smollm2, MC, tmp_path / "b", shard_size=0)
    for bad in ({"samples": -1}, {"temperature": float("nan")}, {"temperature": 0.0}, {"temperature": math.inf}):
        with pytest.raises(UsageError):
            ExtractSettings(**bad)
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()


def test_a_directory_keeps_one_model_and_one_setting(smollm2: Any, extracted: tuple[Path, Path, ExtractReport],
                                                     tmp_path: Path) -> None:
    """Rows of other settings or another model would be joined as if they were these: refused up front."""
    out = tmp_path / "copy"
    shutil.copytree(extracted[0], out)
    with pytest.raises(UsageError, match=r"extracted with other settings \(samples=4, .*asked: samples=2"):
        extract(smollm2, MC, out, ExtractSettings(samples=2))
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["model_id"] == smollm2.model_id
    (out / "manifest.json").write_text(json.dumps({**manifest, "model_id": "local:other:bfloat16"}))
    with pytest.raises(UsageError, match="holds signals of another model"):
        extract(smollm2, MC, out, SETTINGS)
    assert len(list((out / "shards").glob("*.json"))) == 2  # nothing added
