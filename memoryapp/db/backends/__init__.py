"""Database backends of memoryapp: Django's own, with what its hot paths need changed."""
