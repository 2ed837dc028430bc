"""Components a test needs: skipped on a developer machine that lacks them, a failure in CI
(`CI=true`), where `.ci/run` installs every one of them and a skip would hide a problem.

Every skip of the suite goes through this module (tests/test_no_raw_skips.py keeps it so)."""

from __future__ import annotations

import importlib
import os
from types import ModuleType

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def require(available: bool, reason: str) -> None:
    if available:
        return
    if in_ci():
        pytest.fail(f"{reason} (CI installs it; this must not be skipped)")
    pytest.skip(reason)


def require_module(name: str) -> ModuleType:
    """The module `name`, imported; a skip (a failure in CI) when it cannot be imported."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        require(False, f"cannot import {name}: {exc}")
        raise  # not reached: require() skips or fails
