"""Query text -> vectors, cached on disk by content hash (text + encoder + version + options + fit set).

``encode(table, "tfidf")`` gives :class:`Features`; ``get_encoder("tfidf:dim=128")`` an encoder to
``fit`` on training texts and ``transform`` any text. Importing this package never imports torch:
the ``minilm`` encoder loads it when it is first used.
"""

from routerlab.features.base import Features
from routerlab.features.cache import CacheWarning, VectorCache, default_cache_dir
from routerlab.features.encoding import encode, encode_pair
from routerlab.features.registry import Encoder, default_encoder, encoder, encoders, get_encoder

__all__ = [
    "CacheWarning",
    "Encoder",
    "Features",
    "VectorCache",
    "default_cache_dir",
    "default_encoder",
    "encode",
    "encode_pair",
    "encoder",
    "encoders",
    "get_encoder",
]
