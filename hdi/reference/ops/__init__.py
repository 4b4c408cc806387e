"""The CPU operators: one `op_<name>.py` module per operator (or tight family).

Importing this package imports every `op_*` module, whose `@register` decorators fill
`nnrt.hdi.reference.kernel.KERNELS`.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    if _module.name.startswith("op_"):
        importlib.import_module(f"{__name__}.{_module.name}")
