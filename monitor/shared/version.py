"""The package version, importable by every layer (the package itself imports the pipeline)."""

__version__ = "0.1.0"
