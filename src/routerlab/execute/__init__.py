"""Executors: run many independent tasks (sweep cells, audit pieces) in this process, in local worker
processes, or on a Dask cluster, behind one small interface (:class:`routerlab.execute.base.Executor`).

This package is plumbing: it imports nothing else of routerlab but :mod:`routerlab.errors`, so every
layer may use it.
"""
