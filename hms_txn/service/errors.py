"""Map domain errors to the exceptions each Thrift method declares.

Handler methods raise ``hms_txn.errors`` exceptions. ``DeclaredErrors`` wraps the handler
for the generated Processor: for every call it translates a domain error into the Thrift
exception the method declares for that kind of failure, falling back to the method's
``MetaException`` (or its first declared exception). An error the method cannot declare at
all becomes a ``TApplicationException`` carrying the message, never a bare internal error.
Unexpected failures (bugs, a lost database) are logged with their traceback and reported
the same way, so a client always gets a clear, declared answer.
"""

from __future__ import annotations

import functools
import logging
import time
from typing import Any, Callable

from thrift.Thrift import TApplicationException, TException

from hms_txn.common import errors, logs
from hms_txn.service import call_log
from hms_txn.wire.thrift_gen.fb303 import FacebookService
from hms_txn.wire.thrift_gen.hive_metastore import ThriftHiveMetastore, ttypes

log = logging.getLogger("hms_txn.handler")

_PREFERRED: dict[type, tuple[type, ...]] = {
    errors.NoSuchObject: (ttypes.NoSuchObjectException, ttypes.UnknownDBException,
                          ttypes.UnknownTableException),
    errors.AlreadyExists: (ttypes.AlreadyExistsException,),
    errors.InvalidObject: (ttypes.InvalidObjectException, ttypes.InvalidInputException,
                           ttypes.InvalidOperationException),
    errors.InvalidOperation: (ttypes.InvalidOperationException,),
    errors.InvalidInput: (ttypes.InvalidInputException, ttypes.InvalidObjectException),
    errors.NoSuchTxn: (ttypes.NoSuchTxnException,),
    errors.TxnAborted: (ttypes.TxnAbortedException,),
    errors.TxnOpen: (ttypes.TxnOpenException,),
    errors.NoSuchLock: (ttypes.NoSuchLockException,),
    errors.NoSuchCompaction: (ttypes.NoSuchCompactionException,),
}


# Methods whose exception ids changed between Hive 2.x and 3.x: a Hive 2.3 client (Spark)
# reads get_partition_names' id 1 as MetaException, 3.x+ as NoSuchObjectException, so
# anything sent at id 2 is lost on the older client. Sending every failure at id 1 gives
# both a declared exception with our message.
_SINGLE_ID: dict[str, type] = {
    "get_partition_names": ttypes.NoSuchObjectException,
}


def declared_exceptions(method: str) -> tuple[type, ...] | None:
    """Exception classes ``method`` declares, or None when we do not declare the method."""
    for module in (ThriftHiveMetastore, FacebookService):
        result = getattr(module, f"{method}_result", None)
        if result is not None:
            return tuple(spec[3][0] for spec in result.thrift_spec
                         if spec is not None and spec[2] != "success")
        if getattr(module, f"{method}_args", None) is not None:
            return ()  # oneway: no result struct
    return None


def translate(err: errors.MetastoreError, declared: tuple[type, ...],
              method: str | None = None) -> Exception:
    if method in _SINGLE_ID:
        return _SINGLE_ID[method](message=err.message)
    for kind in type(err).__mro__:      # a subclass is answered as its declared parent
        for cls in _PREFERRED.get(kind, ()):
            if cls in declared:
                return cls(message=err.message)
    if ttypes.MetaException in declared:
        return ttypes.MetaException(message=err.message)
    if declared:
        return declared[0](message=err.message)
    return TApplicationException(TApplicationException.INTERNAL_ERROR, err.message)


class DeclaredErrors:
    """Proxy handed to the generated Processor in place of the handler."""

    def __init__(self, handler: Any, metrics: Any = None):
        self._handler = handler
        self._metrics = metrics

    def __getattr__(self, method: str) -> Callable[..., Any]:
        declared = declared_exceptions(method)
        target = getattr(self._handler, method, None)
        if declared is None:
            if target is None:
                raise AttributeError(method)
            return target
        if target is None:
            message = f"{method} is not supported by hms-txn"

            def target(*_args: Any) -> Any:
                raise errors.Unsupported(message)

        metrics = self._metrics

        @functools.wraps(target)
        def call(*args: Any) -> Any:
            start = time.perf_counter()
            failure = None
            try:
                return target(*args)
            except errors.MetastoreError as err:
                failure = translate(err, declared, method)
                raise failure from None
            except TException as err:
                failure = err
                raise
            except Exception as err:  # a bug or an infrastructure failure
                log.exception("%s failed", method)
                failure = translate(errors.Internal(f"{method} failed: {type(err).__name__}: {err}"),
                                    declared, method)
                raise failure from None
            finally:
                if metrics is not None:
                    metrics.record(method, time.perf_counter() - start,
                                   type(failure).__name__ if failure is not None else None)

        level = call_log.TXN_CALLS.get(method)
        if level is not None:
            call = self._logged(method, level, call)
        setattr(self, method, call)  # cache: __getattr__ runs once per method
        return call

    @staticmethod
    def _logged(method: str, level: int, call: Callable[..., Any]) -> Callable[..., Any]:
        """A transaction call whose log records (its own and the domain's) carry its ids."""

        @functools.wraps(call)
        def logged(*args: Any) -> Any:
            start = time.perf_counter()
            failure = None
            with logs.bound(method=method, **call_log.request_ids(method, args)):
                try:
                    result = call(*args)
                    call_log.bind_response(method, result)
                    return result
                except BaseException as err:
                    failure = err
                    raise
                finally:
                    call_log.record(method, level, time.perf_counter() - start, failure)

        return logged
