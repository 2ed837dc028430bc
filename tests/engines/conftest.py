"""Fixtures of the engine replays: a server (the suite's ``hms``, both backends) and the
client our set-up uses (``client``); each engine module builds its own ``Session``."""

from __future__ import annotations

import pytest

from tests.engines.replay import Session
from tests.support.servers import connect


@pytest.fixture
def hive4_session(hms):
    """A session factory over our generated client (the Hive 4 IDL)."""
    sessions: list[Session] = []

    def make(**kwargs) -> Session:
        session = Session(connect=lambda: connect(hms.port), **kwargs)
        sessions.append(session)
        return session

    yield make
    for session in sessions:
        session.close()
