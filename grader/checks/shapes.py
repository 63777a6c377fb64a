"""Checks: shapes (to be written)."""
