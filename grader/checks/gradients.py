"""Checks: gradients (to be written)."""
