"""The report's glossary is the metric catalog's: importing any module (every audit section, every command) leaves
it as it was, and no source file writes into it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

from routerlab.metrics.catalog import GLOSSARY
from routerlab.reports import audit

SRC = Path(__file__).resolve().parents[2] / "src"

IMPORT_ALL = """
import importlib, json, pkgutil, sys
from routerlab.metrics.catalog import GLOSSARY
before = {k: list(v) for k, v in GLOSSARY.items()}
imported = []
for package in ("routerlab.reports.sections", "routerlab.reports", "routerlab.cli", "routerlab.protocols"):
    pkg = importlib.import_module(package)
    for mod in pkgutil.iter_modules(pkg.__path__):
        if mod.name.startswith("__"):  # cli/__main__ runs the command line
            continue
        importlib.import_module(f"{package}.{mod.name}")
        imported.append(f"{package}.{mod.name}")
from routerlab.reports import audit
audit.sections()
after = {k: list(v) for k, v in GLOSSARY.items()}
json.dump({"before": before, "after": after, "imported": imported}, sys.stdout)
"""


def test_importing_every_section_and_command_leaves_the_glossary_unchanged() -> None:
    out = subprocess.run([sys.executable, "-c", IMPORT_ALL], capture_output=True, text=True, check=True,
                         env={"PYTHONPATH": str(SRC), "MPLBACKEND": "Agg", "PATH": ""}, timeout=300)
    got = json.loads(out.stdout)
    assert "routerlab.reports.sections.offpolicy" in got["imported"] and "routerlab.cli.metrics_cmd" in got["imported"]
    assert got["before"] == got["after"]
    # and it is the catalog's: the same in this process, whatever it imported before
    assert got["after"] == {k: list(v) for k, v in GLOSSARY.items()}
    assert audit.GLOSSARY is GLOSSARY


def test_no_module_writes_into_the_glossary() -> None:
    writes = re.compile(r"GLOSSARY\s*\.\s*(setdefault|update|pop|popitem|clear)\b|GLOSSARY\s*\[[^\]]*\]\s*=[^=]")
    offenders = [str(p.relative_to(SRC)) for p in SRC.rglob("*.py") if writes.search(p.read_text(encoding="utf-8"))]
    assert offenders == []


def test_every_term_a_section_declares_is_in_the_glossary() -> None:
    """Each section module's term lists (``terms = [...]``, read from the source) name glossary keys only."""
    missing = {}
    for path in sorted((SRC / "routerlab" / "reports" / "sections").glob("*.py")):
        text = path.read_text(encoding="utf-8")
        for block in re.findall(r"\bterms = \[(.*?)\]", text, flags=re.S):
            names = re.findall(r'"([^"]+)"', block)
            gone = [n for n in names if n not in GLOSSARY]
            if gone:
                missing[path.name] = gone
    assert missing == {}
