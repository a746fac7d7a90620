"""Protocols: each wires data, features, routers and metrics into one reproducible result record."""
