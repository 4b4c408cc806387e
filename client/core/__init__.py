"""The typed client core: what every front end (the OH_NN* C API in `capi/`, the Pythonic API
in `api.py`, the command line in `commands/`) is built on.

* `errors` — OH_NN return codes and the exception hierarchy that carries them.

Modules are imported by name (`from .errors import NNRtError`); this
package imports nothing on its own, so that the C API's modules can build on it freely.
"""
