"""Checks: quiz (to be written)."""
