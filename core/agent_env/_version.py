"""The core's version: the single source hatch reads for the distribution's metadata."""

VERSION = "0.1.0"
