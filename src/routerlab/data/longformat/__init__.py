"""The long format: one row per (query, actor) cell, read by streaming and written in blocks.

Columns (any order; more are ignored):

=============  ========  =====================================================================
column         needed    meaning
=============  ========  =====================================================================
query_id       yes       query id (strings; integers are read as their decimal text)
actor          yes       model / agent name
score          yes       in [0, 1]; empty / null / NaN = not observed
text           no        query text        \\
dataset        no        dataset (domain)   } per query: the first non-empty value wins; a later
split          no        split             /  different non-empty value is an error
tokens_in      no        per-cell numbers, finite and >= 0; empty = unknown
tokens_out     no
latency_s      no
cost_usd       no
propensity     no        logged feedback: the logging policy's probability of the row's actor,
                         finite and in (0, 1]; checked, then left out of the table (a table holds
                         outcomes, not how they were collected); :mod:`routerlab.data.logs` keeps it
=============  ========  =====================================================================

Files are CSV (``.csv``, ``.tsv``), JSON lines (``.jsonl``, ``.ndjson``, ``.json``; a ``.json`` holding
one JSON array is read whole) or Parquet (``.parquet``, ``.pq``), optionally compressed (``.gz``,
``.bz2``, ``.zst``, ``.lz4``) for the text formats. Several files make one table, e.g. ``train.csv``
and ``test.csv``; a file without a ``split`` column takes its split from a word of its name
(``routereval_test.parquet`` -> test). Actor attributes come from an optional side-file with columns
``actor`` (or ``name``), ``params_b``, ``ttft_ms``, ``itl_ms``, ``input_price``, ``output_price`` and
any extra columns, given as ``actors=PATH`` or as an input path named ``*.actors.<ext>``.

Other layouts come in by renaming columns, ``columns={"query_id": "prompt_id"}`` (canonical ->
file) or ``rename="prompt_id=query_id"`` (file -> canonical, handy on a command line):

- EmbedLLM (``train.csv`` / ``val.csv`` / ``test.csv``: ``prompt_id, model_id, label, model_name, ...``):
  ``rename="prompt_id=query_id,model_name=actor,label=score"``; the split comes from the file names.
- RouterEval performance records flattened to rows (benchmark, per-benchmark sample index, model,
  0/1 score), e.g. columns ``benchmark, sample_id, model, performance``:
  ``rename="benchmark=dataset,sample_id=query_id,model=actor,performance=score"`` with
  ``qualify_ids=True``, which makes the ids ``<dataset>/<sample_id>`` so that sample 0 of ARC and
  sample 0 of MMLU stay two queries.

Row numbers in errors are 1-based: CSV counts the header line (row 2 is the first record; a quoted
value that spans lines shifts the editor line), JSON lines gives the line number, Parquet the record.

Memory: the importer never holds the long table. Pass 1 reads only the id columns and collects the
query ids and actor names in order of first appearance; pass 2 maps each batch's ids to positions
(``pyarrow.compute.index_in`` on the batch's dictionary) and scatters its values into preallocated
float32 matrices. Peak memory is the matrices plus a few batches (about 0.3 GB at the default
``batch_rows``; 1.55 GB in all for RouterEval's 36,000 x 8,500). A file sorted query-major or
actor-major (as exported files usually are) cannot repeat a cell, which lets the duplicate checks
skip two of their four passes over each batch; other orders are checked in full.

Modules, one job each, lower ones never importing higher ones: ``columns`` (canonical names,
renaming, Arrow type conversions) < ``sources`` (file kinds, headers) < ``readers`` (batches per
file kind) < ``actors`` (the side-file) < ``ingest`` (:func:`read_long`) and ``writer``
(:func:`write_long`). File helpers shared with the importers come from :mod:`routerlab.data._files`.
"""

from routerlab.data.longformat.actors import actors_path_for, read_actors
from routerlab.data.longformat.columns import (
    CELL_FIELDS,
    LONG_COLUMNS,
    ON_DUPLICATE,
    PROPENSITY,
    QUERY_ATTRS,
    REQUIRED,
    column_map,
    parse_rename,
)
from routerlab.data.longformat.ingest import read_long
from routerlab.data.longformat.sources import is_actors_file
from routerlab.data.longformat.writer import write_long

__all__ = [
    "CELL_FIELDS",
    "LONG_COLUMNS",
    "ON_DUPLICATE",
    "PROPENSITY",
    "QUERY_ATTRS",
    "REQUIRED",
    "actors_path_for",
    "column_map",
    "is_actors_file",
    "parse_rename",
    "read_actors",
    "read_long",
    "write_long",
]
