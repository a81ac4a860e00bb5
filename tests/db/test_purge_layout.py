"""db/purge/ is a package by vendor: each name lives in one module, none is re-exported."""

import importlib
import pkgutil

import memoryapp.db.purge as package

MODULES = {
    "common",  # the outcome, the structural checks, the files to scan, the vendor interface
    "pg_files",  # which PostgreSQL files a byte scan reads (the connected server's, read here)
    "postgresql",  # PostgreSQL's purge
    "repack",  # running pg_repack
    "scan",  # the byte scan of files this process reads
    "sql_scan",  # the byte scan through SQL (pg_read_binary_file), where the files are not here
    "sqlite",  # SQLite's purge
    "vendors",  # the implementation for a connection
}


def test_the_package_holds_one_module_per_concern_and_exports_nothing():
    found = {info.name for info in pkgutil.iter_modules(package.__path__)}
    assert found == MODULES
    public = {
        name
        for name, value in vars(package).items()
        if not name.startswith("_") and name not in MODULES
    }
    assert public == set(), public


def test_every_vendor_is_served_and_an_unknown_one_fails_loudly():
    from django.db import NotSupportedError

    vendors = importlib.import_module("memoryapp.db.purge.vendors")
    assert set(vendors.VENDORS) == {"sqlite", "postgresql"}

    class Oracle:
        vendor = "oracle"

    try:
        vendors.for_connection(Oracle())
    except NotSupportedError as exc:
        assert "oracle" in str(exc) and "postgresql, sqlite" in str(exc)
    else:
        raise AssertionError("an unsupported vendor must be refused")
