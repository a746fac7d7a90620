"""The audit's section cache: a rerun recomputes nothing, a changed option only the sections that read it (directly
or through an earlier section's shared result), a crash loses only what had not finished, a damaged entry or an
unwritable cache never fails the audit; progress lines estimate each section's time on stderr."""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from routerlab.data.table import RoutingTable
from routerlab.datasets import demo
from routerlab.reports import audit, audit_cache
from routerlab.reports.audit import AuditContext, run_audit
from routerlab.reports.blocks import Finding, Paragraph, Section

CHEAP = {"routers": ["oracle", "random", "best-single", "knn:k=5"]}
REAL = ["table", "bounds", "leaderboard", "partial"]


@pytest.fixture(scope="module")
def small_demo() -> RoutingTable:
    return demo(300, seed=2)


def counting(monkeypatch: pytest.MonkeyPatch, names: list[str]) -> Counter[str]:
    """Wrap the named registered sections so each call is counted."""
    calls: Counter[str] = Counter()
    audit.sections()
    for name in names:
        reg = audit._SECTIONS[name]

        def wrapped(table: RoutingTable, ctx: AuditContext, _fn: Any = reg.fn, _name: str = name) -> Section:
            calls[_name] += 1
            sec: Section = _fn(table, ctx)
            return sec

        monkeypatch.setitem(audit._SECTIONS._entries, name, audit._Registered(name, reg.order, wrapped, reg.depends))
    return calls


def without_timings(path: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads(path.read_text())
    record.pop("timings")
    return record


def test_a_rerun_calls_no_section_and_writes_the_same_report(small_demo: RoutingTable, tmp_path: Path,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting(monkeypatch, REAL)
    cache = tmp_path / "cache"
    first = run_audit(small_demo, tmp_path / "a", only=REAL, options=CHEAP, cache_dir=cache)
    assert calls == Counter(REAL) and not any(t["from_cache"] for t in first["timings"].values())
    calls.clear()
    second = run_audit(small_demo, tmp_path / "b", only=REAL, options=CHEAP, cache_dir=cache)
    assert not calls
    assert all(t["from_cache"] for t in second["timings"].values())
    assert list(second["timings"]) == REAL
    a, b = tmp_path / "a", tmp_path / "b"
    assert (a / "report.md").read_bytes() == (b / "report.md").read_bytes()
    assert (a / "report.html").read_bytes() == (b / "report.html").read_bytes()
    assert without_timings(a / "results.json") == without_timings(b / "results.json")
    assert first["files"] == second["files"]
    for f in first["files"]:  # figures come back byte for byte; decisions are rewritten from the same choices
        if f.endswith(".png"):
            assert (a / f).read_bytes() == (b / f).read_bytes(), f
    assert any(f.endswith(".png") for f in first["files"])


def test_a_changed_option_reruns_only_the_sections_that_read_it(small_demo: RoutingTable, tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting(monkeypatch, REAL)
    cache = tmp_path / "cache"
    run_audit(small_demo, tmp_path / "a", only=REAL, options=CHEAP, cache_dir=cache)
    calls.clear()
    other = {"routers": ["oracle", "random", "best-single", "knn:k=3"]}
    record = run_audit(small_demo, tmp_path / "b", only=REAL, options=other, cache_dir=cache)
    assert calls == Counter(["leaderboard", "partial"])
    assert [n for n, t in record["timings"].items() if t["from_cache"]] == ["table", "bounds"]
    specs = {r["spec"] for r in record["sections"]["leaderboard"]["results"]}
    assert "knn:k=3" in specs and "knn:k=5" not in specs
    calls.clear()
    run_audit(small_demo, tmp_path / "c", only=REAL, options=CHEAP, cache_dir=cache)  # both variants are kept
    assert not calls
    calls.clear()
    run_audit(small_demo, tmp_path / "d", only=REAL, options=CHEAP, seed=1, cache_dir=cache)  # a new split
    assert calls == Counter(REAL)


def fake_sections(monkeypatch: pytest.MonkeyPatch, calls: Counter[str]) -> list[str]:
    """Three sections: `maker` writes ctx.shared from an option, `user` reads only that shared entry, `plain`
    reads nothing; `maker` also declares `depends` for one option and reads another undeclared one."""

    def maker(table: RoutingTable, ctx: AuditContext) -> Section:
        calls["maker"] += 1
        ctx.shared["x"] = (ctx.options.get("routers"), ctx.options.get("undeclared"))
        return Section("Maker", [Paragraph(f"x = {ctx.shared['x']}")], {"x": str(ctx.shared["x"])})

    def user(table: RoutingTable, ctx: AuditContext) -> Section:
        calls["user"] += 1
        return Section("User", [Paragraph(f"saw {ctx.shared.get('x')}")], {"saw": str(ctx.shared.get("x"))})

    def plain(table: RoutingTable, ctx: AuditContext) -> Section:
        calls["plain"] += 1
        return Section("Plain", [Paragraph("nothing read")], findings=[Finding("a plain finding", values={"n": 1})])

    audit.sections()
    for i, (name, fn, depends) in enumerate([("maker", maker, ("routers",)), ("user", user, ()),
                                             ("plain", plain, ())]):
        monkeypatch.setitem(audit._SECTIONS._entries, name, audit._Registered(name, 900 + i, fn, depends))
    return ["maker", "user", "plain"]


def test_a_section_reading_an_earlier_sections_result_reruns_with_it(small_demo: RoutingTable, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    names = fake_sections(monkeypatch, calls)
    cache = tmp_path / "cache"

    def go(options: dict[str, Any], out: str) -> dict[str, Any]:
        calls.clear()
        return run_audit(small_demo, tmp_path / out, only=names, options=options, cache_dir=cache)

    go({"routers": ["a"]}, "1")
    assert calls == Counter(names)
    rec = go({"routers": ["a"]}, "2")
    assert not calls
    assert rec["sections"]["user"]["saw"] == str((["a"], None))
    rec = go({"routers": ["b"]}, "3")  # a declared option: maker reruns, user sees its new result
    assert calls == Counter(["maker", "user"]) and rec["sections"]["user"]["saw"] == str((["b"], None))
    rec = go({"routers": ["b"], "undeclared": 7}, "4")  # read but not declared: still detected
    assert calls == Counter(["maker", "user"]) and rec["sections"]["user"]["saw"] == str((["b"], 7))
    go({"routers": ["b"], "undeclared": 7, "unread": 1}, "5")  # an option nobody reads changes nothing
    assert not calls
    calls.clear()
    rec = run_audit(small_demo, tmp_path / "6", only=["user", "plain"], options={}, cache_dir=cache)
    assert calls == Counter(["user"]) and rec["sections"]["user"]["saw"] == "None"  # no producer now


def test_a_crash_keeps_the_sections_before_it(small_demo: RoutingTable, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    calls = counting(monkeypatch, REAL)
    reg = audit._SECTIONS["leaderboard"]

    def crash(table: RoutingTable, ctx: AuditContext) -> Section:
        raise RuntimeError("out of memory, say")

    monkeypatch.setitem(audit._SECTIONS._entries, "leaderboard", audit._Registered("leaderboard", reg.order, crash))
    cache = tmp_path / "cache"
    with pytest.raises(RuntimeError):
        run_audit(small_demo, tmp_path / "a", only=REAL, options=CHEAP, cache_dir=cache)
    assert not (tmp_path / "a").exists()
    assert calls == Counter(["table", "bounds"])
    monkeypatch.setitem(audit._SECTIONS._entries, "leaderboard", reg)
    calls.clear()
    record = run_audit(small_demo, tmp_path / "a", only=REAL, options=CHEAP, cache_dir=cache)
    assert calls == Counter(["leaderboard", "partial"])
    assert [n for n, t in record["timings"].items() if t["from_cache"]] == ["table", "bounds"]


def test_damaged_entries_are_recomputed_and_an_unwritable_cache_is_not_fatal(
        small_demo: RoutingTable, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
        capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ROUTERLAB_PROGRESS", "lines")
    calls = counting(monkeypatch, ["table", "bounds"])
    cache = tmp_path / "cache"
    good = run_audit(small_demo, tmp_path / "a", only=["table", "bounds"], cache_dir=cache)
    entries = sorted(cache.glob("*.pkl"))
    assert len(entries) == 2
    entries[0].write_bytes(b"not a pickle")
    entries[1].write_bytes(entries[1].read_bytes()[:40])  # truncated
    calls.clear()
    capsys.readouterr()
    again = run_audit(small_demo, tmp_path / "b", only=["table", "bounds"], cache_dir=cache)
    assert calls == Counter(["table", "bounds"])
    assert again["sections"] == good["sections"]
    assert capsys.readouterr().err.count("ignored unreadable cache entry") == 2
    blocked = tmp_path / "a-file"
    blocked.write_text("in the way")
    calls.clear()
    third = run_audit(small_demo, tmp_path / "c", only=["table", "bounds"], cache_dir=blocked)
    assert calls == Counter(["table", "bounds"]) and third["sections"] == good["sections"]
    assert "could not cache section table" in capsys.readouterr().err


def test_progress_lines_estimate_each_section(small_demo: RoutingTable, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("ROUTERLAB_PROGRESS", "lines")
    cache = tmp_path / "cache"
    run_audit(small_demo, tmp_path / "a", only=["table", "bounds"], cache_dir=cache)
    out, err = capsys.readouterr()
    assert out == ""  # progress never goes to stdout
    lines = [ln for ln in err.splitlines() if ln.startswith("routerlab: audit: ")]
    assert re.fullmatch(r"routerlab: audit: table \(1/2\), (about \d+ s|under 1 s); (about \d+ s|under 1 s) left",
                        lines[0]), lines[0]
    assert lines[1].startswith("routerlab: audit: table (1/2) done in ")
    assert lines[2].startswith("routerlab: audit: bounds (2/2), ")
    timings = json.loads((cache / "timings.json").read_text())
    assert set(timings) == {audit_cache.timing_key(n, 300, 8, False) for n in ("table", "bounds")}
    run_audit(small_demo, tmp_path / "b", only=["table", "bounds"], cache_dir=cache)
    err = capsys.readouterr().err
    assert "routerlab: audit: table (1/2) from cache" in err and "bounds (2/2) from cache" in err
    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")
    run_audit(small_demo, tmp_path / "c", only=["table", "bounds"], cache_dir=cache)
    assert "audit:" not in capsys.readouterr().err


def test_estimates_use_the_last_run_else_the_cost_model(small_demo: RoutingTable, tmp_path: Path) -> None:
    from routerlab.reports.audit import _estimate

    assert _estimate(12.5, "leaderboard", small_demo, False) == 12.5
    big = demo(3000, seed=0)
    assert _estimate(None, "leaderboard", big, False) > _estimate(None, "leaderboard", small_demo, False)
    assert _estimate(None, "leaderboard", big, True) < _estimate(None, "leaderboard", big, False)

    class Shape:  # the cost model reads only the table's size
        def __init__(self, n_queries: int, n_actors: int) -> None:
            self.n_queries, self.n_actors = n_queries, n_actors

    # anchored on the two measured sizes: about 1.2 s quick on the demo, about 37 s on RouterEval scale
    assert _estimate(None, "leaderboard", Shape(3000, 8), True) == pytest.approx(1.2)  # type: ignore[arg-type]
    assert _estimate(None, "leaderboard", Shape(36000, 8500), True) == pytest.approx(37.0)  # type: ignore[arg-type]
    whole = sum(_estimate(None, n, Shape(36000, 8500), True)  # type: ignore[arg-type]
                for n in ("table", "bounds", "diversity", "scaling", "leaderboard", "partial", "robustness"))
    assert 60 < whole < 400  # the measured quick audit at that scale took 174 s; the old linear model said 600 min
    cache = audit_cache.SectionCache(tmp_path / "c")
    key = audit_cache.timing_key("bounds", 300, 8, False)
    assert cache.last_seconds(key) is None
    cache.record_seconds(key, 1.25)
    assert audit_cache.SectionCache(tmp_path / "c").last_seconds(key) == 1.25
    assert audit_cache.timing_key("bounds", 300, 8, False) == audit_cache.timing_key("bounds", 280, 8, False)
    assert audit_cache.timing_key("bounds", 300, 8, False) != audit_cache.timing_key("bounds", 3000, 8, False)


def test_the_logs_option_is_keyed_by_the_files_content(tmp_path: Path) -> None:
    f = tmp_path / "logs.csv"
    f.write_text("one")
    before = audit_cache.option_fingerprint("logs", str(f))
    assert audit_cache.option_fingerprint("logs", str(f)) == before
    f.write_text("two")
    assert audit_cache.option_fingerprint("logs", str(f)) != before
    assert audit_cache.option_fingerprint("routers", ["a"]) != audit_cache.option_fingerprint("routers", ["b"])


def test_default_cache_dir_follows_the_features_convention(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("ROUTERLAB_CACHE_DIR", str(tmp_path))
    assert audit_cache.default_audit_cache_dir() == tmp_path / "audit"
    monkeypatch.delenv("ROUTERLAB_CACHE_DIR")
    assert audit_cache.default_audit_cache_dir() == Path.home() / ".cache" / "routerlab" / "audit"


def test_tracked_dict_records_every_kind_of_read() -> None:
    d = audit_cache.Tracked({"a": 1, "b": 2})
    d.get("a")
    assert "z" not in d
    assert d.read_keys() == {"a", "z"}
    d.reset()
    _ = {**d}
    assert d.read_keys() == {"a", "b"}
    d.reset()
    _ = dict(d)
    assert d.read_keys() == {"a", "b"}


CliRunner = Callable[[list[str]], int]


def test_cli_cache_options(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    from routerlab.cli import main

    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")
    demo(300, seed=2).save(tmp_path / "t")
    base = ["audit", str(tmp_path / "t"), "--only", "table,bounds"]
    assert main([*base, "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "a")]) == 0
    assert len(list((tmp_path / "c").glob("*.pkl"))) == 2
    assert main([*base, "--cache-dir", str(tmp_path / "c"), "-o", str(tmp_path / "b")]) == 0
    assert "2 of 2 sections reused from the audit cache" in capsys.readouterr().out
    monkeypatch.setenv("ROUTERLAB_CACHE_DIR", str(tmp_path / "env"))
    assert main([*base, "--no-cache", "-o", str(tmp_path / "d")]) == 0
    assert not (tmp_path / "env").exists()
    assert main([*base, "-o", str(tmp_path / "e")]) == 0
    assert len(list((tmp_path / "env" / "audit").glob("*.pkl"))) == 2


def test_old_entries_are_pruned_least_recently_used_first(small_demo: RoutingTable, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    calls: Counter[str] = Counter()
    fake_sections(monkeypatch, calls)
    cache = tmp_path / "cache"
    for i in range(audit_cache.KEEP + 3):
        run_audit(small_demo, tmp_path / f"r{i}", only=["maker"], options={"routers": [str(i)]}, cache_dir=cache)
        if i == 0:
            first = next(cache.glob("maker.*.pkl"))
        run_audit(small_demo, tmp_path / f"s{i}", only=["maker"], options={"routers": ["0"]}, cache_dir=cache)
    entries = list(cache.glob("maker.*.pkl"))
    assert len(entries) == audit_cache.KEEP and first in entries  # used every time: kept
    calls.clear()
    run_audit(small_demo, tmp_path / "again", only=["maker"], options={"routers": ["1"]}, cache_dir=cache)
    assert calls == Counter(["maker"])  # the oldest variant was removed
