"""How close a variant stays to its original (SPEC 3): the cosine of their encoder vectors, recorded on every
variant, and the threshold below which the word level drops a candidate (docs/perturb.md, "Similarity").

The encoder is the one routerlab encodes tables with by default (:func:`routerlab.features.default_encoder`):
MiniLM where the ``embed`` extra is installed, else tf-idf, fitted on the texts of the table being perturbed (or on
the originals given to :func:`routerlab.perturb.perturb`). For tf-idf the cosine is taken on its sparse word 1-2
gram vectors before the SVD: the SVD's rank is capped by the number of fit texts, so on a few texts it would make
every pair look alike. The two encoders give cosines on different scales, so each has its own threshold
(:data:`THRESHOLDS`), chosen from measurements on the shared tables (docs/perturb.md).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from routerlab.errors import UsageError
from routerlab.features.registry import Encoder, default_encoder, get_encoder
from routerlab.features.tfidf import TfidfEncoder

THRESHOLDS: dict[str, float] = {"minilm": 0.88, "tfidf": 0.75}
"""The least cosine to its original a word-level variant needs, per encoder (docs/perturb.md: the measurement)."""


class Similarity:
    """Cosines of variants to their originals under one encoder; ``name`` is the encoder's spec (recorded on
    every variant) and ``threshold`` the word level's bar for it (None for an encoder without a measured one)."""

    def __init__(self, encoder: str | Encoder | None = None, fit_texts: Sequence[str] = (),
                 threshold: float | None = None) -> None:
        enc = get_encoder(encoder if encoder is not None else default_encoder())
        if enc.needs_fit:
            texts = [t for t in fit_texts if str(t).strip()]
            if not texts:
                raise UsageError(f"encoder {enc.name!r} needs texts to fit on before it can score variants")
            enc.fit(texts)
        if threshold is not None and not -1.0 <= threshold <= 1.0:
            raise UsageError(f"the similarity threshold must be a cosine in [-1, 1], got {threshold!r}")
        self.encoder = enc
        self.name = enc.spec
        self.threshold = threshold if threshold is not None else THRESHOLDS.get(enc.name)
        self._memo: dict[str, npt.NDArray[np.float32]] = {}

    def _dense(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        """Unit vectors of ``texts`` from a dense encoder (zero for a text it gives nothing for), memoised by
        text."""
        todo = sorted({t for t in texts if t not in self._memo})
        if todo:
            X = np.asarray(self.encoder.transform(todo), dtype=np.float32)
            norms = np.linalg.norm(X, axis=1, keepdims=True)
            X = np.divide(X, norms, out=np.zeros_like(X), where=norms > 1e-12)
            self._memo.update(zip(todo, X, strict=True))
        return np.stack([self._memo[t] for t in texts])

    def cosines(self, originals: Sequence[str], variants: Sequence[str]) -> npt.NDArray[np.float64]:
        """The cosine of each variant to its original, rounded to 4 decimals (what a variants file keeps); 0 when
        either text has no vector (no word the tf-idf vocabulary knows)."""
        if len(originals) != len(variants):
            raise UsageError(f"{len(originals)} originals for {len(variants)} variants")
        if not variants:
            return np.zeros(0)
        if isinstance(self.encoder, TfidfEncoder):
            A = self.encoder.tfidf(list(originals))
            B = self.encoder.tfidf(list(variants))  # rows are L2-normalised (or all zero)
            dots = np.asarray(A.multiply(B).sum(axis=1), dtype=np.float64).ravel()
        else:
            dots = np.einsum("ij,ij->i", self._dense(originals), self._dense(variants)).astype(np.float64)
        return np.asarray(np.round(np.clip(dots, -1.0, 1.0), 4), dtype=np.float64)

    def forget(self) -> None:
        """Drop the memoised vectors (between levels of a large run)."""
        self._memo.clear()
