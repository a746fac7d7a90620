"""Audit report sections, one module each; every module here is imported by the audit."""
