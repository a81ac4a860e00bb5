"""The API views (docs/behaviour.md §13), one module per resource; shared parts in ``base``."""
