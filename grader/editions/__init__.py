"""Editions of the course: what students and self-study learners get (`python -m grader release-student`)."""
