"""Exit 0 when the PostgreSQL server of the given URL answers, else 1 (used by `make test`)."""

import sys
from urllib.parse import urlsplit

import psycopg


def main(url: str) -> int:
    """Try to connect to the server's maintenance database."""
    parts = urlsplit(url)
    dsn = parts._replace(path="/postgres").geturl()
    try:
        with psycopg.connect(dsn, connect_timeout=3):
            return 0
    except psycopg.Error as exc:
        print(f"PostgreSQL check failed: {exc}".strip(), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
