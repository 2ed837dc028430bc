"""A metastore client that fails over among several servers while it is used.

``connect_failover`` (the CLI and the streaming client use it) returns a client that fails
over during its life, the way Hive's ``RetryingMetaStoreClient`` over ``HiveMetaStoreClient``
does (2.3: RetryingMetaStoreClient.invoke,
HiveMetaStoreClient.open and reconnect): a call that fails on the connection is retried
``failure_retries`` times (``hive.metastore.failure.retries``, 1), each after
``retry_delay`` seconds (``hive.metastore.client.connect.retry.delay``, 1 s) and a
reconnect that first swaps the first URI with a random other one (the first is likely
the one that died) and then tries them in order, ``connect_retries`` rounds
(``hive.metastore.connect.retries``, 3). Retried: transport and protocol errors, a
``TApplicationException`` other than types 1, 3, 9 and 10, and a ``MetaException``
naming a JDO, TProtocol or TTransport exception; never ``lock`` (``IMetaStoreClient.lock``
is ``@RetrySemantics.CannotRetry``: a retried lock would enqueue a second one). With
``lifetime`` (``hive.metastore.client.socket.lifetime``, off by default) a call first
reconnects, the same way, once the connection is that old: clients spread over the
servers again after a failover moved them all to one.
"""

from __future__ import annotations

import logging
import random
import re
import time
from typing import Any

from thrift.Thrift import TApplicationException
from thrift.protocol.TProtocol import TProtocolException
from thrift.transport import TTransport

from hms_txn.wire.client import (ClientOptions, Endpoint, MetastoreClient,
                                 MetastoreUnreachable, connect, describe, parse_uris)
from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore
from hms_txn.wire.thrift_gen.hive_metastore.ttypes import MetaException

log = logging.getLogger(__name__)


def connect_failover(uri: str | list[Endpoint], *, options: ClientOptions = ClientOptions(),
                     failure_retries: int = 1, retry_delay: float = 1.0,
                     connect_retries: int = 3, lifetime: float = 0.0) -> "FailoverClient":
    """A client connected like ``connect`` that keeps failing over to the other URIs while
    it is used (see the module docstring). Raises ``MetastoreUnreachable`` when no URI
    accepts in ``connect_retries`` rounds, ``ValueError`` for a malformed URI."""
    endpoints = list(uri) if isinstance(uri, list) else parse_uris(uri)
    return FailoverClient(endpoints, options, failure_retries=failure_retries,
                          retry_delay=retry_delay, connect_retries=connect_retries,
                          lifetime=lifetime)


# TApplicationException types RetryingMetaStoreClient rethrows at once: UNKNOWN_METHOD,
# WRONG_METHOD_NAME, and 9 and 10 (unsupported client type, loadshedding).
_FINAL_APPLICATION_ERRORS = frozenset({1, 3, 9, 10})
_RETRIED_META_ERROR = re.compile(r"(JDO[a-zA-Z]*|TProtocol|TTransport)Exception")
CANNOT_RETRY = frozenset({"lock"})
# The generated methods, and the ACID-aware table read our clients use (MetastoreClient).
_METHODS = frozenset(name for name in dir(ThriftHiveMetastore.Iface)
                     if not name.startswith("_")) | {"get_table_acid_aware"}


def retryable(err: BaseException) -> bool:
    """Whether Hive's RetryingMetaStoreClient reconnects and retries after ``err``."""
    if isinstance(err, TApplicationException):
        return err.type not in _FINAL_APPLICATION_ERRORS
    if isinstance(err, MetaException):
        return bool(_RETRIED_META_ERROR.search(err.message or ""))
    return isinstance(err, (TTransport.TTransportException, TProtocolException, OSError,
                            EOFError))


class FailoverClient:
    """The metastore's Thrift methods over a connection that is replaced, and the call
    retried, when the server behind it goes away (``connect_failover``). Not thread-safe,
    like the generated client."""

    def __init__(self, endpoints: list[Endpoint], options: ClientOptions, *,
                 failure_retries: int = 1, retry_delay: float = 1.0, connect_retries: int = 3,
                 lifetime: float = 0.0):
        self.endpoints = list(endpoints)
        self.options = options
        self.failure_retries = failure_retries
        self.retry_delay = retry_delay
        self.connect_retries = max(1, connect_retries)
        self.lifetime = lifetime
        self.failovers = 0          # reconnects after a failed call
        self.client: MetastoreClient = self._open()
        self._connected_at = time.monotonic()

    def _open(self) -> MetastoreClient:
        for round_ in range(self.connect_retries):
            try:
                return connect(self.endpoints, options=self.options)
            except MetastoreUnreachable as err:
                if round_ == self.connect_retries - 1 or not err.transient:
                    raise
                time.sleep(self.retry_delay)
        raise AssertionError("unreachable")

    def reconnect(self) -> None:
        """Close, put a random other URI first, connect again (HiveMetaStoreClient.reconnect)."""
        self.client.close()
        if len(self.endpoints) > 1:
            other = random.randrange(1, len(self.endpoints))
            self.endpoints[0], self.endpoints[other] = self.endpoints[other], self.endpoints[0]
        self.client = self._open()
        self._connected_at = time.monotonic()

    @property
    def endpoint(self) -> Endpoint:
        return self.client.endpoint

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> "FailoverClient":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        if name not in _METHODS:
            raise AttributeError(name)
        return lambda *args, **kwargs: self.call(name, *args, **kwargs)

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        if self.lifetime and time.monotonic() - self._connected_at > self.lifetime:
            self.reconnect()
        retries = 0
        while True:
            try:
                return getattr(self.client, name)(*args, **kwargs)
            except Exception as err:
                if (name in CANNOT_RETRY or retries >= self.failure_retries
                        or not retryable(err)):
                    raise
                retries += 1
                log.info("metastore call %s failed (%s); reconnecting and retrying",
                            name, describe(err))
                time.sleep(self.retry_delay)
                self.reconnect()
                self.failovers += 1
