"""The ``agent-env`` command line (click); commands live in ``*_cmd`` modules."""
