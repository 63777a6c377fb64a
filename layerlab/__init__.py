"""Course toolkit for students: helpers the notebooks use that are not part of any task."""
