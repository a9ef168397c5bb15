"""Fixtures of the agent tests."""

from __future__ import annotations

import uuid

import pytest


@pytest.fixture
def agent_id() -> str:
    """A fresh agent id for the test."""
    return f"agent-{uuid.uuid4().hex[:8]}"
