"""Property test: whatever numbers, lists or strings a user types into any command's options, the CLI
ends in a result (exit 0) or one readable error line (exit 2), never a traceback.

Inputs are tiny (a 120-query demo table, cheap routers) and valid counts are kept small, so the whole
file runs in well under a minute; out-of-range values (negative, zero, huge, NaN, inf, empty, junk) are
drawn freely since they must be refused before any work."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from routerlab.cli import main
from routerlab.datasets import demo

FUZZ = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BIG = 10**30
# integers: refused ones (<= 0, beyond every maximum) and a few small valid ones
bad_or_small_int = st.one_of(st.integers(-BIG, 0), st.integers(10**7, BIG), st.integers(1, 3))
# any float: NaN, +-inf, negative, tiny, huge
any_float = st.floats(allow_nan=True, allow_infinity=True)
junk = st.sampled_from(["", " ", ",", ",,", "x", "1,x", "-", "1e400", "nan", "inf", "-inf", "0x10", "1/2", "1,,2",
                        "None", "true", "\u00e9"])
number_text = st.one_of(bad_or_small_int.map(str), any_float.map(str), junk)
int_list = st.lists(bad_or_small_int.map(str) | junk, max_size=4).map(",".join)
float_list = st.lists(any_float.map(str) | st.sampled_from(["0", "0.5", "1"]) | junk, max_size=4).map(",".join)


@pytest.fixture(scope="module")
def table_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    path = tmp_path_factory.mktemp("fuzz") / "t"
    demo(n_queries=120, seed=0).save(path)
    return str(path)


pytestmark = pytest.mark.usefixtures("quiet_progress")


OUTCOMES: list[int] = []  # exit codes seen, to check that the fuzzing reaches valid runs too


def run_cli(argv: list[str]) -> None:
    """Run one command line and assert the contract: exit 0 or 2, no traceback, exit 2 = one error line."""
    err, out = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(out):
        try:
            code = main(argv)
        except BaseException as exc:  # anything escaping main is a bug the user would see as a traceback
            raise AssertionError(f"{argv}: {type(exc).__name__}: {exc}") from exc
    text = err.getvalue()
    OUTCOMES.append(code)
    assert code in (0, 2), (argv, code, text)
    assert "Traceback" not in text, (argv, text)
    errors = [line for line in text.splitlines() if line.startswith("routerlab: error: ")]
    if code == 2:
        assert len(errors) == 1, (argv, text)
        assert len(errors[0]) < 600, (argv, errors[0])
        others = [line for line in text.splitlines() if line and not line.startswith("routerlab: ")]
        assert not others, (argv, text)  # only routerlab's own lines (the error, warnings)
    else:
        assert not errors, (argv, text)


def options(valid: dict[str, str], field: str, value: str) -> list[str]:
    """Small valid options with one of them replaced by the fuzzed value, so every field's bad values are
    reached and a good share of the runs is valid end to end."""
    return [x for key, v in {**valid, field: value}.items() for x in (key, v)]


EVALUATE = {"--routers": "random,best-single,knn:k=3", "--seed": "0", "--n-boot": "40", "--split": "random:0.25",
            "--compare-to": "auto"}


@FUZZ
@given(field=st.sampled_from(sorted(EVALUATE)), value=number_text,
       compare=st.sampled_from(["auto", "none", "random", "knn", "", "oracle", "knn:k=3"]))
def test_evaluate(table_dir: str, field: str, value: str, compare: str) -> None:
    fuzzed = {"--routers": f"random,best-single,knn:k={value}", "--split": f"random:{value}",
              "--compare-to": compare}.get(field, value)
    run_cli(["evaluate", table_dir, *options(EVALUATE, field, fuzzed), "--json"])


@FUZZ
@given(value=number_text | st.sampled_from(["0.2", "0.5", "0.99", "1e-9"]),
       protocol=st.sampled_from(["full", "cold-start"]))
def test_evaluate_dev(table_dir: str, value: str, protocol: str) -> None:
    run_cli(["evaluate", table_dir, *options(EVALUATE, "--dev", value), "--protocol", protocol, "--json"])


SCALING = {"--m": "2,3", "--p": "0,0.5,1", "--samples": "3", "--seed": "0"}


@FUZZ
@given(field=st.sampled_from(sorted(SCALING)), number=number_text, m=int_list, p=float_list)
def test_scaling(table_dir: str, field: str, number: str, m: str, p: str) -> None:
    value = {"--m": m, "--p": p}.get(field, number)
    run_cli(["scaling", table_dir, *options(SCALING, field, value), "--json"])


GROUPS = {"--m": "2", "--draws": "2", "--seed": "0", "--n-boot": "40", "--routers": "random,best-single"}


@FUZZ
@given(field=st.sampled_from(["--m", "--draws", "--seed", "--n-boot"]), number=number_text, m=int_list)
def test_groups(table_dir: str, field: str, number: str, m: str) -> None:
    run_cli(["groups", table_dir, *options(GROUPS, field, m if field == "--m" else number), "--json"])


SOCIETY = {"--coreset": "3", "--alpha": "0.5", "--seed": "0"}


@FUZZ
@given(field=st.sampled_from(sorted(SOCIETY)), value=number_text)
def test_society(table_dir: str, field: str, value: str) -> None:
    run_cli(["society", table_dir, *options(SOCIETY, field, value), "--json"])


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=number_text)
def test_audit(table_dir: str, tmp_path_factory: pytest.TempPathFactory, seed: str) -> None:
    out = tmp_path_factory.mktemp("audit")
    run_cli(["audit", table_dir, "--only", "table,bounds", "--seed", seed, "-o", str(out), "--json"])


@FUZZ
@given(router=st.sampled_from(["knn:k", "prknn:k", "cluster:k", "cluster:temperature", "linear:alpha",
                               "oracle-p:p", "graph:alpha", "graph:hops", "naive-bayes:var_smoothing"]),
       value=number_text)
def test_router_options(table_dir: str, router: str, value: str) -> None:
    run_cli(["evaluate", table_dir, "--routers", f"random,{router}={value}", "--n-boot", "40", "--json"])


PARTIAL = {"--routers": "random,best-single,knn:k=3", "--seed": "0", "--n-boot": "40", "--rounds": "2"}


@FUZZ
@given(field=st.sampled_from(["--rounds", "--seed", "--logging", "--order", "--n-boot"]), value=number_text,
       protocol=st.sampled_from(["cold-start", "voyager", "full", "", "Voyager"]))
def test_partial_protocols(table_dir: str, field: str, value: str, protocol: str) -> None:
    fuzzed = {"--logging": f"eps-greedy:best-single:{value}", "--order": value}.get(field, value)
    valid = {**PARTIAL, **({"--logging": "uniform"} if protocol == "cold-start" else {})}
    if protocol != "voyager":
        valid.pop("--rounds")
    run_cli(["evaluate", table_dir, "--protocol", protocol, *options(valid, field, fuzzed), "--json"])


@FUZZ
@given(field=st.sampled_from(["--policy", "--seed", "--part", "--split"]), value=number_text,
       kind=st.sampled_from(["uniform", "eps-greedy:best-single", "softmax:knn:k=3", "router:oracle", "nope"]))
def test_log(table_dir: str, tmp_path_factory: pytest.TempPathFactory, field: str, value: str, kind: str) -> None:
    out = tmp_path_factory.mktemp("log") / "logs.csv"
    valid = {"--policy": "uniform", "--seed": "0", "--part": "test", "--split": "random:0.25"}
    fuzzed = {"--policy": f"{kind}:{value}" if kind != "uniform" else value}.get(field, value)
    run_cli(["log", table_dir, *options(valid, field, fuzzed), "-o", str(out), "--json"])


@pytest.fixture(scope="module")
def logs_file(table_dir: str, tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("logs") / "test.csv"
    run_cli(["log", table_dir, "--part", "test", "--split", "random:0.25", "--seed", "1", "-o", str(out)])
    return str(out)


@FUZZ
@given(field=st.sampled_from(["--routers", "--estimators", "--seed", "--n-boot"]), value=number_text)
def test_ope(table_dir: str, logs_file: str, field: str, value: str) -> None:
    valid = {"--routers": "best-single,knn:k=3", "--estimators": "ips,snips,dr", "--seed": "0", "--n-boot": "40",
             "--split": "random:0.25"}
    fuzzed = {"--routers": f"best-single,knn:k={value}", "--estimators": f"ips,{value}"}.get(field, value)
    run_cli(["ope", table_dir, logs_file, *options(valid, field, fuzzed), "--json"])


@FUZZ
@given(router=st.sampled_from(["linucb:alpha", "linucb:l2", "thompson:draws", "thompson:v", "eps-greedy:eps",
                               "barp:beta", "barp:weight", "barp:epochs", "knn:logged", "mlp:logged"]),
       value=number_text)
def test_partial_router_options(table_dir: str, router: str, value: str) -> None:
    run_cli(["evaluate", table_dir, "--routers", f"random,{router}={value}", "--n-boot", "40",
             "--protocol", "cold-start", "--json"])


TWO_MODEL = {"--small": "tiny-2b", "--large": "frontier-235b", "--routers": "oracle,best-single,knn:k=3",
             "--ood": "law", "--split": "random:0.25", "--seed": "0", "--boot": "40", "--lpm-band": "0.25,0.3",
             "--rp-band": "0.85,0.95", "--convention": "routerlab"}


@FUZZ
@given(field=st.sampled_from(["--boot", "--seed", "--split", "--lpm-band", "--rp-band", "--routers", "--convention",
                              "--small", "--id"]),
       value=number_text, band=float_list)
def test_two_model(table_dir: str, field: str, value: str, band: str) -> None:
    fuzzed = {"--split": f"random:{value}", "--routers": f"oracle,knn:k={value}", "--lpm-band": band,
              "--rp-band": band, "--convention": value or "routerxbench", "--id": f"math,{value}"}.get(field, value)
    run_cli(["two-model", table_dir, *options(TWO_MODEL, field, fuzzed), "--json"])


POWER = {"--routers": "best-single,knn:k=3", "--delta": "0.05", "--alpha": "0.05", "--power": "0.8", "--seed": "0",
         "--n-boot": "40", "--split": "random:0.25"}


@FUZZ
@given(field=st.sampled_from([*sorted(POWER), "--versus"]), value=number_text)
def test_power(table_dir: str, field: str, value: str) -> None:
    fuzzed = {"--routers": f"best-single,knn:k={value}", "--split": f"random:{value}",
              "--versus": f"knn:k={value}"}.get(field, value)
    run_cli(["power", table_dir, *options(POWER, field, fuzzed), "--json"])


CHOOSE = {"--routers": "best-single,knn:k=3", "--seed": "0", "--split": "random:0.25", "--dev": "0.3",
          "--call-rate": "0.3", "--small": "tiny-2b", "--large": "frontier-235b"}
BUDGETS = ("--max-cost", "--max-latency", "--min-quality")


@FUZZ
@given(field=st.sampled_from(["--call-rate", *BUDGETS, "--dev", "--pace-band", "--split", "--seed", "--small",
                               "--routers"]),
       value=number_text)
def test_choose(table_dir: str, field: str, value: str) -> None:
    fuzzed = {"--split": f"random:{value}", "--routers": f"best-single,knn:k={value}"}.get(field, value)
    valid = {k: v for k, v in CHOOSE.items()
             if field not in BUDGETS or k not in ("--call-rate", "--small", "--large")}
    run_cli(["choose", table_dir, *options(valid, field, fuzzed), "--json"])


def test_output_paths_fuzz_free_cases(tmp_path: Path) -> None:
    """The -o cases of the issue, through the same contract check."""
    (tmp_path / "f").write_text("x")
    for out in (tmp_path / "f", tmp_path / "f" / "sub"):
        run_cli(["scaling", "--samples", "2", "-o", str(out)])


def test_fuzzing_reached_both_outcomes() -> None:
    """Guard against a fuzzer that only ever produces errors (or only successes): both must occur."""
    if len(OUTCOMES) < 50:
        pytest.skip("run with the fuzz tests above")
    assert OUTCOMES.count(0) >= 10 and OUTCOMES.count(2) >= 10, (OUTCOMES.count(0), OUTCOMES.count(2))


LEVEL_TEXT = st.one_of(junk, st.sampled_from(["character", "word,syntax", "all", "paraphrase", "character,character",
                                              "nope", "character,", "Character"]))
BAD_OUTPUTS = st.sampled_from(["ok", "dir", "under-file", "txt", "missing-parent"])


def _variants_out(root: Path, kind: str) -> str:
    """A valid variants path, or one of the bad -o cases (a directory, a path under a file, a wrong suffix)."""
    (root / "file").write_text("x")
    return str({"ok": root / "v.jsonl", "dir": root, "under-file": root / "file" / "v.jsonl",
                "txt": root / "v.txt", "missing-parent": root / "new" / "deeper" / "v.jsonl"}[kind])


@FUZZ
@given(field=st.sampled_from(["--levels", "--variants", "--seed", "--part", "--split", "--backend", "--ask"]),
       value=number_text, levels=LEVEL_TEXT, out=BAD_OUTPUTS)
def test_perturb(table_dir: str, tmp_path_factory: pytest.TempPathFactory, field: str, value: str, levels: str,
                 out: str) -> None:
    valid = {"--levels": "character", "--variants": "2", "--seed": "0", "--part": "test", "--split": "random:0.25"}
    fuzzed = {"--levels": levels, "--split": f"random:{value}", "--backend": f"local:{value}" if value else value
              }.get(field, value)
    path = _variants_out(tmp_path_factory.mktemp("perturb"), out)
    run_cli(["perturb", table_dir, *options(valid, field, fuzzed), "-o", path, "--json"])


@FUZZ
@given(field=st.sampled_from(["--levels", "--variants", "--seed", "--n-boot", "--split", "--routers",
                              "--variants-file", "--outcomes", "--ask"]),
       value=number_text, levels=LEVEL_TEXT)
def test_robustness(table_dir: str, tmp_path_factory: pytest.TempPathFactory, field: str, value: str,
                    levels: str) -> None:
    root = tmp_path_factory.mktemp("robust")
    (root / "bad.jsonl").write_text('{"query_id": "x", "level": "character", "text": ""}\n')
    valid = {"--routers": "random,best-single", "--levels": "character", "--variants": "1", "--seed": "0",
             "--n-boot": "40", "--split": "random:0.25"}
    fuzzed = {"--levels": levels, "--split": f"random:{value}", "--routers": f"random,knn:k={value}",
              "--variants-file": str(root / ("bad.jsonl" if value else "missing.jsonl")),
              "--outcomes": str(root / "no-table")}.get(field, value)
    run_cli(["robustness", table_dir, *options(valid, field, fuzzed), "--json"])


@pytest.fixture(scope="module")
def halves_dirs(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """The fuzz table's actors in two tables (the second's rows reversed), for ``routerlab join``."""
    root = tmp_path_factory.mktemp("halves")
    table = demo(n_queries=120, seed=0)
    table.select_actors(table.actor_names[:4]).save(root / "a")
    right = table.select_actors(table.actor_names[4:])
    right.select_queries(list(range(right.n_queries))[::-1]).save(root / "b")
    return str(root / "a"), str(root / "b")


ACTOR_TEXT = st.one_of(junk, st.sampled_from(["tiny-2b", "frontier-235b", "mid-20b", "nope", "tiny-2b,mid-20b"]))


@FUZZ
@given(small=st.one_of(st.none(), ACTOR_TEXT), large=st.one_of(st.none(), ACTOR_TEXT),
       how=st.one_of(st.sampled_from(["inner", "left"]), junk), name=st.one_of(st.none(), junk),
       out=BAD_OUTPUTS)
def test_join(halves_dirs: tuple[str, str], tmp_path_factory: pytest.TempPathFactory, small: str | None,
              large: str | None, how: str, name: str | None, out: str) -> None:
    root = tmp_path_factory.mktemp("join")
    (root / "file").write_text("x")
    target = {"ok": root / "j", "dir": root, "under-file": root / "file" / "j", "txt": root / "file",
              "missing-parent": root / "new" / "deeper"}[out]
    argv = ["join", *halves_dirs, "-o", str(target), "--how", how, "--json"]
    argv += [*(["--small", small] if small is not None else []), *(["--large", large] if large is not None else []),
             *(["--name", name] if name is not None else [])]
    run_cli(argv)


@FUZZ
@given(field=st.sampled_from(["--limit", "--seed", "--samples", "--temperature", "--shard-size", "--model",
                              "--questions", "-o"]),
       value=number_text)
def test_extract(tmp_path_factory: pytest.TempPathFactory, field: str, value: str) -> None:
    """extract's options, spec, question source and output: valid ones reach the model load, which fails on a
    missing .gguf (no model is loaded here), so every run ends in one error line."""
    root = tmp_path_factory.mktemp("extract")
    (root / "q.jsonl").write_text('{"id": "a", "question": "Which?", "choices": ["x", "y"], "answer": "A"}\n')
    (root / "file").write_text("x")
    valid = {"--model": f"local:{root / 'missing.gguf'}", "--questions": str(root / "q.jsonl"), "-o": str(root / "o"),
             "--limit": "1", "--seed": "0", "--samples": "2", "--temperature": "0.7", "--shard-size": "4"}
    fuzzed = {"--model": f"local:{value}" if value.strip() else value, "--questions": str(root / f"{value}.jsonl"),
              "-o": str(root / "file" / value) if value.strip() else str(root / "file")}.get(field, value)
    run_cli(["extract", *options(valid, field, fuzzed), "--json"])


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(small=st.sampled_from(["tiny-2b", "frontier-235b", "nosuch", "", " ", "\u00e9", "tiny-2b,frontier-235b"]),
       large=st.sampled_from(["frontier-235b", "tiny-2b", "nosuch", ""]),
       which=st.sampled_from(["both", "small", "large"]),
       logs=st.sampled_from(["", "/no/such.csv", "/", ".", "x.parquet"]))
def test_audit_pair_and_logs(table_dir: str, tmp_path_factory: pytest.TempPathFactory, small: str, large: str,
                             which: str, logs: str) -> None:
    out = tmp_path_factory.mktemp("audit")
    pair = {"both": ["--small", small, "--large", large], "small": ["--small", small],
            "large": ["--large", large]}[which]
    run_cli(["audit", table_dir, "--only", "table,bounds", *pair, *(["--logs", logs] if logs else []),
             "--no-cache", "-o", str(out), "--json"])
