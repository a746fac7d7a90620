"""Reports: the audit, its sections, progress and atomic outputs."""
