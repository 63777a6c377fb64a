"""Checks: formulas (to be written)."""
