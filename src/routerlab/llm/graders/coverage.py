"""CommonGen graders: the share of the concept words a reply uses (graded scores in [0, 1]).

The concepts are the reference's comma-separated words (LLMRouter's CommonGen rows hold the same list as
question and reference; the question is read when the reference is empty). A reply's words are its runs of
letters, lower-cased (``dog's`` gives ``dog`` and ``s``; ``wheel-barrow`` is two words). Three conventions:

- ``coverage`` (ours): a concept counts when the reply uses it or one of its inflections: plural and third
  person (``dish`` -> ``dishes``, ``fly`` -> ``flies``), past tense and participle (``chop`` -> ``chopped``,
  ``drive`` -> ``drove``, ``driven``), ``-ing`` (``drive`` -> ``driving``, ``run`` -> ``running``, ``lie`` ->
  ``lying``), irregular forms from a table (``foot`` -> ``feet``, ``knife`` -> ``knives``, ``eat`` -> ``ate``).
  CommonGen's concepts are lemmas (``clothe``, ``jean``) and its task allows any inflection.
- ``coverage-exact``: a concept counts only when it appears as a whole word exactly as written (case ignored).
- ``coverage-llmrouter``: the rule of an evaluation written for LLMRouter's task set in LLMRouter-derived code
  (LLMRouter's own ``eval_perf`` has no CommonGen branch; ``docs/grading.md``): the concept and each
  white-space-separated piece of the reply lose the first of the suffixes ``ing``, ``ed``, ``er``, ``s`` they end
  with (when two letters or more are left), then must be equal. So ``drives`` counts for ``drive`` but
  ``driving`` and ``drove`` do not; ``play`` counts for ``player`` but ``players`` does not; a concept followed by
  punctuation (``drive.``) does not count.

A multi-word concept counts when its words appear in a row (the last one inflected, for ``coverage``).
"""

from __future__ import annotations

import re
from abc import abstractmethod
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from functools import lru_cache

from routerlab.llm.graders import _prompts
from routerlab.llm.graders.base import Grade, Grader, Item, register_grader

__all__ = ["CoverageGrader", "ExactCoverageGrader", "LLMRouterCoverageGrader", "concepts_of", "inflections"]

_WORD = re.compile(r"[a-z]+")
_VOWELS = "aeiou"

# irregular verbs: base -> past and participle forms (written for CommonGen's everyday verbs)
_IRREGULAR_VERBS = {
    "arise": "arose arisen", "awake": "awoke awoken", "be": "was were been", "bear": "bore borne born",
    "beat": "beaten", "become": "became", "begin": "began begun", "bend": "bent", "bet": "bet", "bid": "bid",
    "bind": "bound", "bite": "bit bitten", "bleed": "bled", "blow": "blew blown", "break": "broke broken",
    "breed": "bred", "bring": "brought", "build": "built", "burn": "burnt", "burst": "burst", "buy": "bought",
    "cast": "cast", "catch": "caught", "choose": "chose chosen", "cling": "clung", "come": "came",
    "cost": "cost", "creep": "crept", "cut": "cut", "deal": "dealt", "dig": "dug", "dive": "dove",
    "do": "did done does", "draw": "drew drawn", "dream": "dreamt", "drink": "drank drunk",
    "drive": "drove driven", "eat": "ate eaten", "fall": "fell fallen", "feed": "fed", "feel": "felt",
    "fight": "fought", "find": "found", "flee": "fled", "fling": "flung", "fly": "flew flown",
    "forbid": "forbade forbidden", "forget": "forgot forgotten", "forgive": "forgave forgiven",
    "freeze": "froze frozen", "get": "got gotten", "give": "gave given", "go": "went gone goes",
    "grind": "ground", "grow": "grew grown", "hang": "hung", "have": "had has", "hear": "heard",
    "hide": "hid hidden", "hit": "hit", "hold": "held", "hurt": "hurt", "keep": "kept", "kneel": "knelt",
    "knit": "knit", "know": "knew known", "lay": "laid", "lead": "led", "lean": "leant", "leap": "leapt",
    "learn": "learnt", "leave": "left", "lend": "lent", "let": "let", "lie": "lay lain", "light": "lit",
    "lose": "lost", "make": "made", "mean": "meant", "meet": "met", "mow": "mown", "pay": "paid", "put": "put",
    "quit": "quit", "read": "read", "ride": "rode ridden", "ring": "rang rung", "rise": "rose risen",
    "run": "ran", "say": "said", "see": "saw seen", "seek": "sought", "sell": "sold", "send": "sent",
    "set": "set", "sew": "sewn", "shake": "shook shaken", "shine": "shone", "shoot": "shot", "show": "shown",
    "shrink": "shrank shrunk", "shut": "shut", "sing": "sang sung", "sink": "sank sunk", "sit": "sat",
    "sleep": "slept", "slide": "slid", "sling": "slung", "slit": "slit", "sow": "sown", "speak": "spoke spoken",
    "speed": "sped", "spend": "spent", "spill": "spilt", "spin": "spun", "spit": "spat", "split": "split",
    "spread": "spread", "spring": "sprang sprung", "stand": "stood", "steal": "stole stolen", "stick": "stuck",
    "sting": "stung", "stink": "stank stunk", "stride": "strode", "strike": "struck", "string": "strung",
    "swear": "swore sworn", "sweep": "swept", "swell": "swollen", "swim": "swam swum", "swing": "swung",
    "take": "took taken", "teach": "taught", "tear": "tore torn", "tell": "told", "think": "thought",
    "throw": "threw thrown", "tread": "trod trodden", "wake": "woke woken", "wear": "wore worn",
    "weave": "wove woven", "weep": "wept", "wet": "wet", "win": "won", "wind": "wound", "wring": "wrung",
    "write": "wrote written",
}
# irregular nouns: singular -> plural forms
_IRREGULAR_NOUNS = {
    "man": "men", "woman": "women", "child": "children", "person": "people", "foot": "feet", "tooth": "teeth",
    "goose": "geese", "mouse": "mice", "ox": "oxen", "die": "dice", "calf": "calves", "half": "halves",
    "knife": "knives", "leaf": "leaves", "life": "lives", "loaf": "loaves", "self": "selves", "shelf": "shelves",
    "thief": "thieves", "wife": "wives", "wolf": "wolves", "scarf": "scarves", "hoof": "hooves",
    "cactus": "cacti", "fungus": "fungi", "criterion": "criteria", "phenomenon": "phenomena",
    "fisherman": "fishermen", "policeman": "policemen", "businessman": "businessmen", "cameraman": "cameramen",
    "fireman": "firemen", "snowman": "snowmen", "salesman": "salesmen", "gentleman": "gentlemen",
}


def _doubles(word: str) -> bool:
    """Whether ``word`` may double its last consonant before ``-ed``/``-ing`` (``chop``, ``run``, ``begin``;
    not ``jump``, ``fix``): it ends consonant-vowel-consonant (w, x and y never double). Generous (``open`` is
    given ``openning`` too): a spelling no English word has never matches a reply's word."""
    return len(word) >= 3 and word[-1] not in _VOWELS + "wxy" and word[-2] in _VOWELS and word[-3] not in _VOWELS


@lru_cache(maxsize=4096)
def inflections(word: str) -> frozenset[str]:
    """``word`` and its regular and irregular inflections (plural, third person, past, participle, ``-ing``);
    generous on purpose: a spelling no English word has cannot match a reply's word anyway."""
    w = word.lower()
    forms = {w, w + "s", w + "ed", w + "ing"}
    if w.endswith(("s", "x", "z", "ch", "sh", "o")):
        forms.add(w + "es")
    if len(w) > 2 and w.endswith("y") and w[-2] not in _VOWELS:
        forms |= {w[:-1] + "ies", w[:-1] + "ied"}
    if w.endswith("e"):
        forms.add(w + "d")
        if w.endswith("ie"):
            forms.add(w[:-2] + "ying")
        elif not w.endswith(("ee", "ye", "oe")):
            forms.add(w[:-1] + "ing")
    if w.endswith("fe"):
        forms.add(w[:-2] + "ves")
    elif w.endswith("f"):
        forms.add(w[:-1] + "ves")
    if w.endswith("c"):
        forms |= {w + "ked", w + "king"}
    if _doubles(w):
        forms |= {w + w[-1] + "ed", w + w[-1] + "ing"}
    forms |= set(_IRREGULAR_VERBS.get(w, "").split()) | set(_IRREGULAR_NOUNS.get(w, "").split())
    return frozenset(forms)


def concepts_of(item: Item) -> list[str]:
    """The concept words of a CommonGen item: the reference's comma list, else the question's."""
    text = item.reference if item.reference.strip() else item.question
    return [c.strip().lower() for c in text.split(",") if c.strip()]


def _in_a_row(needles: Sequence[AbstractSet[str]], words: list[str]) -> bool:
    """Whether some run of ``len(needles)`` consecutive words has its i-th word in ``needles[i]``."""
    n = len(needles)
    return any(all(words[i + k] in needles[k] for k in range(n)) for i in range(len(words) - n + 1))


class _CoverageBase(Grader):
    """Share of concepts present; subclasses say what counts as present."""

    binary = False

    def prompt(self, item: Item) -> str:
        return _prompts.ask_coverage(item)

    def instruction(self, item: Item) -> str:
        return "Write one short, plausible sentence that uses all of these words."

    @abstractmethod
    def matcher(self, reply: str) -> Callable[[str], bool]:
        """Whether a concept is present in ``reply`` (the reply read once, each concept asked in turn)."""

    def grade(self, item: Item) -> Grade:
        concepts = concepts_of(item)
        if not concepts:
            return Grade(0.0, self.name, "", "no concept words in the reference")
        reply = item.answer.strip()
        present = self.matcher(reply)
        found = [c for c in concepts if present(c)]
        missing = [c for c in concepts if c not in found]
        detail = f"{len(found)}/{len(concepts)} concepts"
        if missing:
            detail += "; missing: " + ", ".join(missing[:10]) + (", ..." if len(missing) > 10 else "")
        return Grade(len(found) / len(concepts), self.name, reply[:300], detail)


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@register_grader("coverage")
class CoverageGrader(_CoverageBase):
    """Share of concepts the reply uses, any inflection counting (module docstring)."""

    def matcher(self, reply: str) -> Callable[[str], bool]:
        words = _words(reply)
        vocabulary = set(words)

        def present(concept: str) -> bool:
            parts = _words(concept)
            if not parts:
                return False
            if len(parts) == 1:
                return not inflections(parts[0]).isdisjoint(vocabulary)
            return _in_a_row([{p} for p in parts[:-1]] + [inflections(parts[-1])], words)

        return present


@register_grader("coverage-exact")
class ExactCoverageGrader(_CoverageBase):
    """Share of concepts that appear as whole words exactly as written (case ignored)."""

    def matcher(self, reply: str) -> Callable[[str], bool]:
        words = _words(reply)
        return lambda concept: bool(_words(concept)) and _in_a_row([{p} for p in _words(concept)], words)


def llmrouter_stem(word: str) -> str:
    """The suffix rule of LLMRouter's CommonGen evaluation: lower case, then the first of ``ing``, ``ed``,
    ``er``, ``s`` that ends the word is dropped when at least two letters are left."""
    w = word.lower().strip()
    for suffix in ("ing", "ed", "er", "s"):
        if w.endswith(suffix) and len(w) - len(suffix) >= 2:
            return w[: -len(suffix)]
    return w


@register_grader("coverage-llmrouter")
class LLMRouterCoverageGrader(_CoverageBase):
    """Share of concepts whose stem equals the stem of a white-space piece of the reply (module docstring)."""

    def matcher(self, reply: str) -> Callable[[str], bool]:
        stems = {llmrouter_stem(piece) for piece in reply.split()}
        return lambda concept: llmrouter_stem(concept) in stems
