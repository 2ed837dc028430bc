"""The differential tests' common step: one call sequence run against our server and the
Java metastore 2.3, its outcomes paired call by call."""

from __future__ import annotations

from typing import Any, Callable

from tests.support.servers import connect


def paired_outcomes(run_sequence: Callable[[Any], list], our_port: int,
                    java_port: int) -> list[tuple[str, Any, Any]]:
    """(call name, our outcome, Java's) for each call of ``run_sequence``; both servers
    must have been asked the same calls in the same order."""
    ours, theirs = connect(our_port), connect(java_port)
    try:
        got, want = run_sequence(ours), run_sequence(theirs)
    finally:
        ours.close()
        theirs.close()
    assert [n for n, _ in got] == [n for n, _ in want]
    return [(name, mine, java) for (name, mine), (_, java) in zip(got, want)]
