"""The typed client core: what every front end (the OH_NN* C API in `capi/`, the Pythonic API
in `api/`, the command line in `commands/`) is built on; it never imports them.

* `errors` — OH_NN return codes and the exception hierarchy that carries them;
* `device` — devices, their registry, `find_device` (one set of rules for naming a device);
* `embedded` — the embedded default drivers;
* `driver` — one session with one driver process (`DriverClient`, `RunTicket`);
* `buffer` — shared memory both sides map (`SharedMemory`);
* `compiler` — compiling a model for a device, the cache kept for recovery;
* `prepared_model` — a compiled model on its device, prepared again after a restart;
* `execution` — runs: synchronous, asynchronous, cancelled, output shapes from the driver;
* `model_cache` — the compilation cache's format.

Modules are imported by name (`from nnrt.client.core.errors import NNRtError`); this package
imports nothing on its own.
"""
