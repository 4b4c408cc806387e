"""The lowerings: one `lower_<name>.py` module per operator (or tight family).

Importing this package imports every `lower_*` module, whose `@lowers` decorators fill
`nnrt.drivers.cpu.ort.lowering.LOWERINGS`.
"""

import importlib
import pkgutil

for _module in pkgutil.iter_modules(__path__):
    if _module.name.startswith("lower_"):
        importlib.import_module(f"{__name__}.{_module.name}")
