"""Replaying an engine's metastore calls over Thrift, step by step.

A ``Step`` is one call an engine sends for a statement: the Thrift method, its arguments
(built as the engine's source builds them), the answer the engine goes on with
(``Expect``) and where in the engine's source the call is made (``cite``). ``Session.replay``
sends the steps in order over a real connection and checks every answer. It does not
stop at the first wrong answer: it goes on with the steps that do not need the failed
step's result, and fails the test with one line per step that went wrong, so a run
shows everything a statement still lacks.

Arguments are a tuple, or a function of the replay's state (``dict``) when they depend
on an earlier answer: a step with ``save="name"`` stores its answer there, e.g. the
transaction id of ``open_txns`` for the ``lock`` and ``commit_txn`` that follow. A step
whose arguments need the answer of a step that failed is reported as not sent.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import pytest
from thrift.Thrift import TApplicationException
from thrift.transport.TTransport import TTransportException

Args = tuple | Callable[[dict], tuple]


@dataclass(frozen=True)
class Answer:
    """What one call came back with: a value, or the exception the client raised."""
    value: Any = None
    error: BaseException | None = None

    def describe(self) -> str:
        if self.error is None:
            return f"returned {short(self.value)}"
        return f"raised {describe_error(self.error)}"


def describe_error(err: BaseException) -> str:
    if isinstance(err, TApplicationException):
        return f"TApplicationException(type={err.type}, {err.message!r})"
    message = getattr(err, "message", None) or str(err)
    return f"{type(err).__name__}({message!r})"


def short(value: Any, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "..."


class Expect:
    """An answer the engine goes on with; ``problem`` says why an answer is not one."""

    def problem(self, answer: Answer, state: dict) -> str | None:
        raise NotImplementedError

    def describe(self) -> str:
        raise NotImplementedError


Check = Callable[[Any, dict], None]


class Returns(Expect):
    """The call returns (no exception) and every check holds on the value. A check is a
    function ``(value, state)`` that raises AssertionError with the reason."""

    def __init__(self, *checks: Check):
        self.checks = checks

    def problem(self, answer, state):
        if answer.error is not None:
            return f"expected a normal answer, {answer.describe()}"
        for check in self.checks:
            try:
                check(answer.value, state)
            except AssertionError as err:
                return f"answer {short(answer.value)}: {err}"
        return None

    def describe(self):
        return "returns"


class Raises(Expect):
    """The call raises one of the declared exceptions the engine catches (by class name,
    so that it holds for every generated binding), optionally with a text in its
    message."""

    def __init__(self, *names: str, message_contains: str | None = None):
        self.names = names
        self.message_contains = message_contains

    def problem(self, answer, state):
        err = answer.error
        if err is None:
            return f"expected {' or '.join(self.names)}, {answer.describe()}"
        if type(err).__name__ not in self.names:
            return f"expected {' or '.join(self.names)}, {answer.describe()}"
        text = getattr(err, "message", None) or str(err)
        if self.message_contains is not None and self.message_contains not in (text or ""):
            return (f"expected a message containing {self.message_contains!r}, "
                    f"{answer.describe()}")
        return None

    def describe(self):
        return "raises " + " or ".join(self.names)


class OneOf(Expect):
    """Any of the answers is one the engine goes on with (e.g. a normal answer, or the
    NoSuchObjectException it catches and ignores)."""

    def __init__(self, *expects: Expect):
        self.expects = expects

    def problem(self, answer, state):
        problems = [e.problem(answer, state) for e in self.expects]
        return None if None in problems else problems[0]

    def describe(self):
        return " or ".join(e.describe() for e in self.expects)


class UnknownMethod(Expect):
    """``TApplicationException`` UNKNOWN_METHOD or WRONG_METHOD_NAME: what Hive's client
    turns into a fall-back (``HiveMetaStoreClient.rethrowException``)."""

    TYPES = (TApplicationException.UNKNOWN_METHOD, TApplicationException.WRONG_METHOD_NAME)

    def problem(self, answer, state):
        err = answer.error
        if isinstance(err, TApplicationException) and err.type in self.TYPES:
            return None
        return ("expected TApplicationException UNKNOWN_METHOD/WRONG_METHOD_NAME, "
                f"{answer.describe()}")

    def describe(self):
        return "TApplicationException UNKNOWN_METHOD"


class AnyAnswer(Expect):
    """The engine logs and ignores whatever comes back; only a broken connection counts."""

    def problem(self, answer, state):
        if isinstance(answer.error, TTransportException):
            return f"the connection broke: {answer.describe()}"
        return None

    def describe(self):
        return "any answer"


# --------------------------------------------------------------------------- checks

def _get(value: Any, path: str) -> Any:
    for part in path.split("."):
        if isinstance(value, (list, tuple)):
            value = value[int(part)]
        elif isinstance(value, dict):
            value = value[part]
        else:
            value = getattr(value, part)
    return value


def fields_set(*paths: str) -> Check:
    """Each dotted path (``"sd.location"``, ``"partitions.0.values"``) is set (not None):
    the fields the engine reads from the answer."""
    def check(value, state):
        missing = []
        for path in paths:
            try:
                if _get(value, path) is None:
                    missing.append(path)
            except (AttributeError, IndexError, KeyError, TypeError):
                missing.append(path)
        assert not missing, f"fields the engine reads are unset: {', '.join(missing)}"
    return check


def equals(path: str | None, expected: Any | Callable[[dict], Any]) -> Check:
    """The value (or the field at ``path``) equals ``expected`` (a function of the state
    when it depends on earlier answers)."""
    def check(value, state):
        want = expected(state) if callable(expected) else expected
        try:
            got = value if path is None else _get(value, path)
        except (AttributeError, IndexError, KeyError, TypeError):
            raise AssertionError(f"the answer has no {path}") from None
        assert got == want, f"{path or 'answer'} is {short(got)}, expected {short(want)}"
    return check


def satisfies(text: str, predicate: Callable[[Any, dict], bool]) -> Check:
    """A condition on the value, described by ``text``."""
    def check(value, state):
        assert predicate(value, state), f"expected {text}"
    return check


# --------------------------------------------------------------------------- steps

@dataclass(frozen=True)
class Step:
    cite: str            # where the engine's source sends this call, and why the answer matters
    method: str
    args: Args
    expect: Expect
    save: str | None = None


@dataclass
class Failure:
    number: int
    step: Step
    problem: str

    def line(self) -> str:
        where = f"step {self.number}" if self.number else "on connect"
        return (f"{where} {self.step.method} [{self.step.cite}]\n"
                f"    expected: {self.step.expect.describe()}; {self.problem}")


@dataclass
class Session:
    """One engine's connection(s) to the server under test.

    ``connect`` opens a client of the binding the engine speaks; ``per_call`` opens a new
    connection for every call (Trino's ``ThriftHiveMetastore`` does); ``on_open`` are
    the steps the engine's client sends right after connecting (``set_ugi``)."""
    connect: Callable[[], Any]
    per_call: bool = False
    on_open: tuple[Step, ...] = ()
    client: Any = None
    failures: list[Failure] = field(default_factory=list)

    def _client(self, state: dict) -> Any:
        if self.client is None:
            self.client = self.connect()
            for step in self.on_open:
                self._send(self.client, step, state, 0)
        return self.client

    def close(self) -> None:
        if self.client is not None:
            close = getattr(self.client, "close", None) or self.client._iprot.trans.close
            try:
                close()
            except Exception:           # a connection the server already dropped
                pass
            self.client = None

    def _send(self, client: Any, step: Step, state: dict, number: int) -> Answer:
        try:
            args = step.args(state) if callable(step.args) else step.args
        except KeyError as missing:
            self.failures.append(Failure(number, step, (
                f"not sent: it needs {missing} from an earlier step that failed")))
            return Answer(error=KeyError(missing))
        try:
            answer = Answer(value=getattr(client, step.method)(*args))
        except TTransportException as err:
            answer = Answer(error=err)
            self.close()
        except Exception as err:        # every declared or application exception
            answer = Answer(error=err)
        problem = step.expect.problem(answer, state)
        if problem is not None:
            self.failures.append(Failure(number, step, problem))
        elif step.save is not None:
            state[step.save] = answer.value
        return answer

    def replay(self, *steps: Step | Iterable[Step], state: dict | None = None) -> dict:
        """Send the steps (nested lists are flattened) and fail the test listing every
        step whose answer the engine would not go on with."""
        state = {} if state is None else state
        flat = list(_flatten(steps))
        for number, step in enumerate(flat, 1):
            client = self._client(state)
            self._send(client, step, state, number)
            if self.per_call:
                self.close()
        if self.failures:
            failures, self.failures = self.failures, []
            pytest.fail(f"{len(failures)} of {len(flat)} steps are answered in a way the "
                        f"engine does not go on with:\n" +
                        "\n".join(f.line() for f in failures), pytrace=False)
        return state


def _flatten(items) -> Iterable[Step]:
    for item in items:
        if isinstance(item, Step):
            yield item
        else:
            yield from _flatten(item)
