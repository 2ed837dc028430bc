"""The handler the generated Thrift code calls, assembled from the service classes.

Each Thrift method is served by the first service object that defines it (services are
plain classes, one per concern, each typed with what it needs); ``fallback`` (extension
mode's forwarding to the upstream metastore) answers the methods none defines. Wrapped in
``DeclaredErrors``, which maps domain errors to the exceptions each method declares, it
becomes the handler of a ``Dispatcher`` (``hms_txn.wire.dispatch``), which also routes the
methods that have a wire variant (``idl/wire_variants.thrift``) to their own generated
code.

``ServiceRouter`` is what the event-loop server asks about each call it frames: the
call's route, and a unit of work around a batch of transaction calls.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable, Iterator, Sequence

from hms_txn.service.errors import DeclaredErrors
from hms_txn.service.units import (DEFAULT_POLICY, CallPolicy, UnitOfWork, WriterBusy,
                                   policy_of)
from hms_txn.wire.dispatch import Dispatcher, process_functions
from hms_txn.wire.event_loop import BatchBusy, Route
from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore
from hms_txn.wire.thrift_gen.wire_variants import FieldPresence, Hive2OpenTxns
from hms_txn.wire.thrift_gen.wire_variants import ttypes as variant_types


class Handler:
    """Method lookup over the service objects (see the module docstring)."""

    def __init__(self, services: Sequence[object], fallback: object | None = None,
                 arguments: Callable[[str, Callable[..., Any]], Callable[..., Any]] | None = None):
        """``arguments(method, target)``: the target as called, with its arguments
        prepared (``catalog_names.CatalogNames.wrap``); None calls targets as they are."""
        self._methods: dict[str, Callable[..., Any]] = {}
        self._arguments = arguments or (lambda _method, target: target)
        for service in services:
            for name in dir(type(service)):
                if name.startswith("_") or name in self._methods:
                    continue
                if callable(getattr(type(service), name)):
                    self._methods[name] = self._arguments(name, getattr(service, name))
        self._fallback = fallback

    def __getattr__(self, method: str) -> Callable[..., Any]:
        if method.startswith("_"):
            raise AttributeError(method)
        target = self._methods.get(method)
        if target is None and self._fallback is not None:
            target = getattr(self._fallback, method, None)
            if target is not None:
                target = self._arguments(method, target)
        if target is None:
            raise AttributeError(method)
        return target

    def methods(self) -> frozenset[str]:
        """The methods the services define (not the fallback's)."""
        return frozenset(self._methods)

    def unknown_methods(self) -> frozenset[str]:
        """The methods marked ``answered_as_unknown``."""
        return frozenset(name for name, target in self._methods.items()
                         if getattr(target, "unknown_to_clients", False))

    def policy(self, method: str) -> CallPolicy:
        target = self._methods.get(method)
        return DEFAULT_POLICY if target is None else policy_of(target)


def answered_as_unknown(method: Callable[..., Any]) -> Callable[..., Any]:
    """Mark a service method that clients must see as absent: the dispatcher answers its
    calls with ``TApplicationException(UNKNOWN_METHOD)``, what the generated code answers
    for a method it does not know, without running it (and without the traceback the
    generated code logs for an exception raised by a handler)."""
    method.unknown_to_clients = True  # type: ignore[attr-defined]
    return method


class _Hive2OpenTxns:
    """``get_open_txns`` answered in Hive 2.x's shape (``hms_txn.hive2.open.txns.as.set``).
    Hive 2.3's Java client (Spark's ``HiveMetaStoreClient.getValidTxns``) reads field 2 only
    as a set: it skips the 3.x+ list and then fails with "Required field 'open_txns' is
    unset!". Hive 3/4 clients and Trino read only the list, so the 2.x shape is opt-in."""

    def __init__(self, handler: Any):
        self._handler = handler

    def get_open_txns(self):
        resp = self._handler.get_open_txns()
        return variant_types.GetOpenTxnsResponseHive2(
            txn_high_water_mark=resp.txn_high_water_mark, open_txns=set(resp.open_txns),
            min_open_txn=resp.min_open_txn)


def build_dispatcher(handler: Handler, *, metrics: Any = None,
                     hive2_open_txns: bool = False) -> Dispatcher:
    """The dispatcher serving ``handler``: the main service's generated code, with
    ``lock`` and ``commit_txn`` decoded with field presence (their requests' optional
    booleans read None when not sent) and, if asked, Hive 2.x's ``get_open_txns``."""
    declared = DeclaredErrors(handler, metrics)
    variants = process_functions(FieldPresence.Processor(declared), ["lock", "commit_txn"])
    if hive2_open_txns:
        variants.update(process_functions(Hive2OpenTxns.Processor(_Hive2OpenTxns(declared)),
                                          ["get_open_txns"]))
    return Dispatcher(ThriftHiveMetastore.Processor(declared), variants,
                      unknown=handler.unknown_methods())


class ServiceRouter:
    """The event loop's view of the service layer (``hms_txn.wire.event_loop.CallRouter``)."""

    def __init__(self, handler: Handler, units: UnitOfWork, *, inline_reads: bool = True):
        self._handler = handler
        self._units = units
        self._routes: dict[str, Route] = {}
        self._inline_reads = inline_reads

    def route(self, method: str) -> Route:
        found = self._routes.get(method)
        if found is None:
            found = self._handler.policy(method).route
            if found is Route.INLINE and not self._inline_reads:
                found = Route.POOL
            self._routes[method] = found
        return found

    @contextlib.contextmanager
    def batch(self, methods: Sequence[str], *, wait: bool) -> Iterator[None]:
        try:
            with self._units.batch([self._handler.policy(m).durability for m in methods],
                                   wait=wait):
                yield
        except WriterBusy:
            raise BatchBusy() from None
