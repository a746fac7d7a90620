"""Metrics: pure functions of arrays (SPEC 4-6), each documented with the SPEC section it implements."""
