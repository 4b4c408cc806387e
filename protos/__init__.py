"""The NNRt HDI v2.1 in protobuf, and the Python modules generated from it."""
