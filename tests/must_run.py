"""What a test does when something it needs is missing: skip on a laptop, with the reason
and the fix; fail under ``CI=true``, where every test must run (.ci/run installs it all)."""

from __future__ import annotations

import os
from typing import NoReturn

import pytest


def in_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() in ("true", "1", "yes")


def unavailable(reason: str, *, module_level: bool = False) -> NoReturn:
    """Skip with ``reason`` (say the fix in it); under CI=true, fail with it."""
    if in_ci():
        pytest.fail(f"{reason} (CI=true: this test must run)", pytrace=False)
    pytest.skip(reason, allow_module_level=module_level)
