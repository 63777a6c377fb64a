"""StampBuild: record the source digest in the generated notebook's metadata."""

from __future__ import annotations

from nbgrader.preprocessors import NbGraderPreprocessor

from grader.build.context import RESOURCES_KEY
from grader.build.digest import BUILD_KEY, BUILD_VERSION
from grader.build.source import BuildError


class StampBuild(NbGraderPreprocessor):
    """Write `metadata.layers_build` = {source_digest, build_version}; CheckSource computes the digest."""

    def preprocess(self, nb, resources):
        digest = resources.get(RESOURCES_KEY, {}).get("digest")
        if digest is None:
            raise BuildError("StampBuild needs CheckSource earlier in the pipeline")
        nb.metadata[BUILD_KEY] = {"source_digest": digest, "build_version": BUILD_VERSION}
        return nb, resources
