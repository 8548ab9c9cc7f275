"""A package whose rngtrace entry points cannot be used (see ../pyproject.toml)."""
