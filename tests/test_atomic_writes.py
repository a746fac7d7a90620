"""Every file routerlab writes goes through routerlab/_atomic.py, so that a crash never leaves half a file at a
target path and every file's mode follows the umask.

The source is read with :mod:`ast`. A write primitive (``open(..., "w")``, ``Path.write_text``, ``np.save``,
``pq.write_table``, ``savefig``, ``os.replace``, ``mkstemp``, ...) may appear only

* in routerlab/_atomic.py itself;
* inside a function or lambda handed to ``atomic_write`` (it writes the temp path it is given);
* inside a ``with atomic_directory(...)`` or ``with replace_directory(...)`` block (a fresh temp directory);
* in a function named in ALLOWED below, each with the reason it is safe.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "routerlab"

ALLOWED = {
    ("data/longformat/writer.py", "_write_small"): "writes the temp path atomic_write hands to write_long's callback",
    ("data/longformat/writer.py", "_write_long_parquet"): "the same: called from write_long's atomic_write callback",
    ("data/longformat/writer.py", "_write_long_csv"): "the same: called from write_long's atomic_write callback",
    ("data/longformat/writer.py", "_write_long_jsonl"): "the same: called from write_long's atomic_write callback",
    ("serve/log.py", "open_append_locked"): "the request log and its feedback file are append-only (O_APPEND, one "
                                            "whole record per write, under a lock)",
    ("llm/graders/sandbox.py", "run_python"): "the program to run, in a fresh temporary directory removed after",
    ("llm/graders/_sandbox_child.py", "run_program"): "the sandboxed program's stdout/stderr, in that directory",
    ("llm/graders/_sandbox_child.py", "_write_file"): "a new user namespace's /proc/self/uid_map etc., not a file",
}
ATOMIC_CALLS = {"atomic_write", "_atomic"}  # reports/files.py's _atomic wraps atomic_write
ATOMIC_DIRS = {"atomic_directory", "replace_directory"}
ANY_RECEIVER = {"write_text", "write_bytes", "savefig", "tofile", "to_csv", "to_parquet", "save_pretrained"}
BY_MODULE = {
    "np": {"save", "savez", "savez_compressed", "savetxt"}, "numpy": {"save", "savez", "savez_compressed", "savetxt"},
    "pq": {"write_table", "ParquetWriter"}, "parquet": {"write_table", "ParquetWriter"},
    "pa": {"output_stream", "OSFile"}, "pcsv": {"write_csv", "CSVWriter"},
    "os": {"open", "replace", "rename", "fdopen"}, "tempfile": {"mkstemp", "NamedTemporaryFile"},
    "shutil": {"move", "copy", "copy2", "copyfile", "copytree"},
}


def _write_mode(call: ast.Call, position: int) -> bool:
    mode: ast.expr | None = call.args[position] if len(call.args) > position else None
    for kw in call.keywords:
        if kw.arg == "mode":
            mode = kw.value
    return isinstance(mode, ast.Constant) and isinstance(mode.value, str) and any(c in mode.value for c in "wax+")


def write_primitive(call: ast.Call) -> str | None:
    """The name of the file-writing primitive ``call`` is, or None."""
    func = call.func
    if isinstance(func, ast.Name):
        if func.id == "open" and _write_mode(call, 1):
            return "open(..., 'w')"
        if func.id in {"mkstemp", "savefig"}:
            return func.id
        return None
    if not isinstance(func, ast.Attribute):
        return None
    name = func.attr
    receiver = func.value.id if isinstance(func.value, ast.Name) else None
    if receiver in BY_MODULE and name in BY_MODULE[receiver]:
        if receiver == "os" and name == "fdopen" and not _write_mode(call, 1):
            return None
        return f"{receiver}.{name}"
    if name in ANY_RECEIVER:
        return f".{name}"
    if name == "open" and receiver not in ("os", "io") and _write_mode(call, 0):  # Path.open("w")
        return ".open(..., 'w')"
    if name == "replace" and len(call.args) == 1 and not call.keywords:  # Path.replace(target); str.replace takes 2
        return ".replace(path)"
    if name == "rename" and len(call.args) == 1 and not call.keywords:
        return ".rename(path)"
    return None


def direct_writes(source: str) -> list[tuple[int, str, str]]:
    """``(line, enclosing function, primitive)`` of each write in ``source`` that bypasses the atomic helpers."""
    tree = ast.parse(source)
    callbacks: set[int] = set()  # ids of def / lambda nodes handed to atomic_write
    for scope in ast.walk(tree):
        if not isinstance(scope, ast.Module | ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        local_defs = {n.name: n for n in ast.walk(scope) if isinstance(n, ast.FunctionDef) and n is not scope}
        for call in ast.walk(scope):
            if not (isinstance(call, ast.Call) and _callee(call) in ATOMIC_CALLS):
                continue
            for arg in [*call.args, *(kw.value for kw in call.keywords)]:
                if isinstance(arg, ast.Lambda):
                    callbacks.add(id(arg))
                elif isinstance(arg, ast.Name) and arg.id in local_defs:
                    callbacks.add(id(local_defs[arg.id]))
    found: list[tuple[int, str, str]] = []

    def visit(node: ast.AST, function: str, safe: bool) -> None:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            function = node.name if function == "<module>" else function
            safe = safe or id(node) in callbacks
        elif isinstance(node, ast.Lambda):
            safe = safe or id(node) in callbacks
        elif isinstance(node, ast.With | ast.AsyncWith):
            if any(isinstance(item.context_expr, ast.Call) and _callee(item.context_expr) in ATOMIC_DIRS
                   for item in node.items):
                for child in node.body:
                    visit(child, function, True)
                for item in node.items:
                    visit(item, function, safe)
                return
        elif isinstance(node, ast.Call) and not safe:
            primitive = write_primitive(node)
            if primitive:
                found.append((node.lineno, function, primitive))
        for child in ast.iter_child_nodes(node):
            visit(child, function, safe)

    visit(tree, "<module>", False)
    return found


def _callee(call: ast.Call) -> str | None:
    if isinstance(call.func, ast.Name):
        return call.func.id
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _sources() -> list[Path]:
    return sorted(p for p in SRC.rglob("*.py") if p.name != "_atomic.py" or p.parent != SRC)


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(SRC)))
def test_every_file_write_goes_through_atomic(path: Path) -> None:
    rel = str(path.relative_to(SRC))
    bad = [f"{line}: {prim} in {fn}" for line, fn, prim in direct_writes(path.read_text(encoding="utf-8"))
           if (rel, fn) not in ALLOWED]
    assert not bad, f"{rel} writes files outside routerlab._atomic: {bad}"


def test_the_allow_list_names_functions_that_still_write() -> None:
    # an entry whose function no longer writes directly (or no longer exists) must go
    for (rel, fn), _reason in ALLOWED.items():
        writes = direct_writes((SRC / rel).read_text(encoding="utf-8"))
        assert any(f == fn for _, f, _ in writes), f"{rel}:{fn} is allowed but writes nothing directly"


# ------------------------------------------------------------------- the checker, on sources it must catch
@pytest.mark.parametrize("source", [
    "from pathlib import Path\ndef f(p):\n    Path(p).write_text('x')\n",
    "def f(p):\n    with open(p, 'w') as fh:\n        fh.write('x')\n",
    "def f(p):\n    with open(p, mode='ab') as fh:\n        fh.write(b'x')\n",
    "def f(p):\n    with p.open('w') as fh:\n        fh.write('x')\n",
    "import numpy as np\ndef f(p, a):\n    np.save(p, a)\n",
    "import pyarrow.parquet as pq\ndef f(t, p):\n    pq.write_table(t, p)\n",
    "def f(fig, p):\n    fig.savefig(p)\n",
    "import os, tempfile\ndef f(p):\n    fd, tmp = tempfile.mkstemp()\n    os.replace(tmp, p)\n",
    "def f(tmp, p):\n    tmp.replace(p)\n",
    # a local def that is not handed to atomic_write
    "def f(p):\n    def go(tmp):\n        open(tmp, 'w').close()\n    go(p)\n",
])
def test_the_checker_catches_direct_writes(source: str) -> None:
    assert direct_writes(source), source


@pytest.mark.parametrize("source", [
    "from pathlib import Path\ndef f(p):\n    atomic_write(p, lambda tmp: Path(tmp).write_text('x'))\n",
    "def f(p):\n    def go(tmp):\n        with open(tmp, 'w') as fh:\n            fh.write('x')\n"
    "    atomic_write(p, go)\n",
    "def f(d):\n    with atomic_directory(d) as tmp:\n        (tmp / 'a').write_text('x')\n",
    "def f(p):\n    with open(p) as fh:\n        return fh.read()\n",  # reading
    "def f(p):\n    with open(p, 'rb') as fh:\n        return fh.read()\n",
    "def f(s):\n    return s.replace('a', 'b')\n",  # str.replace
    "import dataclasses\ndef f(x):\n    return dataclasses.replace(x, a=1)\n",
])
def test_the_checker_passes_atomic_writes_and_reads(source: str) -> None:
    assert direct_writes(source) == []
