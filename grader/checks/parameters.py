"""Checks: parameters (to be written)."""
