"""Grader for the neural-network layers course: reference implementation, per-part checks, autograding."""

__version__ = "0.1.0"
