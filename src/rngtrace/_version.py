"""The one place rngtrace's version is written: pyproject.toml and the package read it from here."""

__version__ = "0.1.0"
