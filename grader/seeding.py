"""Per-student, per-part random inputs, reproducible from the course secret."""

from __future__ import annotations

import hashlib
import hmac
import os

import numpy as np

DEFAULT_SECRET_ENV = "LAYERS_GRADER_SECRET"
PUBLIC_SECRET = "public-self-check"


def grading_secret(env_var: str = DEFAULT_SECRET_ENV) -> str:
    """The course secret from the environment; self-study falls back to a public value."""
    return os.environ.get(env_var) or PUBLIC_SECRET


def rng_for(secret: str, student: str, part_id: str) -> np.random.Generator:
    """A generator seeded by HMAC-SHA256(secret, student/part): same inputs, same numbers."""
    digest = hmac.new(secret.encode(), f"{student}/{part_id}".encode(), hashlib.sha256).digest()
    return np.random.default_rng(int.from_bytes(digest[:16], "little"))
