"""Counting the metastore calls an in-process server runs: every generated process
function of its dispatcher wrapped while a test runs (``with CallRecorder(dispatcher)``
or ``restore()``), so a test shows which path a real client took."""

from __future__ import annotations

import threading
from collections import Counter


class CallRecorder:
    def __init__(self, dispatcher):
        self.calls: Counter = Counter()
        self._lock = threading.Lock()
        self._dispatcher = dispatcher
        self._original = dict(dispatcher.functions)
        dispatcher.functions.update({name: self._counting(name, fn)
                                     for name, fn in self._original.items()})

    def _counting(self, name, fn):
        def call(*args):
            with self._lock:
                self.calls[name] += 1
            return fn(*args)
        return call

    def restore(self) -> None:
        self._dispatcher.functions.update(self._original)

    def __enter__(self) -> "CallRecorder":
        return self

    def __exit__(self, *exc) -> None:
        self.restore()
