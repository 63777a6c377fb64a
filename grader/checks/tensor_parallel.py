"""Checks: tensor_parallel (to be written)."""
