"""A tiny assignment for exercising the sandbox, and hostile submissions against it."""
