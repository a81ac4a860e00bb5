"""Template tags of the memory back office."""
