"""Equivalence of two MATH-style final answers (the ``math`` grader's core), and the worker process that runs it.

This module is self-contained (the standard library, plus sympy imported lazily) because it also runs as a
script: the ``math`` grader starts it as a persistent worker process (``python -P -u _mathsym.py``), sends it
one JSON line per comparison and kills it when a comparison runs past its timeout (sympy can hang on a hostile
answer). The grader's own process never imports sympy: it calls :func:`equivalent` with ``sympy_ok=False``,
which decides what plain strings and plain numbers can decide and raises :class:`NeedSympy` otherwise.

Steps (``docs/grading.md`` has the full list):

1. :func:`normalize`: ``\\left``/``\\right``, thin spaces, ``\\dfrac``/``\\tfrac``, degrees, ``\\$``, ``\\text{}``
   units, unit words, ``%``, thousands separators, spaces, a trailing ``.``, ``\\frac12`` and ``\\sqrt2`` forms;
2. the structure (:func:`structure`): a matrix, an interval or tuple (its brackets kept), a set, a union, a bare
   list (``2, 4`` or ``2 or 4``), an equation (``x = 5``) or one expression; structures compare part by part;
3. one expression against another: equal strings, equal plain numbers (exact fractions), else sympy on both,
   converted by this module's own small LaTeX reader (:class:`_Reader`), equal when their difference is 0,
   numerically (30 digits), or at three random points when symbols remain.

Huge powers and factorials are refused before sympy evaluates them (:class:`TooLarge`); the worker's
timeout is what guarantees the bound.
"""

from __future__ import annotations

import importlib
import json
import math
import random
import re
import sys
from fractions import Fraction
from typing import Any

MAX_CHARS = 1000
"""A final answer longer than this is not compared (it is not a final answer)."""
MAX_DIGITS = 5000
"""A power or factorial whose value would have more decimal digits than this is refused."""
REL_TOL = 1e-8

__all__ = ["NeedSympy", "TooLarge", "equivalent", "normalize", "structure", "to_sympy"]


class NeedSympy(Exception):
    """Raised with ``sympy_ok=False`` where only sympy can decide."""


class TooLarge(ValueError):
    """A power or factorial too large to evaluate."""


class ParseError(ValueError):
    """Text this module's LaTeX reader cannot read."""


def _sympy() -> Any:
    return importlib.import_module("sympy")


# --------------------------------------------------------------------------------------------------------------
# normalisation
# --------------------------------------------------------------------------------------------------------------

_TEXT = r"\\(?:text|textbf|textit|textrm|textnormal|mbox|mathrm|mathbf|mathit|operatorname)\s*\{([^{}]*)\}"
_UNITS = (r"units?|square\s+units|sq\.?\s+units|cubic\s+units|cm|mm|km|centimeters?|centimetres?|meters?|metres?|"
          r"inches|inch|feet|foot|ft|yards?|miles?|degrees?|dollars?|cents?|seconds?|minutes?|hours?|days?|"
          r"weeks?|months?|years?|pounds?|lbs?|ounces?|oz|grams?|kg|kilograms?|liters?|litres?|gallons?|mph")
_UNIT_TAIL = re.compile(r"(?<=[\d}])\s*(?:square\s+|sq\.?\s+|cubic\s+)?(?:" + _UNITS + r")(?:\^\{?[23]\}?)?\.?$",
                        re.IGNORECASE)
_THOUSANDS = re.compile(r"-?\d{1,3}(?:,\d{3})+(?:\.\d+)?")
_MATH_SPAN = re.compile(r"^\s*(?:\$\$(.*)\$\$|\$(.*)\$|\\\((.*)\\\)|\\\[(.*)\\\])\s*$", re.DOTALL)


def normalize(text: str) -> tuple[str, bool]:
    """``text`` in a canonical spelling, and whether it carried a percent sign (removed here)."""
    s = text.strip()
    m = _MATH_SPAN.match(s)
    if m:
        s = next(g for g in m.groups() if g is not None).strip()
    s = s.replace("\n", " ")
    s = s.replace("\\displaystyle", "")
    s = re.sub(r"\\(?:left|right|big|Big|bigl|bigr|Bigl|Bigr)(?![A-Za-z])\s*\.?", "", s)
    for thin in ("\\!", "\\,", "\\;", "\\:", "\\quad", "\\qquad"):
        s = s.replace(thin, "" if thin == "\\!" else " ")
    s = re.sub(r"(?<!\\)\\ ", " ", s).replace("~", " ")
    s = re.sub(r"\\[dtc]frac(?![A-Za-z])", r"\\frac", s)
    s = re.sub(r"\\[dt]binom(?![A-Za-z])", r"\\binom", s)
    s = re.sub(r"\^\s*\{\s*\\circ\s*\}|\^\s*\\circ(?![A-Za-z])|\\circ(?![A-Za-z])|°|\\degree(?![A-Za-z])", "", s)
    s = s.replace("\\$", "").replace("$", "")
    # \text{...}: the whole answer unwrapped; "or"/"and" between answers a comma; a trailing one (a unit) dropped
    whole = re.fullmatch(_TEXT, s.strip())
    if whole:
        s = whole.group(1).strip()
    s = re.sub(r"\\text\s*\{\s*(?:or|and)\s*\}", ",", s)
    s = re.sub(r"(?<=\S)\s+(?:or|and)\s+(?=\S)", ",", s)
    while True:
        dropped = re.sub(r"(?<=\S)\s*" + _TEXT + r"(?:\^\{?[23]\}?)?\s*\.?\s*$", "", s)
        if dropped == s or not dropped.strip():
            break
        s = dropped
    s = re.sub(_TEXT, r"\1", s)
    s = _UNIT_TAIL.sub("", s.strip())
    percent = bool(re.search(r"\\?%", s))
    s = re.sub(r"\\?%", "", s)
    s = s.replace("{,}", "")
    # spaces: one kept after a command followed by a letter or digit (\sin x), every other one removed
    s = re.sub(r"(\\[A-Za-z]+)\s+(?=[A-Za-z0-9])", "\\1\x00", s)
    s = re.sub(r"\s+", "", s).replace("\x00", " ")
    s = s.rstrip(".,;").rstrip("\\").strip()
    if _THOUSANDS.fullmatch(s):
        s = s.replace(",", "")
    s = re.sub(r"\\frac ?(\d)(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac ?(\d)\{", r"\\frac{\1}{", s)
    s = re.sub(r"\\frac\{([^{}]*)\} ?(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\sqrt ?([0-9A-Za-z])", r"\\sqrt{\1}", s)
    s = re.sub(r"\^\{([A-Za-z0-9])\}", r"^\1", s)
    s = re.sub(r"_\{([A-Za-z0-9]+)\}", r"_\1", s)
    s = re.sub(r"(?<![\d])\.(\d)", r"0.\1", s)
    s = re.sub(r"^\(([A-Za-z])\)$", r"\1", s)
    s = re.sub(r"^[A-Za-z]\\in(?![A-Za-z])", "", s)
    return s, percent


# --------------------------------------------------------------------------------------------------------------
# structure
# --------------------------------------------------------------------------------------------------------------

def _split_top(s: str, sep: str) -> list[str]:
    """``s`` split at ``sep`` outside brackets (``\\{``/``\\}`` count as brackets)."""
    parts, depth, start, i = [], 0, 0, 0
    while i < len(s):
        if s.startswith("\\{", i) or s.startswith("\\}", i):
            depth += 1 if s[i + 1] == "{" else -1
            i += 2
            continue
        c = s[i]
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and s.startswith(sep, i):
            parts.append(s[start:i])
            i += len(sep)
            start = i
            continue
        i += 1
    parts.append(s[start:])
    return parts


def _encloses(s: str) -> bool:
    """Whether the bracket opening ``s`` closes only at its very end (``(a, b]`` yes, ``(a)(b)`` no)."""
    depth = 0
    for i, c in enumerate(s):
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0 and i != len(s) - 1:
                return False
    return depth == 0


def structure(s: str) -> tuple[Any, ...]:
    """The shape of a normalised answer: ``("matrix", rows)``, ``("seq", open, close, items)`` (an interval or
    a tuple), ``("set", items)``, ``("union", parts)``, ``("list", items)`` (also ``a \\pm b``: ``a+b, a-b``),
    ``("eq", sides)`` or ``("expr", s)``."""
    if not s:
        return ("expr", s)
    m = re.fullmatch(r"\\begin\{([pbvB]?matrix|array)\}(?:\{[^{}]*\})?(.*)\\end\{\1\}", s)
    if m:
        rows = [r for r in re.split(r"\\\\", m.group(2)) if r.strip()]
        return ("matrix", [[c.strip() for c in r.split("&")] for r in rows])
    union = _split_top(s, "\\cup")
    if len(union) > 1:
        return ("union", union)
    if s.count("\\pm") == 1 and len(_split_top(s, ",")) == 1 and len(_split_top(s, "=")) == 1:
        return ("list", [s.replace("\\pm", "+"), s.replace("\\pm", "-")])
    if s.startswith("\\{") and s.endswith("\\}"):
        return ("set", [p for p in _split_top(s[2:-2], ",") if p])
    if s[0] in "([" and s[-1] in ")]" and _encloses(s):
        inner = _split_top(s[1:-1], ",")
        if len(inner) > 1:
            return ("seq", s[0], s[-1], inner)
    items = _split_top(s, ",")
    if len(items) > 1:
        return ("list", items)
    sides = _split_top(s, "=")
    if len(sides) > 1:
        return ("eq", sides)
    return ("expr", s)


# --------------------------------------------------------------------------------------------------------------
# comparison
# --------------------------------------------------------------------------------------------------------------

def equivalent(answer: str, reference: str, sympy_ok: bool = True) -> tuple[bool, str]:
    """Whether a final answer equals the reference's, and why (a short reason). With ``sympy_ok=False`` it
    raises :class:`NeedSympy` where only sympy can decide."""
    if len(answer) > MAX_CHARS:
        return False, f"answer longer than {MAX_CHARS} characters"
    a, a_pct = normalize(answer)
    b, b_pct = normalize(reference)
    if not a:
        return False, "empty answer"
    if a == b:
        return True, "same after normalisation"
    try:
        if _equal(a, b, sympy_ok):
            return True, "equivalent"
        if a_pct != b_pct:
            fa, fb = _fraction(a), _fraction(b)
            if fa is not None and fb is not None and (fa / 100 == fb if a_pct else fa == fb / 100):
                return True, "equal as a percentage"
    except TooLarge as e:
        return False, f"refused: {e}"
    except ParseError as e:
        return False, f"cannot read: {e}"
    except RecursionError:
        return False, "cannot read: nested too deeply"
    return False, "not equivalent"


def _equal(a: str, b: str, sympy_ok: bool) -> bool:
    if a == b:
        return True
    sa, sb = structure(a), structure(b)
    ka, kb = sa[0], sb[0]
    if ka == "eq" and kb == "eq":
        return _equations_equal(sa[1], sb[1], sympy_ok)
    if ka == "eq" or kb == "eq":
        eq, other = (sa[1], b) if ka == "eq" else (sb[1], a)
        if _equal(eq[-1], other, sympy_ok):
            return True
        # "0.56 = 56%": a side without letters is itself the answer
        return any(not re.search(r"[A-Za-z]", side) and _equal(side, other, sympy_ok) for side in eq[:-1])
    if ka == "expr" and kb == "expr":
        return _scalar_equal(a, b, sympy_ok)
    if ka == "matrix" or kb == "matrix":
        ra, rb = _as_rows(sa), _as_rows(sb)
        if ra is None or rb is None or [len(r) for r in ra] != [len(r) for r in rb]:
            return False
        return all(_equal(x, y, sympy_ok) for row_a, row_b in zip(ra, rb, strict=True)
                   for x, y in zip(row_a, row_b, strict=True))
    if ka == "seq" and kb == "seq":
        return (sa[1] == sb[1] and sa[2] == sb[2] and len(sa[3]) == len(sb[3])
                and all(_equal(x, y, sympy_ok) for x, y in zip(sa[3], sb[3], strict=True)))
    unordered = {"set", "list"}
    if (ka in unordered and kb in unordered) or (ka == "union" and kb == "union"):
        return _same_multiset(sa[-1], sb[-1], sympy_ok)
    return False


def _as_rows(shape: tuple[Any, ...]) -> list[list[str]] | None:
    """A matrix's rows; a parenthesised tuple as one column (a column vector written as a point)."""
    if shape[0] == "matrix":
        rows: list[list[str]] = shape[1]
        return rows
    if shape[0] == "seq" and shape[1] == "(" and shape[2] == ")":
        return [[x] for x in shape[3]]
    return None


def _same_multiset(xs: list[str], ys: list[str], sympy_ok: bool) -> bool:
    if len(xs) != len(ys):
        return False
    left = list(ys)
    for x in xs:
        for j, y in enumerate(left):
            if _equal(x, y, sympy_ok):
                del left[j]
                break
        else:
            return False
    return True


def _equations_equal(xs: list[str], ys: list[str], sympy_ok: bool) -> bool:
    """Two equations: side by side, else the same up to a nonzero constant factor (``2x+y=1`` is ``y=1-2x``):
    ``(lhs - rhs)`` of one over the other's is the same finite nonzero number at three random points."""
    if len(xs) == len(ys) and all(_equal(x, y, sympy_ok) for x, y in zip(xs, ys, strict=True)):
        return True
    if len(xs) != 2 or len(ys) != 2:
        return False
    if not sympy_ok:
        raise NeedSympy
    sp = _sympy()
    da = to_sympy(xs[0]) - to_sympy(xs[1])
    db = to_sympy(ys[0]) - to_sympy(ys[1])
    if da == 0 or db == 0:
        return bool(da == db)
    symbols = sorted(da.free_symbols | db.free_symbols, key=lambda s: s.name)
    rng = random.Random(12345)
    ratios = []
    for _ in range(3):
        point = {s: sp.Float(rng.uniform(1.1, 2.9), 30) for s in symbols}
        va, vb = _value(da.subs(point)), _value(db.subs(point))
        if va is None or vb is None or vb == 0 or va == 0:
            return False
        ratios.append(va / vb)
    return all(_close(r, ratios[0]) for r in ratios[1:])


_PLAIN = re.compile(r"-?(?:\d+(?:\.\d+)?|\d*\.\d+)")
_PLAIN_FRAC = re.compile(r"(-)?\\frac\{(-?\d+(?:\.\d+)?)\}\{(-?\d+(?:\.\d+)?)\}|(-?\d+)/(-?\d+)")


def _fraction(s: str) -> Fraction | None:
    """A plain number (``-3``, ``0.25``, ``\\frac{3}{4}``, ``-\\frac{3}{4}``, ``3/4``) as an exact fraction."""
    if _PLAIN.fullmatch(s):
        return Fraction(s)
    m = _PLAIN_FRAC.fullmatch(s)
    if m is None:
        return None
    if m.group(2) is not None:
        num, den, sign = Fraction(m.group(2)), Fraction(m.group(3)), -1 if m.group(1) else 1
    else:
        num, den, sign = Fraction(m.group(4)), Fraction(m.group(5)), 1
    return None if den == 0 else sign * num / den


def _scalar_equal(a: str, b: str, sympy_ok: bool) -> bool:
    if a == b:
        return True
    if not a or not b:
        return False
    fa, fb = _fraction(a), _fraction(b)
    if fa is not None and fb is not None:
        return fa == fb or math.isclose(fa, fb, rel_tol=REL_TOL, abs_tol=1e-12)
    if re.fullmatch(r"[A-Za-z]{2,}", a) and a.lower() == b.lower():
        return True
    if not sympy_ok:
        raise NeedSympy
    return _sympy_equal(to_sympy(a), to_sympy(b))


def _close(x: complex, y: complex) -> bool:
    """Equal within REL_TOL (relative) or 1e-12 (absolute); an infinite or NaN value equals nothing."""
    if not all(math.isfinite(v) for v in (x.real, x.imag, y.real, y.imag)):
        return False
    return abs(x - y) <= max(REL_TOL * max(abs(x), abs(y)), 1e-12)


def _value(expr: Any) -> complex | None:
    try:
        return complex(_sympy().N(expr, 30))
    except (TypeError, ValueError, ZeroDivisionError, OverflowError):
        return None


def _sympy_equal(x: Any, y: Any) -> bool:
    """Equal when the difference is exactly 0, else (irrational constants) numerically to 30 digits, else (symbols
    left) numerically at three random points: no ``simplify``, whose cost has no useful bound."""
    sp = _sympy()
    if x == y:
        return True
    diff = x - y
    if diff == 0:
        return True
    if diff.is_Rational:
        return False
    symbols = sorted(diff.free_symbols, key=lambda s: s.name)
    if not symbols:
        vx, vy = _value(x), _value(y)
        return vx is not None and vy is not None and _close(vx, vy)
    rng = random.Random(12345)
    for _ in range(3):
        point = {s: sp.Float(rng.uniform(1.1, 2.9), 30) for s in symbols}
        vx, vy = _value(x.subs(point)), _value(y.subs(point))
        if vx is None or vy is None or not _close(vx, vy):
            return False
    return True


# --------------------------------------------------------------------------------------------------------------
# a small LaTeX reader
# --------------------------------------------------------------------------------------------------------------

_FUNCS = {"sin", "cos", "tan", "sec", "csc", "cot", "arcsin", "arccos", "arctan", "sinh", "cosh", "tanh",
          "ln", "log", "exp"}
_GREEK = {"alpha", "beta", "gamma", "delta", "epsilon", "varepsilon", "zeta", "eta", "theta", "vartheta", "iota",
          "kappa", "lambda", "mu", "nu", "xi", "rho", "sigma", "tau", "upsilon", "phi", "varphi", "chi", "psi",
          "omega", "Gamma", "Delta", "Theta", "Lambda", "Xi", "Sigma", "Phi", "Psi", "Omega"}
_NUMBER = re.compile(r"\d+(?:\.\d*)?|\.\d+")


def to_sympy(text: str) -> Any:
    """A sympy expression read from normalised LaTeX or plain math text (``\\frac{a}{b}``, ``\\sqrt[n]{x}``,
    ``\\pi``, ``\\infty``, ``\\cdot``, ``\\times``, ``^{...}``, ``!``, functions, implicit products); ``i`` is
    the imaginary unit. Raises :class:`ParseError` on what it cannot read and :class:`TooLarge` on a power or
    factorial too large to evaluate."""
    reader = _Reader(text, _sympy())
    expr = reader.expr()
    reader.space()
    if reader.i != len(reader.s):
        raise ParseError(f"unexpected {reader.s[reader.i:reader.i + 10]!r}")
    return expr


class _Reader:
    """Recursive descent over one string: expr = term (+|- term)*; term = signed ((*|/|implicit) signed)*;
    signed = (-|+)* power; power = postfix (^ exponent)?; postfix = atom !*."""

    def __init__(self, text: str, sp: Any) -> None:
        self.s = text
        self.i = 0
        self.sp = sp

    def space(self) -> None:
        while self.i < len(self.s) and self.s[self.i] == " ":
            self.i += 1

    def peek(self) -> str:
        self.space()
        return self.s[self.i] if self.i < len(self.s) else ""

    def command(self) -> str:
        """The name of the command at the cursor (without its backslash), not consumed; '' if none."""
        self.space()
        m = re.match(r"\\([A-Za-z]+|[{}|])", self.s[self.i:])
        return m.group(1) if m else ""

    def take(self, token: str) -> None:
        self.space()
        if not self.s.startswith(token, self.i):
            raise ParseError(f"expected {token!r} at {self.s[self.i:self.i + 10]!r}")
        self.i += len(token)

    def expr(self) -> Any:
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.s[self.i]
            self.i += 1
            rhs = self.term()
            value = value + rhs if op == "+" else value - rhs
        if self.command() == "pm":
            raise ParseError("\\pm")
        return value

    def term(self) -> Any:
        value = self.signed()
        while True:
            c, cmd = self.peek(), self.command()
            if c == "*" or cmd in ("cdot", "times"):
                self.i += 1 if c == "*" else len(cmd) + 1
                value = value * self.signed()
            elif c == "/" or cmd == "div":
                self.i += 1 if c == "/" else len(cmd) + 1
                value = value / self.signed()
            elif self.starts_atom():
                value = value * self.power()
            else:
                return value

    def starts_atom(self) -> bool:
        c = self.peek()
        if not c:
            return False
        if c.isalnum() or c in "({[.":
            return True
        cmd = self.command()
        return bool(cmd) and cmd not in ("cdot", "times", "div", "pm", "}", "right", "cup")

    def signed(self) -> Any:
        c = self.peek()
        if c == "-":
            self.i += 1
            return -self.signed()
        if c == "+":
            self.i += 1
            return self.signed()
        return self.power()

    def power(self) -> Any:
        base = self.postfix()
        if self.peek() == "^":
            self.i += 1
            return self.pow(base, self.exponent())
        return base

    def exponent(self) -> Any:
        c = self.peek()
        if c == "{":
            self.i += 1
            value = self.expr()
            self.take("}")
            return value
        if c == "-":
            self.i += 1
            return -self.exponent()
        return self.postfix()

    def pow(self, base: Any, exp: Any) -> Any:
        """``base**exp``, refused when both are numbers and the value would have more than MAX_DIGITS digits."""
        if base.is_number and exp.is_number and exp.is_real:
            try:
                magnitude = abs(complex(self.sp.N(base, 15)))
                exponent = abs(float(self.sp.N(exp, 15)))
            except OverflowError:
                raise TooLarge(f"a power with more than {MAX_DIGITS} digits") from None
            if magnitude > 0 and exponent * abs(math.log10(magnitude)) > MAX_DIGITS:
                raise TooLarge(f"a power with more than {MAX_DIGITS} digits")
        return base**exp

    def postfix(self) -> Any:
        value = self.atom()
        while self.peek() == "!":
            self.i += 1
            if value.is_number and (not value.is_integer or value > 1700):
                raise TooLarge("a factorial too large") if value.is_integer else ParseError("factorial")
            value = self.sp.factorial(value)
        return value

    def group(self, close: str) -> Any:
        value = self.expr()
        self.take(close)
        return value

    def arg(self) -> Any:
        """A command's argument: a braced group, else one digit, letter or command."""
        c = self.peek()
        if c == "{":
            self.i += 1
            return self.group("}")
        if c.isdigit():
            self.i += 1
            return self.sp.Integer(int(c))
        if c.isalpha():
            self.i += 1
            return self.symbol(c)
        if c == "\\":
            return self.atom()
        raise ParseError(f"expected an argument at {self.s[self.i:self.i + 10]!r}")

    def symbol(self, name: str) -> Any:
        if self.i < len(self.s) and self.s[self.i] == "_":
            self.i += 1
            m = re.match(r"\{([A-Za-z0-9]+)\}|([A-Za-z0-9])", self.s[self.i:])
            if m is None:
                raise ParseError("subscript")
            self.i += m.end()
            name += "_" + (m.group(1) or m.group(2))
        if name == "i":
            return self.sp.I
        return self.sp.Symbol(name)

    def atom(self) -> Any:
        sp = self.sp
        c = self.peek()
        if not c:
            raise ParseError("unexpected end")
        if c.isdigit() or c == ".":
            m = _NUMBER.match(self.s, self.i)
            if m is None:
                raise ParseError("number")
            self.i = m.end()
            if self.i < len(self.s) and self.s[self.i] == "_":
                raise ParseError("a number with a base subscript")
            return sp.Rational(m.group(0).rstrip(".") or "0")
        if c.isalpha():
            self.i += 1
            return self.symbol(c)
        if c in "([":
            self.i += 1
            return self.group(")" if c == "(" else "]")
        if c == "{":
            self.i += 1
            return self.group("}")
        if c == "|":
            self.i += 1
            return sp.Abs(self.group("|"))
        cmd = self.command()
        if not cmd:
            raise ParseError(f"unexpected {c!r}")
        self.i += len(cmd) + 1
        if cmd == "frac":
            num = self.arg()
            return num / self.arg()
        if cmd == "binom":
            n = self.arg()
            k = self.arg()
            if n.is_number and k.is_number and n.is_integer and k.is_integer and n > 0:
                smaller = min(k, n - k)
                if smaller > 0 and float(smaller) * math.log10(float(n)) > MAX_DIGITS:
                    raise TooLarge(f"a binomial with more than {MAX_DIGITS} digits")
            return sp.binomial(n, k)
        if cmd == "sqrt":
            if self.peek() == "[":
                self.i += 1
                index = self.group("]")
                return self.pow(self.arg(), 1 / index)
            return sp.sqrt(self.arg())
        if cmd == "pi":
            return sp.pi
        if cmd == "infty":
            return sp.oo
        if cmd == "{":
            return self.group("\\}")
        if cmd == "|":
            return sp.Abs(self.group("\\|"))
        if cmd in _GREEK:
            return sp.Symbol(cmd)
        if cmd in _FUNCS:
            return self.function(cmd)
        raise ParseError(f"unknown command \\{cmd}")

    def function(self, name: str) -> Any:
        sp = self.sp
        power = None
        base = None
        if name == "log" and self.peek() == "_":
            self.i += 1
            base = self.arg()
        if self.peek() == "^":
            self.i += 1
            power = self.exponent()
        if self.peek() == "(":
            self.i += 1
            argument = self.group(")")
        else:
            argument = self.power()
        table = {"sin": sp.sin, "cos": sp.cos, "tan": sp.tan, "sec": sp.sec, "csc": sp.csc, "cot": sp.cot,
                 "arcsin": sp.asin, "arccos": sp.acos, "arctan": sp.atan, "sinh": sp.sinh, "cosh": sp.cosh,
                 "tanh": sp.tanh, "ln": sp.log, "exp": sp.exp}
        if name == "log":
            value = sp.log(argument) if base is None else sp.log(argument, base)
        else:
            value = table[name](argument)
        return value if power is None else self.pow(value, power)


# --------------------------------------------------------------------------------------------------------------
# the worker process
# --------------------------------------------------------------------------------------------------------------

def _limit_memory(gib: int = 4) -> None:
    """Cap the worker's address space where the platform allows it (a hostile answer then fails, not the host)."""
    try:
        import resource
    except ImportError:  # not POSIX
        return
    try:
        _soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        limit = gib * 1024**3
        if hard == resource.RLIM_INFINITY or hard > limit:
            resource.setrlimit(resource.RLIMIT_AS, (limit, hard))
    except (ValueError, OSError):
        pass


def serve() -> None:
    """The worker loop: one JSON line ``{"a": answer, "b": reference}`` in, one ``{"equal", "detail"}`` out."""
    try:
        _sympy()
    except ImportError as e:
        print(json.dumps({"ready": False, "error": str(e)}), flush=True)
        return
    _limit_memory()
    print(json.dumps({"ready": True}), flush=True)
    for line in sys.stdin:
        try:
            request = json.loads(line)
            equal, detail = equivalent(str(request["a"]), str(request["b"]), sympy_ok=True)
        except Exception as e:  # one bad comparison is a failed grade, never the worker's end
            equal, detail = False, f"error: {type(e).__name__}"
        print(json.dumps({"equal": equal, "detail": detail}), flush=True)


if __name__ == "__main__":
    serve()
