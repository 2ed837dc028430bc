"""Components a test needs: skipped on a developer machine that lacks them, a failure in CI
(`CI=true`), where `.ci/run` installs every one of them and a skip would hide a problem."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() == "true"


def require(available: bool, reason: str) -> None:
    if available:
        return
    if in_ci():
        pytest.fail(f"{reason} (CI installs it; this must not be skipped)")
    pytest.skip(reason)
