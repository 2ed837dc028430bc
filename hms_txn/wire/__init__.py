"""The Thrift wire: generated bindings, the document codec, the client factory, server transports."""
