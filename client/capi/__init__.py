"""`nnrt.client.capi`: the OH_NN* C API of OpenHarmony's Neural Network Runtime in Python.

Every function of `neural_network_core.h` and `neural_network_runtime.h` (75, including
the deprecated ones) under its exact C name, every enum as an IntEnum plus module-level
constants, the structs and the opaque handle classes — mapped as python-capi.md says.
Module per C object: enums, structs, quant_param, tensor_desc, model (+ operations),
compilation (+ model_cache), tensor, device, executor (+ deprecated).
"""

from __future__ import annotations

import importlib
import importlib.util

from nnrt.client.capi.enums import *  # noqa: F403
from nnrt.client.capi.enums import __all__ as _enum_names
from nnrt.client.capi.structs import *  # noqa: F403
from nnrt.client.capi.structs import __all__ as _struct_names

# The 75 functions in header order (capi.md sections 1 and 2).
C_FUNCTIONS: tuple[str, ...] = (
    # neural_network_core.h
    "OH_NNCompilation_Construct", "OH_NNCompilation_ConstructWithOfflineModelFile",
    "OH_NNCompilation_ConstructWithOfflineModelBuffer", "OH_NNCompilation_ConstructForCache",
    "OH_NNCompilation_ExportCacheToBuffer", "OH_NNCompilation_ImportCacheFromBuffer",
    "OH_NNCompilation_AddExtensionConfig", "OH_NNCompilation_SetDevice",
    "OH_NNCompilation_SetCache", "OH_NNCompilation_SetPerformanceMode",
    "OH_NNCompilation_SetPriority", "OH_NNCompilation_EnableFloat16", "OH_NNCompilation_Build",
    "OH_NNCompilation_Destroy",
    "OH_NNTensorDesc_Create", "OH_NNTensorDesc_Destroy", "OH_NNTensorDesc_SetName",
    "OH_NNTensorDesc_GetName", "OH_NNTensorDesc_SetDataType", "OH_NNTensorDesc_GetDataType",
    "OH_NNTensorDesc_SetShape", "OH_NNTensorDesc_GetShape", "OH_NNTensorDesc_SetFormat",
    "OH_NNTensorDesc_GetFormat", "OH_NNTensorDesc_GetElementCount", "OH_NNTensorDesc_GetByteSize",
    "OH_NNTensor_Create", "OH_NNTensor_CreateWithSize", "OH_NNTensor_CreateWithFd",
    "OH_NNTensor_Destroy", "OH_NNTensor_GetTensorDesc", "OH_NNTensor_GetDataBuffer",
    "OH_NNTensor_GetFd", "OH_NNTensor_GetSize", "OH_NNTensor_GetOffset",
    "OH_NNExecutor_Construct", "OH_NNExecutor_GetOutputShape", "OH_NNExecutor_Destroy",
    "OH_NNExecutor_GetInputCount", "OH_NNExecutor_GetOutputCount",
    "OH_NNExecutor_CreateInputTensorDesc", "OH_NNExecutor_CreateOutputTensorDesc",
    "OH_NNExecutor_GetInputDimRange", "OH_NNExecutor_SetOnRunDone",
    "OH_NNExecutor_SetOnServiceDied", "OH_NNExecutor_RunSync", "OH_NNExecutor_RunAsync",
    "OH_NNDevice_GetAllDevicesID", "OH_NNDevice_GetName", "OH_NNDevice_GetType",
    # neural_network_runtime.h
    "OH_NNQuantParam_Create", "OH_NNQuantParam_SetScales", "OH_NNQuantParam_SetZeroPoints",
    "OH_NNQuantParam_SetNumBits", "OH_NNQuantParam_Destroy",
    "OH_NNModel_Construct", "OH_NNModel_AddTensorToModel", "OH_NNModel_SetTensorData",
    "OH_NNModel_SetTensorQuantParams", "OH_NNModel_SetTensorType", "OH_NNModel_AddOperation",
    "OH_NNModel_SpecifyInputsAndOutputs", "OH_NNModel_Finish", "OH_NNModel_Destroy",
    "OH_NNModel_GetAvailableOperations", "OH_NNModel_AddTensor",
    "OH_NNExecutor_SetInput", "OH_NNExecutor_SetOutput", "OH_NNExecutor_Run",
    "OH_NNExecutor_AllocateInputMemory", "OH_NNExecutor_AllocateOutputMemory",
    "OH_NNExecutor_DestroyInputMemory", "OH_NNExecutor_DestroyOutputMemory",
    "OH_NNExecutor_SetInputWithMemory", "OH_NNExecutor_SetOutputWithMemory",
)

# One module per C object, imported in dependency order.
_MODULES = ("quant_param", "tensor_desc", "operations", "model", "model_cache", "compilation",
            "device", "tensor", "executor", "deprecated")

__all__: list[str] = [*_enum_names, *_struct_names, "C_FUNCTIONS"]

for _name in _MODULES:
    if importlib.util.find_spec(f"{__name__}.{_name}") is None:
        continue  # not there (yet): its functions are simply absent
    _module = importlib.import_module(f"{__name__}.{_name}")
    for _public in getattr(_module, "__all__", ()):
        globals()[_public] = getattr(_module, _public)
        if _public not in __all__:
            __all__.append(_public)

for _leftover in ("_name", "_module", "_public"):
    globals().pop(_leftover, None)
del _leftover
