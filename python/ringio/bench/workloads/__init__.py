"""Workload modules: each exposes ``NAME`` and ``run(options) -> WorkloadResult``."""
