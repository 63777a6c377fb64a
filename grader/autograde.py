"""`python -m grader autograde`."""


def add_arguments(parser):
    pass


def run(args):
    raise SystemExit("python -m grader autograde: not available yet")
