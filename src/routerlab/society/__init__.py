"""Society diversity: is the model pool diverse enough for routing to mean anything (SPEC 2)?

Hierarchic Social Entropy (HSE) of the actors' behaviour vectors, exactly; its taxonomic curve
H(h); greedy max-HSE coresets (alone or jointly with oracle accuracy) with their diminishing-returns
curve; and synthetic specialist societies built from a partition of the items::

    from routerlab import society
    society.hse(B)                          # B: actors x items, values in [0, 1]
    society.hse(table, split="train")       # B = table.score[train rows].T
    society.coreset(table, k=5).selected_names
    society.hse(society.table_specialists(table, "dataset"))
    society.synth_table(table, "sa", society.load_society_map("mmlu-pro"))   # routers can run on it

This package reads only the data layer; reports and the CLI build on it.
"""

from routerlab.society.behaviour import NanRule, Society, as_society, from_table
from routerlab.society.coresets import (
    Coreset,
    CurvePoint,
    RandomCurve,
    candidate_hse_single,
    coreset,
    greedy_coreset,
    random_subsets_curve,
)
from routerlab.society.distances import (
    METRICS,
    DenseDistances,
    Distances,
    GramDistances,
    d_max,
    pairwise_distances,
)
from routerlab.society.entropy import (
    LINKAGES,
    Diversity,
    TaxonomicCurve,
    diversity,
    diversity_from_distances,
    hse,
    hse_from_linkage,
    linkage_matrix,
    minimum_spanning_tree,
    normalized_hse,
    subset_hse,
    taxonomic_curve,
)
from routerlab.society.synthetic import (
    SOCIETIES,
    SocietyMap,
    builtin_maps,
    default_society_map,
    item_labels,
    load_society_map,
    orthogonal_society,
    specialist_society,
    synth_table,
    table_specialists,
    union_society,
)

__all__ = [
    "LINKAGES",
    "METRICS",
    "SOCIETIES",
    "Coreset",
    "CurvePoint",
    "DenseDistances",
    "Distances",
    "Diversity",
    "GramDistances",
    "NanRule",
    "RandomCurve",
    "Society",
    "SocietyMap",
    "TaxonomicCurve",
    "as_society",
    "builtin_maps",
    "candidate_hse_single",
    "coreset",
    "d_max",
    "default_society_map",
    "diversity",
    "diversity_from_distances",
    "from_table",
    "greedy_coreset",
    "hse",
    "hse_from_linkage",
    "item_labels",
    "linkage_matrix",
    "load_society_map",
    "minimum_spanning_tree",
    "normalized_hse",
    "orthogonal_society",
    "pairwise_distances",
    "random_subsets_curve",
    "specialist_society",
    "subset_hse",
    "synth_table",
    "table_specialists",
    "taxonomic_curve",
    "union_society",
]
