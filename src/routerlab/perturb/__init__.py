"""Meaning-preserving perturbations of queries at five levels (SPEC 3; hse paper sec. 5.1, appendix 11).

``perturb(ids, texts, levels, p, seed=..., backend=...)`` makes up to p variants per query per level;
``write_variants`` / ``read_variants`` keep them as JSON lines. Offline levels (character, word, syntax) need no
model; paraphrase and rambling are written by an LLM backend and are reported as not generated without one.
"""

from routerlab.perturb.base import (
    LEVELS,
    LLM_LEVELS,
    OFFLINE_LEVELS,
    PerturbationSet,
    Perturber,
    Variant,
    level_class,
    level_names,
    parse_levels,
    perturb,
    register_level,
    variant_id,
)
from routerlab.perturb.files import read_variants, write_variants
from routerlab.perturb.spans import keeps_protected, protected_spans

__all__ = [
    "LEVELS", "LLM_LEVELS", "OFFLINE_LEVELS", "PerturbationSet", "Perturber", "Variant", "keeps_protected",
    "level_class", "level_names", "parse_levels", "perturb", "protected_spans", "read_variants",
    "register_level", "variant_id", "write_variants",
]
