"""The project's date formats (``FORMAT_MODULE_PATH``): one format across the admin."""
