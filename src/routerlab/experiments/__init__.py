"""Experiments as files: a TOML file declares tables x routers x protocols x seeds x settings
(:mod:`routerlab.experiments.schema`), the runner expands it into cells and runs them through an executor
(:mod:`routerlab.execute`), and every metric of every cell lands in a DuckDB results store
(:mod:`routerlab.experiments.store`) that SQL can query. A rerun reuses finished cells.
"""
