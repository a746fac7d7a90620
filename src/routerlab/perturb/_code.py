"""Bare code in a query, found line by line (the code rules of :mod:`routerlab.perturb.spans`).

A line is code when it has the shape of a Python, JavaScript or SQL statement and, for Python, when Python's own
parser accepts it (``return the sum`` is prose, ``return total`` is code). Code lines grow into blocks by each
language's continuation rules: a Python block takes the lines indented under its first line, an open bracket or an
open triple-quoted string; a JavaScript block takes lines until its braces close; an SQL statement takes clause lines
(FROM, WHERE, ...) until a ``;``. Comment lines join a block they touch. Inside a Python docstring (a
triple-quoted string that is a statement of its own; one inside an expression is code) only doctests (``>>>``,
``...``, their expected output), asserts and example lines (a line that starts with a call, ``f(3) == 4``) are code;
the rest is prose (no parser there: a typo must not turn a docstring line such as ``return = ['One']`` into code).
``assert`` statements and ``>>>`` doctests count anywhere in a text. The identifiers a block defines (functions,
classes, parameters, variables, imports, tables and columns) and the names a test calls are returned too: they are
protected wherever they recur in the prose.
"""

from __future__ import annotations

import ast
import builtins
import keyword
import re
import textwrap
import warnings
from dataclasses import dataclass
from functools import lru_cache

CODE = "code"
DOCTEST = "doctest"
ASSERT = "assert"

_MAX_PARSE = 4000
_BUILTINS = frozenset(dir(builtins)) | frozenset(keyword.kwlist) | frozenset(keyword.softkwlist)
_AMBIGUOUS = frozenset(("a", "A", "I"))  # one-letter names that are also English words


@dataclass(frozen=True)
class CodeFinding:
    """What :func:`find_code` found: (start, end, kind) spans, kind ``code``, ``doctest`` or ``assert``, each a
    line's text without its indentation (or the code part of a line), and the identifiers the code defines."""

    spans: tuple[tuple[int, int, str], ...]
    identifiers: frozenset[str]


def _parses(source: str) -> ast.Module | None:
    if len(source) > _MAX_PARSE or "\x00" in source:
        return None
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return ast.parse(source)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return None


def _past_string(line: str, i: int) -> int:
    """The position just past the string literal whose opening quote is ``line[i]`` (backslash escapes skipped;
    the line's end when it is not closed on this line)."""
    j = i + 1
    while j < len(line) and line[j] != line[i]:
        j += 2 if line[j] == "\\" else 1
    return j + 1


def _open_brackets(line: str) -> str:
    """The brackets ``line`` leaves open (outside strings and comments), innermost last."""
    stack: list[str] = []
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if ch == "#":
            break
        if ch in "\"'":
            i = _past_string(line, i)
            continue
        if ch in _CLOSERS:
            stack.append(ch)
        elif ch in ")]}" and stack and _CLOSERS[stack[-1]] == ch:
            stack.pop()
        i += 1
    return "".join(stack)


def _parses_open(source: str) -> ast.Module | None:
    """``source`` parsed, or the first line of a statement that continues on the next lines (``f(a,``, ``x = \"\"\"``)
    parsed with its open brackets or string closed."""
    tree = _parses(source)
    if tree is None:
        for quote in ('"""', "'''"):
            if source.count(quote) % 2:  # x = """ : a string that goes on on the next lines
                return _parses(source + quote)
        left = _open_brackets(source)
        if left:
            tree = _parses(source + "".join(_CLOSERS[ch] for ch in reversed(left)))
    return tree


# ---------------------------------------------------------------------------------------------- one line's kind
_PY_DEF = re.compile(r"(?:async\s+)?def\s+[A-Za-z_]\w*\s*\(|class\s+[A-Za-z_]\w*\s*[(:]")
_PY_COMPOUND = re.compile(r"(?:if|elif|while|for|with|except|try|else|finally|async\s+for|async\s+with)\b.*:\s*"
                          r"(?:#.*)?$")
_PY_SIMPLE = re.compile(r"(?:return|yield|raise|del|global|nonlocal|import|from|pass|break|continue|await|print"
                        r"|assert)\b")
_DECORATOR = re.compile(r"@[A-Za-z_][\w.]*(?:\(.*\))?\s*$")
_CODE_CHARS = frozenset("=([{")
_SCAFFOLD = {"elif": "if 1:\n pass\n", "else": "if 1:\n pass\n", "except": "try:\n pass\n",
             "finally": "try:\n pass\n"}
_CLOSERS = {"(": ")", "[": "]", "{": "}"}

_JS_FUNC = re.compile(r"(?:export\s+(?:default\s+)?)?(?:async\s+)?function\b\s*\*?\s*[\w$]*\s*\(")
_JS_DECL = re.compile(r"(?:export\s+)?(?:const|var)\s+(?:[A-Za-z_$][\w$]*\s*(?:=|;|,|$)|[{\[])"
                      r"|let\s+(?:[A-Za-z_$][\w$]*|[{\[]).*(?:[;{,]|=>.*)\s*$")
"""``const``/``var`` declarations; a ``let`` one must end like a statement: a typo that lowers the first letter of
``Let $x = 3$ ...`` must not make prose into code."""
_JS_CLASS = re.compile(r"(?:export\s+(?:default\s+)?)?class\s+[\w$]+(?:\s+extends\s+[\w$.]+)?\s*\{\s*$")
_JS_OPEN = re.compile(r"(?:\}\s*)?(?:(?:if|for|while|switch|catch|else\s+if)\s*\(.*\)|else|try|finally|do)\s*\{\s*$"
                      r"|(?:static\s+|async\s+|get\s+|set\s+)*[A-Za-z_$][\w$]*\s*\([^()]*\)\s*\{\s*$"
                      r"|[A-Za-z_$][\w$.]*\s*\(.*\{\s*$")
_JS_STMT = re.compile(r"(?:(?:[A-Za-z_$][\w$]*(?:\.[A-Za-z_$][\w$]*|\[[^\]]*\])*\s*(?:[-+*/%]?=(?!=)|\+\+|--|\())"
                      r"|(?:delete|new|await|return|throw|typeof)\s|(?:if|while|for)\s*\(|(?:break|continue|return)"
                      r"\s*;).*;\s*(?://.*)?$")
_JS_ARROW = re.compile(r"(?:\)|[A-Za-z_$][\w$]*)\s*=>")
_JS_IMPORT = re.compile(r"import\s+.+\s+from\s+['\"]|(?:module\.)?exports\b.*=|export\s+default\b")
_CLOSE = re.compile(r"[\]})]+\s*[;,)]*\s*(?://.*)?$")
_CHAIN = re.compile(r"\.[A-Za-z_$][\w$]*\s*\(")
_JS_COMMENT = re.compile(r"//|/\*|\*/|\*(?:\s|$)")

_SQL_START = r"(?:SELECT|INSERT\s+INTO|UPDATE\s+[A-Za-z_]\w*\s+SET|DELETE\s+FROM|CREATE\s+(?:OR\s+REPLACE\s+)?" \
             r"(?:TABLE|VIEW|INDEX|UNIQUE\s+INDEX|DATABASE|SCHEMA)|ALTER\s+TABLE|DROP\s+(?:TABLE|VIEW|INDEX|DATABASE)" \
             r"|WITH\s+[A-Za-z_]\w*\s+AS\s*\(|TRUNCATE\s+TABLE)(?!\w)"
_SQL_UPPER = re.compile(_SQL_START)
_SQL_ANY = re.compile(_SQL_START, re.IGNORECASE)
_SQL_CLAUSES = r"(?:FROM|WHERE|JOIN|INNER|LEFT|RIGHT|FULL|OUTER|CROSS|ON|AND|OR|GROUP\s+BY|ORDER\s+BY|HAVING|LIMIT" \
               r"|OFFSET|UNION|VALUES|SET|RETURNING|AS|WHEN|THEN|ELSE|END|CASE|INTO|EXCEPT|INTERSECT|SELECT)\b"
_SQL_CONT_UPPER = re.compile(_SQL_CLAUSES)
_SQL_CONT_ANY = re.compile(_SQL_CLAUSES, re.IGNORECASE)

_DOCTEST = re.compile(r">>>(?:\s|$)")
_DOCTEST_MORE = re.compile(r"\.\.\.(?:\s|$)")
_ASSERT = re.compile(r"assert\b")
_EXAMPLE = re.compile(r"[A-Za-z_][\w.]*\(")


def _python_ok(node: ast.stmt) -> bool:
    """A parsed one-line statement that is code rather than a word or a cue (``Answer: B`` parses too)."""
    if isinstance(node, ast.AnnAssign):
        return node.value is not None
    if isinstance(node, ast.Expr):
        value = node.value
        if isinstance(value, (ast.Name, ast.Constant)):
            return False
        if isinstance(value, (ast.List, ast.Tuple, ast.Set)):
            return any(not isinstance(e, ast.Name) for e in value.elts)
        return True
    return True


@lru_cache(maxsize=1 << 15)
def line_kind(stripped: str) -> str | None:
    """The kind of one line (without its indentation): ``py``/``py-open`` (a Python statement; ``-open`` when it
    opens an indented body), ``js``/``js-open`` (``-open``: ends with ``{``), ``sql``/``sql-lower`` (the start of a
    statement), ``doctest``, ``assert``, ``close`` (closing brackets), ``chain`` (``.method(...)``), ``comment``,
    or None (prose)."""
    s = stripped
    if not s:
        return None
    if _DOCTEST.match(s):
        return "doctest"
    if _ASSERT.match(s) and _parses_open(s) is not None:
        return "assert"
    if s.startswith("#"):
        return "comment"
    if _JS_COMMENT.match(s):
        return "comment"
    if _CLOSE.fullmatch(s):
        return "close"
    if _SQL_UPPER.match(s):
        return "sql"
    if s[0].islower() and _SQL_ANY.match(s):
        return "sql-lower"
    if _PY_DEF.match(s):
        return "py-open"
    if _DECORATOR.match(s):
        return "py"
    first = s.split(None, 1)[0].rstrip(":")
    if s == "try:":
        return "py-open"
    if _PY_COMPOUND.match(s):
        source = _SCAFFOLD.get(first, "") + s + "\n pass"
        if _parses(source) is not None:
            return "py-open"
    if _JS_CLASS.match(s) or (_JS_OPEN.match(s) and ("(" in s or first in ("else", "try", "finally", "do", "}"))):
        return "js-open"
    if _JS_FUNC.match(s) or _JS_DECL.match(s) or _JS_IMPORT.match(s) or _JS_STMT.match(s):
        return "js"
    if _CHAIN.match(s):
        return "chain"
    if _PY_SIMPLE.match(s) or _CODE_CHARS.intersection(s):
        tree = _parses_open(s)
        if tree is not None and tree.body and all(_python_ok(node) for node in tree.body):
            return "py"
    if _JS_ARROW.search(s) and s.endswith((";", "{", ",", ")")):
        return "js"
    return None


# ---------------------------------------------------------------------------------------------- scanning helpers
@dataclass
class _Scan:
    """Python lexical state carried across lines: the open triple quote (and whether it opened a docstring, a string
    that is a statement of its own), the bracket depth."""

    quote: str | None = None
    doc: bool = False
    depth: int = 0


_STRING_PREFIX = re.compile(r"[rRuUfFbB]{0,2}")


def _scan_python_line(line: str, state: _Scan) -> list[tuple[int, int, bool]]:
    """Advance ``state`` over ``line``; returns the (start, end, docstring) parts of the line inside triple-quoted
    strings (their contents, not the quotes); ``docstring`` is False for a string inside an expression (``x =
    \"\"\"...\"\"\"``), which is code."""
    inside: list[tuple[int, int, bool]] = []
    i, n = 0, len(line)
    start = 0 if state.quote else -1
    while i < n:
        if state.quote:
            j = line.find(state.quote, i)
            if j < 0:
                inside.append((start, n, state.doc))
                return inside
            inside.append((start, j, state.doc))
            i = j + 3
            state.quote = None
            continue
        ch = line[i]
        if ch == "#":
            break
        if line.startswith(('"""', "'''"), i):
            state.quote = line[i:i + 3]
            state.doc = state.depth == 0 and _STRING_PREFIX.fullmatch(line[:i].strip()) is not None
            i += 3
            start = i
            continue
        if ch in "\"'":
            i = _past_string(line, i)
            continue
        if ch in "([{":
            state.depth += 1
        elif ch in ")]}":
            state.depth = max(0, state.depth - 1)
        i += 1
    if state.quote and start <= n:
        inside.append((start, n, state.doc))
    return inside


def _brace_delta(line: str) -> int:
    """Net ``{`` minus ``}`` of a JavaScript line, outside strings and ``//`` comments."""
    depth = 0
    i, n = 0, len(line)
    while i < n:
        ch = line[i]
        if line.startswith("//", i):
            break
        if ch in "\"'`":
            i = _past_string(line, i)
            continue
        depth += (ch == "{") - (ch == "}")
        i += 1
    return depth


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip(" \t"))


def _strip_range(text: str, s: int, e: int) -> tuple[int, int] | None:
    """``[s, e)`` without surrounding whitespace; None when nothing is left."""
    while s < e and text[s].isspace():
        s += 1
    while e > s and text[e - 1].isspace():
        e -= 1
    return (s, e) if s < e else None


# ---------------------------------------------------------------------------------------------- blocks
class _Finder:
    def __init__(self, text: str) -> None:
        self.text = text
        self._want = False  # inside a docstring, after a doctest: its expected output follows
        self.lines: list[tuple[int, int]] = []
        pos = 0
        for line in text.split("\n"):
            self.lines.append((pos, pos + len(line)))
            pos += len(line) + 1
        self.kinds = [line_kind(text[s:e].strip()) for s, e in self.lines]
        self.taken = [False] * len(self.lines)
        self.spans: list[tuple[int, int, str]] = []
        self.identifiers: set[str] = set()

    def line(self, i: int) -> str:
        s, e = self.lines[i]
        return self.text[s:e]

    def blank(self, i: int) -> bool:
        return not self.line(i).strip()

    def add_line(self, i: int, kind: str) -> None:
        s, e = self.lines[i]
        r = _strip_range(self.text, s, e)
        if r is not None:
            self.spans.append((r[0], r[1], kind))
        self.taken[i] = True

    def run(self) -> CodeFinding:
        i = 0
        n = len(self.lines)
        while i < n:
            kind = self.kinds[i]
            if self.taken[i] or kind is None or kind in ("comment", "close", "chain"):
                i += 1
                continue
            if kind.startswith("py"):
                i = self.python_block(i)
            elif kind.startswith("js"):
                i = self.js_block(i)
            elif kind.startswith("sql"):
                i = self.sql_block(i)
            elif kind == "doctest":
                i = self.doctest(i, n)
            elif kind == "assert":
                i = self.assert_lines(i)
            else:
                i += 1
        self.inline_asserts()
        return CodeFinding(tuple(sorted(self.spans)), frozenset(self.identifiers))

    def comments_before(self, i: int) -> None:
        j = i - 1
        while j >= 0 and not self.taken[j] and self.kinds[j] in ("comment", "py") and (
                self.kinds[j] == "comment" or self.line(j).lstrip().startswith("@")):
            self.add_line(j, CODE)
            j -= 1

    # -- Python
    def python_block(self, first: int) -> int:
        base = _indent(self.line(first))
        state = _Scan()
        opened = False
        self._want = False
        block: list[int] = []
        i = first
        n = len(self.lines)
        while i < n:
            line = self.line(i)
            if block:
                continuing = state.quote is not None or state.depth > 0
                if not continuing and not line.strip():
                    nxt = next((j for j in range(i + 1, n) if not self.blank(j)), None)
                    if nxt is None or not self._python_continues(nxt, base, opened):
                        break
                    i += 1
                    continue
                if not continuing and not self._python_continues(i, base, opened):
                    break
            inside = _scan_python_line(line, state)
            self._python_line(i, inside)
            block.append(i)
            opened = opened or self.kinds[i] == "py-open" or line.rstrip().endswith(":")
            i += 1
        self.comments_before(first)
        s0 = self.lines[block[0]][0]
        e0 = self.lines[block[-1]][1]
        self._python_identifiers(self.text[s0:e0])
        return i

    def _python_continues(self, i: int, base: int, opened: bool) -> bool:
        kind = self.kinds[i]
        if kind is not None and (kind.startswith("py") or kind in ("comment", "close", "assert", "doctest",
                                                                     "chain")):
            return True
        return opened and _indent(self.line(i)) > base

    def _python_line(self, i: int, inside: list[tuple[int, int, bool]]) -> None:
        s, e = self.lines[i]
        line = self.text[s:e]
        self.taken[i] = True
        pos = 0
        for a, b, doc in inside:
            if not doc:
                continue  # a string inside an expression is part of the code around it
            r = _strip_range(self.text, s + pos, s + a)
            if r is not None:
                self.spans.append((r[0], r[1], CODE))
            self._docstring_part(s + a, s + b)
            pos = b
        r = _strip_range(self.text, s + pos, e)
        if r is not None and (pos == 0 or line[pos:].strip()):
            self.spans.append((r[0], r[1], CODE))

    def _docstring_part(self, s: int, e: int) -> None:
        """A piece of one line inside a triple-quoted string: a doctest, its output, an example line or a line of
        code is kept; prose is not."""
        r = _strip_range(self.text, s, e)
        if r is None:
            self._want = False
            return
        piece = self.text[r[0]:r[1]]
        if _DOCTEST.match(piece) or (self._want and _DOCTEST_MORE.match(piece)):
            self.spans.append((r[0], r[1], DOCTEST))
            self._called(piece[3:])
            self._want = True
            return
        if self._want:
            self.spans.append((r[0], r[1], DOCTEST))
            return
        if _EXAMPLE.match(piece) or _ASSERT.match(piece):
            self.spans.append((r[0], r[1], DOCTEST))
            self._called(piece)

    def _python_identifiers(self, source: str) -> None:
        tree = _parses(textwrap.dedent(source))
        if tree is None:
            tree = _parses(textwrap.dedent(source) + "\n    pass")
        if tree is None:
            for m in re.finditer(r"\bdef\s+([A-Za-z_]\w*)\s*\(([^)]*)\)?|\bclass\s+([A-Za-z_]\w*)"
                                 r"|^\s*([A-Za-z_]\w*)\s*=[^=]|\bfor\s+([A-Za-z_]\w*)\s+in\b", source, re.M):
                self._define(m.group(1) or m.group(3) or m.group(4) or m.group(5))
                for param in (m.group(2) or "").split(","):
                    self._define(re.split(r"[:=]", param)[0].strip().lstrip("*"))
            return
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self._define(node.name)
            elif isinstance(node, ast.arg):
                self._define(node.arg)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                self._define(node.id)
            elif isinstance(node, ast.alias):
                self._define(node.asname or node.name.split(".")[0])
            elif isinstance(node, ast.ExceptHandler) and node.name:
                self._define(node.name)

    def _define(self, name: str | None) -> None:
        if name and name.isidentifier() and not keyword.iskeyword(name) and name not in _AMBIGUOUS:
            self.identifiers.add(name)

    def _called(self, source: str) -> None:
        """The names a test or an example calls (not methods, not builtins): the function under test."""
        for m in re.finditer(r"(?<![\w.$])([A-Za-z_]\w*)\s*\(", source):
            if m.group(1) not in _BUILTINS:
                self._define(m.group(1))

    # -- doctests and asserts outside code blocks
    def doctest(self, i: int, n: int) -> int:
        self.add_line(i, DOCTEST)
        self._called(self.line(i).strip()[3:])
        i += 1
        while i < n and not self.blank(i) and self.kinds[i] != "doctest" and not self.taken[i]:
            self.add_line(i, DOCTEST)
            i += 1
        return i

    def assert_lines(self, i: int) -> int:
        state = _Scan()
        _scan_python_line(self.line(i), state)
        self.add_line(i, ASSERT)
        self._called(self.line(i))
        i += 1
        while i < len(self.lines) and state.depth > 0:
            _scan_python_line(self.line(i), state)
            self.add_line(i, ASSERT)
            self._called(self.line(i))
            i += 1
        return i

    def inline_asserts(self) -> None:
        """``Test: assert f(1) == 2``: an assert statement after a colon, inside a line of prose."""
        for i, (s, e) in enumerate(self.lines):
            if self.taken[i]:
                continue
            line = self.text[s:e]
            for m in re.finditer(r"(?<=:)\s*(assert\b.*)$", line):
                state = _Scan()
                _scan_python_line(m.group(1), state)
                source, last = m.group(1), i
                while state.depth > 0 and last + 1 < len(self.lines):
                    last += 1
                    source += "\n" + self.line(last)
                    _scan_python_line(self.line(last), state)
                if _parses(source) is None:
                    continue
                self.spans.append((s + m.start(1), s + len(line.rstrip()), ASSERT))
                self._called(source)
                for j in range(i + 1, last + 1):
                    self.add_line(j, ASSERT)

    # -- JavaScript
    def js_block(self, first: int) -> int:
        depth = 0
        i = first
        n = len(self.lines)
        while i < n:
            if i > first:
                kind = self.kinds[i]
                if depth <= 0:
                    if self.blank(i) or kind is None or kind.startswith(("sql", "doctest")):
                        break
                elif self.blank(i):
                    i += 1
                    continue
            self.add_line(i, CODE)
            depth += _brace_delta(self.line(i))
            i += 1
        self.comments_before(first)
        s0, e0 = self.lines[first][0], self.lines[i - 1][1]
        self._js_identifiers(self.text[s0:e0])
        return i

    def _js_identifiers(self, source: str) -> None:
        for m in re.finditer(r"\b(?:const|let|var)\s*[{\[]([^}\]=]*)[}\]]", source):
            for item in m.group(1).split(","):  # destructuring: const { a, b: c, ...rest } = x
                self._define(item.split(":")[-1].strip().lstrip(".").strip())
        for m in re.finditer(r"\bfunction\b\s*\*?\s*([A-Za-z_$][\w$]*)?\s*\(([^)]*)\)|\b(?:const|let|var)\s+"
                             r"([A-Za-z_$][\w$]*)|\bclass\s+([A-Za-z_$][\w$]*)|^\s*(?:static\s+|async\s+)*"
                             r"([A-Za-z_$][\w$]*)\s*\(([^()]*)\)\s*\{|\(([^()]*)\)\s*=>|([A-Za-z_$][\w$]*)\s*=>",
                             source, re.M):
            for name in (m.group(1), m.group(3), m.group(4), m.group(5), m.group(8)):
                if name not in ("if", "for", "while", "switch", "catch", "function", "return"):
                    self._define(name)
            for params in (m.group(2), m.group(6), m.group(7)):
                for param in (params or "").split(","):
                    self._define(param.split("=")[0].strip().lstrip(".").strip())

    # -- SQL
    def sql_block(self, first: int) -> int:
        lower = self.kinds[first] == "sql-lower"
        base = _indent(self.line(first))
        i = first
        n = len(self.lines)
        while not self.line(i).rstrip().endswith(";") and i + 1 < n and self._sql_continues(i, base, lower):
            i += 1
        if lower and not self.line(i).rstrip().endswith(";"):
            return first + 1  # a lower-case "select ... from ..." that never ends with ';' may be prose
        for j in range(first, i + 1):
            self.add_line(j, CODE)
        self.sql_identifiers(self.text[self.lines[first][0]:self.lines[i][1]])
        return i + 1

    def _sql_continues(self, i: int, base: int, lower: bool) -> bool:
        """Whether line ``i + 1`` continues the SQL statement on line ``i``: a clause keyword (in the statement's
        case), a bracket, a line after a trailing comma or bracket, or an indented line."""
        nxt = self.line(i + 1)
        s = nxt.strip()
        if not s:
            return False
        clause = _SQL_CONT_ANY if lower else _SQL_CONT_UPPER
        return bool(clause.match(s)) or s[0] in "()" or self.line(i).rstrip().endswith((",", "(")) or (
            _indent(nxt) > base)

    def sql_identifiers(self, source: str) -> None:
        for m in re.finditer(r"\b(?:FROM|JOIN|INTO|UPDATE|TABLE|BY|WHERE|AND|OR|ON|SET|AS)\s+([A-Za-z_]\w*)",
                             source, re.I):
            if m.group(1).upper() not in _SQL_WORDS:
                self._define(m.group(1))
        for m in re.finditer(r"\bSELECT\s+(?:DISTINCT\s+)?(.+?)\s+FROM\b", source, re.I | re.S):
            for item in m.group(1).split(","):
                word = re.match(r"\s*([A-Za-z_]\w*)\s*(?:$|AS\b)", item, re.I)
                if word and word.group(1).upper() not in _SQL_WORDS:
                    self._define(word.group(1))
        for m in re.finditer(r"\b(?:CREATE\s+TABLE|INSERT\s+INTO)\s+\w+\s*\(([^;]*?)\)\s*(?:;|VALUES|$)", source,
                             re.I | re.S):
            for item in m.group(1).split(","):
                word = re.match(r"\s*([A-Za-z_]\w*)", item)
                if word and word.group(1).upper() not in ("PRIMARY", "FOREIGN", "CONSTRAINT", "UNIQUE", "CHECK",
                                                          "KEY", "INDEX"):
                    self._define(word.group(1))


_SQL_WORDS = frozenset((
    "SELECT", "DISTINCT", "FROM", "WHERE", "JOIN", "INNER", "LEFT", "RIGHT", "FULL", "OUTER", "CROSS", "ON", "AND",
    "OR", "GROUP", "ORDER", "BY", "HAVING", "LIMIT", "OFFSET", "UNION", "ALL", "VALUES", "SET", "INTO", "INSERT",
    "UPDATE", "DELETE", "AS", "ASC", "DESC", "NOT", "NULL", "IS", "IN", "LIKE", "BETWEEN", "EXISTS", "COUNT", "SUM",
    "AVG", "MIN", "MAX", "CASE", "WHEN", "THEN", "ELSE", "END", "TABLE", "CREATE", "DROP", "ALTER"))
"""SQL keywords and aggregate functions: the words of a statement written in prose that are not names."""
_INLINE_SQL = re.compile(r"(?<![\w])(?:SELECT|INSERT\s+INTO|UPDATE|DELETE\s+FROM)\b(?=[^\n]*\b(?:FROM|SET|VALUES|"
                         r"INTO|WHERE)\b)")
_SQL_TOKEN = re.compile(r"[ \t]*(?:'[^'\n]*'|\"[^\"\n]*\"|[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*(?:\([^()\n]*\))?"
                        r"|\d+(?:\.\d+)?|[*,()<>=!+\-/%]+|;)")


def inline_sql(text: str) -> list[tuple[int, int]]:
    """SQL written inside a line of prose, ``... between SELECT city FROM customers and ...``: from an upper-case
    statement keyword on, keywords, operators, numbers, strings, and after each keyword, operator or comma one
    name (and a one-letter alias); the statement ends at the first word that is none of these."""
    out: list[tuple[int, int]] = []
    pos = 0
    for m in _INLINE_SQL.finditer(text):
        if m.start() < pos:
            continue
        i = m.start()
        end = i
        names = 0
        while True:
            t = _SQL_TOKEN.match(text, i)
            if t is None:
                break
            tok = t.group().strip()
            if tok.split("(")[0] in _SQL_WORDS:
                names = 0
            elif tok[:1].isalpha() or tok[:1] == "_":
                if names == 0 or (names == 1 and len(tok) == 1):
                    names += 1
                else:
                    break
            elif tok[:1] in "'\"" or tok[:1].isdigit():
                names = 1  # a value fills the place of a name
            else:
                names = 0
            i = t.end()
            end = i
            if tok == ";":
                break
        out.append((m.start(), end))
        pos = end
    return out


def find_code(text: str) -> CodeFinding:
    """The code lines, doctests and asserts of ``text`` and the identifiers the code defines (module docstring)."""
    return _find_code(text)


@lru_cache(maxsize=4096)
def _find_code(text: str) -> CodeFinding:
    finder = _Finder(text)
    return finder.run()


def block_identifiers(source: str) -> frozenset[str]:
    """The identifiers defined by a fenced block of code (its language guessed from its lines)."""
    finder = _Finder(source)
    finder.run()
    if not finder.identifiers:
        finder._python_identifiers(source)
        finder._js_identifiers(source)
    return frozenset(finder.identifiers)
