"""The wheel carries the app only: the checkout's Django project stays out of it."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_wheel_packages_are_the_app_only():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    include = config["tool"]["setuptools"]["packages"]["find"]["include"]
    assert include == ["memoryapp*"]
    assert not any(pattern.startswith("project") for pattern in include)
