"""The grading service: students submit notebooks from JupyterLab and get the per-part table back.

`python -m grader serve` (grader/service/serve.py) runs it; `python -m grader tokens` exports
the per-student tokens (tokens.py). app.py is the HTTP API on tornado, store.py keeps every
attempt on disk, grading.py grades with the same sandbox and checks as `autograde`.
"""
