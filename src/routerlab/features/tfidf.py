"""TF-IDF over word 1-2 grams, reduced by truncated SVD (LSA): fast, deterministic, no torch.

Vocabulary, idf weights and the SVD basis are learned from the training texts only; a word that
appears only in test queries is ignored, so test queries never shape the space they are routed in.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np
import numpy.typing as npt

from routerlab.errors import UsageError
from routerlab.features.registry import Encoder, encoder


@encoder("tfidf")
class TfidfEncoder(Encoder):
    """Word 1-2 gram TF-IDF (sublinear tf) -> TruncatedSVD to ``dim`` (capped by the vocabulary) -> L2 norm.

    One-character words (``x``, ``7``) count: in routing queries they carry the domain.

    A text with no word of the training vocabulary gets the zero vector (it cannot be normalised).
    """

    summary = "TF-IDF word 1-2 grams + truncated SVD, fitted on training texts"
    version = "1"
    defaults: ClassVar[dict[str, Any]] = {"dim": 256, "min_df": 1, "max_features": 200_000, "seed": 0}
    needs_fit = True

    def __init__(self, **options: Any) -> None:
        super().__init__(**options)
        for key in ("dim", "min_df", "max_features"):
            value = self.options[key]
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise UsageError(f"encoder 'tfidf' option {key} must be a positive integer, got {value!r}")
        self._vectorizer: Any = None
        self._svd: Any = None  # None when the vocabulary is no larger than dim: the tf-idf itself is used
        self._analyze: Any = None  # the fitted vectorizer's analyzer, built on first use
        self._fast = True  # transform through _tfidf_rows (False: sklearn's transform; for the identity tests)

    @property
    def dim(self) -> int:
        """The output dimension once fitted: ``min(dim, vocabulary size, number of fit texts)``."""
        if self._vectorizer is None:
            raise UsageError("encoder 'tfidf' is used before fit()")
        if self._svd is not None:
            return int(self._svd.n_components)
        return len(self._vectorizer.vocabulary_)

    def _fit(self, texts: list[str]) -> None:
        from sklearn.decomposition import TruncatedSVD
        from sklearn.feature_extraction.text import TfidfVectorizer
        from threadpoolctl import threadpool_limits

        vectorizer = TfidfVectorizer(
            ngram_range=(1, 2), sublinear_tf=True, min_df=self.options["min_df"], token_pattern=r"(?u)\b\w+\b",
            max_features=self.options["max_features"], strip_accents="unicode", dtype=np.float32,
        )
        try:
            tfidf = vectorizer.fit_transform(texts)
        except ValueError as exc:  # empty vocabulary: every text is empty or punctuation
            raise UsageError(f"encoder 'tfidf' found no words in the {len(texts)} fit texts ({exc})") from exc
        n_docs, n_terms = tfidf.shape
        dim = min(int(self.options["dim"]), n_docs)
        svd = None
        if n_terms > dim:
            svd = TruncatedSVD(n_components=dim, algorithm="randomized", n_iter=7, random_state=self.options["seed"])
            # One BLAS thread: on a small shared machine two threads ran ~5x slower, and one thread
            # also makes the basis bit-for-bit reproducible.
            with threadpool_limits(limits=1, user_api="blas"):
                svd.fit(tfidf)
        self._vectorizer, self._svd = vectorizer, svd
        self._analyze = None

    def tfidf(self, texts: list[str]) -> Any:
        """The L2-normalised sparse tf-idf rows of ``texts`` before the SVD (the exact cosine space, used to score a
        perturbed query against its original)."""
        if self._vectorizer is None:
            raise UsageError("encoder 'tfidf' is used before fit()")
        return self._vectorizer.transform(texts)

    def _tfidf_rows(self, texts: list[str]) -> Any:
        """The vectorizer's ``transform(texts)``, computed without its per-call input checks (which cost more
        than the work for one short text, the case of a server routing each request): the same analyzer, the
        counts of the vocabulary's terms in sorted column order, ``1 + log`` of them, times idf, then sklearn's
        own in-place row L2 normalisation, all in the vectorizer's dtype: the same numbers, bit for bit."""
        import scipy.sparse as sp
        from sklearn.utils.sparsefuncs_fast import inplace_csr_row_normalize_l2

        vec = self._vectorizer
        if self._analyze is None:
            self._analyze = vec.build_analyzer()
        analyze, vocabulary = self._analyze, vec.vocabulary_
        indices: list[int] = []
        counts: list[int] = []
        indptr = [0]
        for text in texts:
            counter: dict[int, int] = {}
            for term in analyze(text):
                j = vocabulary.get(term)
                if j is not None:
                    counter[j] = counter.get(j, 0) + 1
            for j in sorted(counter):
                indices.append(j)
                counts.append(counter[j])
            indptr.append(len(indices))
        data = np.asarray(counts, dtype=vec.dtype)
        cols = np.asarray(indices, dtype=np.int32)
        if data.size:
            np.log(data, data)  # sublinear tf
            data += 1.0
            data *= vec.idf_[cols]
        X = sp.csr_matrix((data, cols, np.asarray(indptr, dtype=np.int32)), shape=(len(texts), len(vocabulary)))
        inplace_csr_row_normalize_l2(X)
        return X

    def _project(self, tfidf: Any) -> Any:
        """``TruncatedSVD.transform``: the sparse product ``tfidf @ components_.T``, over the basis rows of the
        terms present only (scipy would copy the whole transposed basis, vocabulary x dim, on every call). The
        columns are renumbered in order and each row keeps its entries in place, so the product adds the same
        terms in the same order: the same numbers."""
        import scipy.sparse as sp

        used, inverse = np.unique(tfidf.indices, return_inverse=True)
        compact = sp.csr_matrix((tfidf.data, inverse.astype(tfidf.indices.dtype), tfidf.indptr),
                                shape=(tfidf.shape[0], used.size))
        return compact @ self._svd.components_.T[used]

    def _transform(self, texts: list[str]) -> npt.NDArray[np.float32]:
        # sparse: the projection below is a sparse product, no BLAS
        if self._fast:
            tfidf = self._tfidf_rows(texts)
            reduced = self._project(tfidf) if self._svd is not None else tfidf.toarray()
        else:
            tfidf = self._vectorizer.transform(texts)
            reduced = self._svd.transform(tfidf) if self._svd is not None else tfidf.toarray()
        X = np.asarray(reduced, dtype=np.float64)
        norms = np.linalg.norm(X, axis=1, keepdims=True)
        X = np.divide(X, norms, out=np.zeros_like(X), where=norms > 1e-12)
        return np.asarray(X, dtype=np.float32)
