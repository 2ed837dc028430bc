"""Dispatching a call to the generated code that decodes, runs and answers it.

The generated ``Processor`` of a Thrift service has one ``process_<method>`` function per
method: it reads the arguments, calls the handler and writes the result or the declared
exception. ``Dispatcher`` picks that function by method name, from the main service's
processor or, for the few methods that have one, from a *wire variant* declared in
``idl/wire_variants.thrift`` (the same method on the wire, decoded or answered in another
shape). Both servers use it: the thread-per-connection server through ``process`` (the
``TProcessor`` interface), the event loop through ``process_call`` with the message header
it has already parsed.

A method no processor knows is answered as the generated code answers it:
``TApplicationException(UNKNOWN_METHOD)`` after skipping its arguments.
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from thrift.Thrift import TApplicationException, TMessageType, TType

ProcessFunction = Callable[[int, Any, Any], None]


def process_functions(processor: Any, methods: Iterable[str] | None = None) -> dict[str, ProcessFunction]:
    """The bound ``process_<method>`` functions of a generated processor (all of them, or
    those of ``methods``)."""
    names = methods if methods is not None else [
        n[len("process_"):] for n in dir(type(processor)) if n.startswith("process_")]
    return {name: getattr(processor, "process_" + name) for name in names}


class Dispatcher:
    """Runs calls through generated process functions (see the module docstring)."""

    def __init__(self, processor: Any, variants: dict[str, ProcessFunction] | None = None,
                 unknown: Iterable[str] = ()):
        """``unknown``: methods answered as if no processor knew them."""
        self.functions = process_functions(processor)
        self.functions.update(variants or {})
        for name in unknown:
            self.functions.pop(name, None)

    def process(self, iprot: Any, oprot: Any) -> None:
        """Read one call from ``iprot`` and answer it on ``oprot``."""
        name, _mtype, seqid = iprot.readMessageBegin()
        self.process_call(name, seqid, iprot, oprot)

    def process_call(self, name: str, seqid: int, iprot: Any, oprot: Any) -> None:
        """Answer the call ``name`` whose message header has been read already."""
        function = self.functions.get(name)
        if function is not None:
            function(seqid, iprot, oprot)
            return
        iprot.skip(TType.STRUCT)
        iprot.readMessageEnd()
        error = TApplicationException(TApplicationException.UNKNOWN_METHOD,
                                      f"Unknown function {name}")
        oprot.writeMessageBegin(name, TMessageType.EXCEPTION, seqid)
        error.write(oprot)
        oprot.writeMessageEnd()
        oprot.trans.flush()
