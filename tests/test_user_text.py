"""What users read names papers and sections, never the developers' specification or the paper files (issue 21):
"SPEC 3" and "routerworld.txt" meant nothing to a user, who has neither file. Help of every command, a demo
audit's text and report, the glossary and the listings are scanned, and so is every string of the source a user
can see (docstrings aside: a command's docstring is its help, scanned as such)."""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from routerlab import cli
from routerlab.cli import main
from routerlab.datasets import demo
from routerlab.metrics.catalog import GLOSSARY

SRC = Path(__file__).resolve().parents[1] / "src" / "routerlab"
DOCS = Path(__file__).resolve().parents[1] / "docs"
FORBIDDEN = re.compile(r"\bSPEC\s*[0-9]|\bSPEC section|SPEC\.md"
                       r"|(?i:\b(routerworld|routereval|routerxbench[\w-]*|hse-[\w-]+)\.(txt|json)\b)")


def offending(text: str) -> list[str]:
    """The lines of ``text`` that cite the specification or a paper's file."""
    return [line.strip() for line in text.splitlines() if FORBIDDEN.search(line)]


def test_the_pattern_catches_what_users_saw() -> None:
    assert offending("Candidate groups (SPEC 4) at m = 3")
    assert offending("not the risk-aversion routerworld.txt reports")
    assert offending("Invariance check (hse-paper-review.json, SPEC 3)")
    assert offending("name  label  better  SPEC section  protocols")
    # placeholders and the words "spec"/"specs" are not citations
    assert not offending("--routers SPECS [--split SPLIT]  ROUTER_SPEC  a router spec such as knn:k=5")
    assert not offending("Routing robustness (the HSE paper, section 5): RouterWorld, sections 3.3 and 4.4")


def _docstrings(tree: ast.AST) -> set[int]:
    """ids of the string statements that document (a module, class or function, or an attribute after it)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            out.update(id(st.value) for st in node.body
                       if isinstance(st, ast.Expr) and isinstance(st.value, ast.Constant))
    return out


def _protocol_spec_attributes(tree: ast.AST) -> set[int]:
    """A protocol's ``spec = "SPEC 4, 5, 7"``: the sections it implements, for developers; ``routerlab protocols``
    shows them as papers and sections (``metrics.sources.cite_sections``)."""
    return {id(node.value) for node in ast.walk(tree)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant)
            and [getattr(t, "id", None) for t in node.targets] == ["spec"]}


def test_no_user_visible_string_of_the_source_cites_the_specification() -> None:
    found = []
    for path in sorted(SRC.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        skip = _docstrings(tree) | _protocol_spec_attributes(tree)
        found += [f"{path.relative_to(SRC)}:{node.lineno}: {node.value[:80]!r}" for node in ast.walk(tree)
                  if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
                  and FORBIDDEN.search(node.value)]
    assert not found, "\n".join(found)


def test_the_user_docs_name_papers() -> None:
    bad = {p.name: offending(p.read_text(encoding="utf-8")) for p in sorted(DOCS.glob("*.md"))}
    assert not {k: v for k, v in bad.items() if v}


def test_help_of_every_command(capsys: pytest.CaptureFixture[str]) -> None:
    cli._register_commands()
    pages = [[], *([n] for n in cli.COMMANDS.names() if n != "results"), ["results"], ["results", "query"],
             ["results", "show"]]
    bad = {}
    for args in pages:
        assert main([*args, "-h"]) == 0
        bad[" ".join(args) or "routerlab"] = offending(capsys.readouterr().out)
    assert not {k: v for k, v in bad.items() if v}
    # the command docstrings' references became the papers' sections
    assert main(["robustness", "-h"]) == 0
    assert "Routing robustness (the HSE paper, section 5)" in capsys.readouterr().out


def test_glossary_and_listings(capsys: pytest.CaptureFixture[str]) -> None:
    for key, (label, meaning) in GLOSSARY.items():
        assert not offending(f"{label}: {meaning}"), key
    for args in (["metrics", "--terms", "--meaning"], ["metrics", "--json", "--terms"], ["protocols"], ["routers"],
                 ["info"]):
        assert main(args) == 0
        out = capsys.readouterr().out
        assert not offending(out), args
    assert main(["info"]) == 0
    assert "latency_s = (TTFT + (tokens_out - 1) * ITL) / 1000  [RouterWorld, equation 1]" in capsys.readouterr().out


def test_a_demo_audit_s_text_and_report(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ROUTERLAB_PROGRESS", "0")
    demo(300, seed=2).save(tmp_path / "t")
    out = tmp_path / "audit"
    assert main(["audit", str(tmp_path / "t"), "--quick", "--no-cache", "-o", str(out)]) == 0
    printed = capsys.readouterr()
    texts = {"console": printed.out + printed.err, **{f: (out / f).read_text(encoding="utf-8")
                                                       for f in ("report.md", "report.html", "results.json")}}
    assert {k: offending(v) for k, v in texts.items() if offending(v)} == {}
    json.loads(texts["results.json"])
    # the cold-start finding names the paper and section of the result it checks
    assert "RouterWorld (section 5.2)" in texts["report.md"]
