"""Differential fuzzing of the rewrite: random kernels that consume atomic returns, checked against the original."""
