"""Checks: benchmark (to be written)."""
