"""CheckSource: validate the source notebook and remember its digest for StampBuild."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from grader.build.context import RESOURCES_KEY, context, source_label
from grader.build.digest import source_digest
from grader.build.source import validate_source


class CheckSource(NbGraderPreprocessor):
    """Refuse a source notebook that breaks docs/notebooks.md or disagrees with course.yml."""

    def preprocess(self, nb, resources):
        _, assignment, source_dir = context(resources)
        validate_source(nb, assignment, source_label(resources, assignment))
        resources[RESOURCES_KEY]["digest"] = source_digest(nb, assignment, source_dir)
        return nb, resources
