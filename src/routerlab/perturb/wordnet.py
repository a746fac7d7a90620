"""An offline reader of WordNet 3.0 in its database format (wndb), for the word level (SPEC 3; hse paper
appendix 11): synonyms, base forms (a small morphy) and re-inflection of a synonym to the original's form.

Files read from the WordNet directory (``$ROUTERLAB_WORDNET``, else ``/usr/share/wordnet``, Debian's
``wordnet-base``): ``index.POS`` (``lemma pos synset_cnt p_cnt [ptr...] sense_cnt tagsense_cnt offset...``, senses
most frequent first), ``data.POS`` (a synset per line at its byte offset: ``offset lex_filenum ss_type w_cnt word
lex_id ... | gloss``, ``w_cnt`` in hex; its ``;u`` pointers mark usage labels), ``POS.exc`` (irregular
inflections, ``went go``) and ``cntlist.rev`` (``lemma%ss_type:... sense_number tag_cnt``: how often each sense of
a lemma was tagged in the semantic concordance, read once, when a sense count is first asked for). Lines starting
with two spaces are the licence header. Each part of speech is loaded the first time it is asked for, once per
process and directory: its index as raw lines by lemma (parsed on demand), its data file as bytes (a synset is
sliced out at its offset), its exceptions as dicts both ways.

Re-inflection is conservative: when the right form of a synonym is not certain (an irregular past that may be a
past or a participle, a doubled final consonant WordNet does not list, a long adjective's comparative, a plural
of a noun in -o or -f), :func:`inflect` returns None and the word level skips that substitution.
"""

from __future__ import annotations

import os
import re
import threading
from dataclasses import dataclass
from pathlib import Path

from routerlab.errors import UsageError

POS_NAMES: tuple[str, ...] = ("noun", "verb", "adj", "adv")
_FILE_POS = {"noun": "noun", "verb": "verb", "adj": "adj", "adv": "adv"}
DEFAULT_DIR = Path("/usr/share/wordnet")
ENV_VAR = "ROUTERLAB_WORDNET"

FORMS: dict[str, tuple[str, ...]] = {
    "noun": ("base", "plural"),
    "verb": ("base", "s", "ed", "ing"),
    "adj": ("base", "er", "est"),
    "adv": ("base",),
}
"""The inflected forms :func:`inflect` can make, per part of speech."""

# WordNet's detachment rules (suffix, ending), tried in this order after the exception lists.
_RULES: dict[str, tuple[tuple[str, str], ...]] = {
    "noun": (("s", ""), ("ses", "s"), ("xes", "x"), ("zes", "z"), ("ches", "ch"), ("shes", "sh"),
             ("men", "man"), ("ies", "y")),
    "verb": (("s", ""), ("ies", "y"), ("es", "e"), ("es", ""), ("ed", "e"), ("ed", ""), ("ing", "e"),
             ("ing", "")),
    "adj": (("er", ""), ("est", ""), ("er", "e"), ("est", "e")),
    "adv": (),
}
_SS_TYPE_POS = {"1": "noun", "2": "verb", "3": "adj", "4": "adv", "5": "adj"}
"""cntlist.rev's synset type digit -> part of speech (5, an adjective satellite, is an adjective)."""
COUNTS_FILE = "cntlist.rev"
_VOWELS = set("aeiou")
_ADJ_MARKER = re.compile(r"\([a-z]+\)$")


def wordnet_dir() -> Path:
    """The WordNet directory: ``$ROUTERLAB_WORDNET`` when set, else ``/usr/share/wordnet``."""
    env = os.environ.get(ENV_VAR)
    return Path(env) if env else DEFAULT_DIR


@dataclass(frozen=True)
class IndexEntry:
    """A lemma's line of ``index.POS``: its synset offsets (most frequent sense first) and how many of its senses
    are tagged in the semantic concordance (a frequency signal used to guess the part of speech)."""

    lemma: str
    offsets: tuple[int, ...]
    tagsense_cnt: int


class _PosTables:
    """One part of speech: raw index lines by lemma, the data file's bytes, exceptions both ways."""

    def __init__(self, root: Path, pos: str) -> None:
        self.index: dict[str, str] = {}
        with open(root / f"index.{pos}", encoding="utf-8") as fh:
            for line in fh:
                if line.startswith("  "):
                    continue
                cut = line.find(" ")
                if cut > 0:
                    self.index[line[:cut]] = line
        self.data = (root / f"data.{pos}").read_bytes()
        self.exc: dict[str, list[str]] = {}      # inflected -> bases
        self.reverse: dict[str, list[str]] = {}  # base -> inflected forms
        exc_path = root / f"{pos}.exc"
        if exc_path.exists():
            with open(exc_path, encoding="utf-8") as fh:
                for line in fh:
                    parts = line.split()
                    if len(parts) < 2 or line.startswith("  "):
                        continue
                    self.exc.setdefault(parts[0], []).extend(parts[1:])
                    for base in parts[1:]:
                        self.reverse.setdefault(base, []).append(parts[0])
        self.synsets: dict[int, tuple[str, ...]] = {}
        self.bases: dict[str, tuple[str, ...]] = {}  # memo of base_forms


class WordNet:
    """WordNet 3.0 read from ``root`` (module docstring); use :func:`load` for the process-wide instance."""

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        missing = [f"{kind}.{pos}" for pos in POS_NAMES for kind in ("index", "data")
                   if not (self.root / f"{kind}.{pos}").is_file()]
        if missing:
            raise UsageError(f"WordNet 3.0 not found at {self.root}: install Debian's wordnet-base "
                             f"(apt-get install wordnet-base) or set {ENV_VAR}")
        self._tables: dict[str, _PosTables] = {}
        self._lock = threading.Lock()
        self._counts: dict[tuple[str, str], dict[int, int]] | None = None

    def _pos(self, pos: str) -> _PosTables:
        tables = self._tables.get(pos)
        if tables is None:
            if pos not in _FILE_POS:
                raise UsageError(f"unknown part of speech {pos!r}; known: {', '.join(POS_NAMES)}")
            with self._lock:
                tables = self._tables.get(pos)
                if tables is None:
                    tables = _PosTables(self.root, _FILE_POS[pos])
                    self._tables[pos] = tables
        return tables

    def preload(self) -> None:
        """Load every part of speech now (what a benchmark times as the load)."""
        for pos in POS_NAMES:
            self._pos(pos)

    def entry(self, lemma: str, pos: str) -> IndexEntry | None:
        """The index entry of ``lemma`` (any case; spaces or underscores) as ``pos``, or None."""
        key = lemma.lower().replace(" ", "_")
        line = self._pos(pos).index.get(key)
        if line is None:
            return None
        parts = line.split()
        p_cnt = int(parts[3])
        tagged = int(parts[5 + p_cnt])
        offsets = tuple(int(o) for o in parts[6 + p_cnt:])
        return IndexEntry(key, offsets, tagged)

    def _sense_table(self) -> dict[tuple[str, str], dict[int, int]]:
        """``cntlist.rev`` as (lemma, pos) -> {sense number: tag count}, read once on first use."""
        counts = self._counts
        if counts is not None:
            return counts
        with self._lock:
            if self._counts is None:
                path = self.root / COUNTS_FILE
                if not path.is_file():
                    raise UsageError(f"WordNet at {self.root} has no {COUNTS_FILE} (the sense frequencies the word "
                                     f"level filters by): install Debian's wordnet-base, which ships it, or set "
                                     f"{ENV_VAR}")
                table: dict[tuple[str, str], dict[int, int]] = {}
                with open(path, encoding="utf-8") as fh:
                    for line in fh:
                        parts = line.split()
                        if len(parts) != 3 or "%" not in parts[0]:
                            continue
                        lemma, _, rest = parts[0].partition("%")
                        pos = _SS_TYPE_POS.get(rest[:1])
                        if pos is None or not parts[1].isdigit() or not parts[2].isdigit():
                            continue
                        senses = table.setdefault((lemma, pos), {})
                        senses[int(parts[1])] = senses.get(int(parts[1]), 0) + int(parts[2])
                self._counts = table
            counts = self._counts
        assert counts is not None
        return counts

    def sense_counts(self, lemma: str, pos: str) -> tuple[int, ...]:
        """How often each sense of ``lemma`` as ``pos`` (in :meth:`entry` order, most frequent first) was tagged
        in WordNet's semantic concordance (``cntlist.rev``); 0 for a sense never tagged, () for no such lemma.
        The frequency signal of the word level: a rare lemma (hebdomad, begetter) has no tagged sense at all."""
        entry = self.entry(lemma, pos)
        if entry is None:
            return ()
        counts = self._sense_table().get((entry.lemma, pos), {})
        return tuple(counts.get(k + 1, 0) for k in range(len(entry.offsets)))

    def synset_lemmas(self, offset: int, pos: str) -> tuple[str, ...]:
        """The lemmas of the synset at byte ``offset`` of ``data.POS`` (underscores as spaces, adjective markers
        such as ``(a)`` removed), in WordNet's order."""
        tables = self._pos(pos)
        cached = tables.synsets.get(offset)
        if cached is not None:
            return cached
        end = tables.data.find(b"\n", offset)
        line = tables.data[offset:end if end >= 0 else len(tables.data)].decode("utf-8")
        parts = line.split(" ")
        if not parts or int(parts[0]) != offset:
            raise UsageError(f"WordNet at {self.root}: data.{pos} has no synset at byte {offset} (a corrupt or "
                             f"mismatched WordNet; reinstall wordnet-base)")
        count = int(parts[3], 16)
        lemmas = tuple(_ADJ_MARKER.sub("", w).replace("_", " ") for w in parts[4:4 + 2 * count:2])
        tables.synsets[offset] = lemmas
        return lemmas

    def usage_labelled(self, offset: int, pos: str) -> frozenset[int]:
        """Which lemmas of the synset at ``offset`` carry a usage label (``;u`` pointers: colloquialism, slang,
        archaism, trade name, ...): their 1-based numbers in the synset, 0 when the label is the whole synset's."""
        tables = self._pos(pos)
        end = tables.data.find(b"\n", offset)
        parts = tables.data[offset:end if end >= 0 else len(tables.data)].decode("utf-8").split(" ")
        count = int(parts[3], 16)
        at = 4 + 2 * count
        out: set[int] = set()
        for k in range(int(parts[at])):
            symbol, source_target = parts[at + 1 + 4 * k], parts[at + 4 + 4 * k]
            if symbol == ";u":
                out.add(int(source_target[:2], 16))
        return frozenset(out)

    def base_forms(self, word: str, pos: str) -> list[str]:
        """The lemmas in WordNet that ``word`` can be a form of as ``pos``: the word itself, then its irregular
        bases from ``POS.exc``, then what WordNet's detachment rules give (a small morphy)."""
        w = word.lower()
        tables = self._pos(pos)
        cached = tables.bases.get(w)
        if cached is not None:
            return list(cached)
        out: list[str] = []

        def add(cand: str) -> None:
            if cand and cand not in out and cand in tables.index:
                out.append(cand)

        add(w)
        for base in tables.exc.get(w, ()):
            add(base)
        for suffix, ending in _RULES[pos]:
            if w.endswith(suffix) and len(w) > len(suffix):
                add(w[: len(w) - len(suffix)] + ending)
        tables.bases[w] = tuple(out)
        return out

    def synonyms(self, word: str, pos: str, *, senses: int = 2) -> list[str]:
        """Lemmas of the first ``senses`` senses of ``word`` as ``pos`` (most frequent sense first, WordNet's
        order within a synset; multiword lemmas joined with spaces), without the word itself or its base. An
        inflected word is looked up by its first base form."""
        bases = self.base_forms(word, pos)
        if not bases:
            return []
        entry = self.entry(bases[0], pos)
        if entry is None:
            return []
        own = {word.lower(), bases[0].replace("_", " ")}
        out: list[str] = []
        for offset in entry.offsets[:senses]:
            for lemma in self.synset_lemmas(offset, pos):
                if lemma.lower() not in own and lemma not in out:
                    out.append(lemma)
        return out

    def may_be_a_name(self, word: str) -> bool:
        """True when some noun sense of ``word`` is spelled with a capital in WordNet (John, Paris, Mars): a
        capitalised word at the start of a sentence may then be a name, not the common noun (john -> can)."""
        entry = self.entry(word, "noun")
        if entry is None:
            return False
        lower = word.lower()
        return any(lemma.lower() == lower and lemma[:1].isupper()
                   for offset in entry.offsets for lemma in self.synset_lemmas(offset, "noun"))

    def irregular_forms(self, base: str, pos: str) -> list[str]:
        """The inflected forms ``POS.exc`` lists for ``base`` (``go`` -> went, gone, ...)."""
        return list(self._pos(pos).reverse.get(base.lower().replace(" ", "_"), ()))

    def inflect(self, base: str, pos: str, form: str) -> str | None:
        """``base`` put into ``form`` (one of :data:`FORMS` for ``pos``), or None when the right spelling is not
        certain. A multiword verb inflects its first word, a multiword noun its last (the one before ``of`` when it
        has one); a result is kept only if
        :meth:`base_forms` maps it back to ``base``."""
        if form not in FORMS.get(pos, ()):
            raise UsageError(f"{pos} has no form {form!r}; known: {', '.join(FORMS.get(pos, ()))}")
        if form == "base":
            return base
        words = base.split(" ")
        if len(words) > 1:
            if pos not in ("noun", "verb"):
                return None
            # a verb inflects its first word; a noun its last, or the one before "of" (units of measurement)
            head = 0 if pos == "verb" else words.index("of") - 1 if "of" in words[1:] else len(words) - 1
            made = self.inflect(words[head], pos, form) if self.entry(words[head], pos) else None
            if made is None:
                return None
            return " ".join([*words[:head], made, *words[head + 1:]])
        irregular = [w for w in self.irregular_forms(base, pos) if "_" not in w]
        shaped = [w for w in irregular if _shape_fits(w, base, pos, form)]
        if pos == "verb" and form == "ed":
            # An irregular past may differ from the participle (went/gone, ran/run): only a doubled consonant
            # (stopped) is safe; any other irregular verb is skipped.
            doubled = base + base[-1] + "ed"
            if doubled in irregular:
                return doubled
            if irregular and any(not (w.endswith("ing") or w.endswith("s")) for w in irregular):
                return None
        elif shaped:
            return shaped[0] if len(set(shaped)) == 1 else None
        made = _regular(base, pos, form)
        if made is None or base.lower() not in self.base_forms(made, pos):
            return None
        return made

    def form_of(self, word: str, base: str, pos: str) -> str | None:
        """Which form of ``base`` the word ``word`` is (``"base"``, ``"plural"``, ``"ed"``, ...), found by making
        each form with :meth:`inflect`; None when none matches (an irregular form that cannot be re-made)."""
        w = word.lower()
        for form in FORMS[pos]:
            if form == "base":
                if w == base.lower():
                    return form
                continue
            if self.inflect(base.lower(), pos, form) == w:
                return form
        return None


def _vowel_groups(word: str) -> int:
    """Syllables, roughly: vowel groups, a silent final e not counted (large: 1, happy: 2)."""
    stem = word[:-1] if word.endswith("e") and len(word) > 3 else word
    return len(re.findall(r"[aeiouy]+", stem[1:])) + (stem[:1] in _VOWELS)


def _cvc(word: str) -> bool:
    """Ends consonant-vowel-consonant (not w, x, y): a candidate for doubling the final consonant."""
    if len(word) < 3:
        return False
    a, b, c = word[-3], word[-2], word[-1]
    if word[-4:-2] == "qu":  # quit, squat: the u of qu is not a vowel
        return b in _VOWELS and c not in _VOWELS and c not in "wxy"
    return a not in _VOWELS and b in _VOWELS and c not in _VOWELS and c not in "wxy"


def _shape_fits(inflected: str, base: str, pos: str, form: str) -> bool:
    if pos == "noun":
        return form == "plural"
    if pos == "verb":
        return {"ing": inflected.endswith("ing"), "s": inflected.endswith("s") and not inflected.endswith("ss"),
                "ed": False}.get(form, False)
    if pos == "adj":
        return inflected.endswith(form)
    return False


def _regular(base: str, pos: str, form: str) -> str | None:
    """The regular spelling of ``base`` in ``form``, or None when regular rules are not reliable for it."""
    if not base.isalpha() or not base.islower() or len(base) < 2:
        return None
    cons_y = base.endswith("y") and base[-2] not in _VOWELS
    if pos == "noun":
        if base.endswith(("o", "f", "fe", "is", "us", "um", "on")):
            return None
        if base.endswith(("s", "x", "z", "ch", "sh")):
            return base + "es"
        return base[:-1] + "ies" if cons_y else base + "s"
    if pos == "verb" and form == "s":
        if base.endswith(("s", "x", "z", "ch", "sh", "o")):
            return base + "es"
        return base[:-1] + "ies" if cons_y else base + "s"
    if pos == "verb":
        one_syllable = _vowel_groups(base) <= 1
        if _cvc(base) and one_syllable:
            return None  # would double the consonant (stop -> stopped); only POS.exc spells that for sure
        if form == "ing":
            if base.endswith("ie"):
                return base[:-2] + "ying"
            if base.endswith(("ee", "ye", "oe")):
                return base + "ing"
            return (base[:-1] if base.endswith("e") else base) + "ing"
        if base.endswith("e"):
            return base + "d"
        return base[:-1] + "ied" if cons_y else base + "ed"
    if pos == "adj":
        groups = _vowel_groups(base)
        if groups > 2 or (groups == 2 and not cons_y) or (_cvc(base) and groups <= 1):
            return None
        suffix = form
        if base.endswith("e"):
            return base + suffix[1:]
        return base[:-1] + "i" + suffix if cons_y else base + suffix
    return None


_LOADED: dict[Path, WordNet] = {}
_LOAD_LOCK = threading.Lock()


def load(root: str | Path | None = None) -> WordNet:
    """The process-wide :class:`WordNet` of ``root`` (default :func:`wordnet_dir`); a missing WordNet is a
    UsageError saying how to install it."""
    path = Path(root) if root is not None else wordnet_dir()
    with _LOAD_LOCK:
        found = _LOADED.get(path)
        if found is None:
            found = WordNet(path)
            _LOADED[path] = found
    return found


def synonyms(word: str, pos: str, *, senses: int = 2) -> list[str]:
    """:meth:`WordNet.synonyms` on the default WordNet."""
    return load().synonyms(word, pos, senses=senses)


def base_forms(word: str, pos: str) -> list[str]:
    """:meth:`WordNet.base_forms` on the default WordNet."""
    return load().base_forms(word, pos)


def inflect(base: str, pos: str, form: str) -> str | None:
    """:meth:`WordNet.inflect` on the default WordNet."""
    return load().inflect(base, pos, form)


def form_of(word: str, base: str, pos: str) -> str | None:
    """:meth:`WordNet.form_of` on the default WordNet."""
    return load().form_of(word, base, pos)
