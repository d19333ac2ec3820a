"""The grading service. Importing this package (or runner.client / runner.embedded) never imports torch."""

__version__ = "0.1.0"
