"""The build's own nbconvert preprocessors, one per module; grader.build.pipelines orders them."""
