"""Vendor-specific database pieces: the migration operation, meta rows, purge and scan helpers."""
