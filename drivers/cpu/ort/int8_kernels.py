"""Which of onnxruntime's int8 kernels compute exactly on this CPU, decided once per process.

onnxruntime multiplies quantised matrices (QLinearConv, QLinearMatMul, MatMulInteger …) in
one of two forms on x86-64:

* **u8s8**: uint8 activations × int8 weights. Without VNNI its AVX2 / AVX-512BW kernels
  multiply with `vpmaddubsw`, which adds two uint8×int8 products into an int16 *with
  saturation*: full-range int8 weights overflow it, and results come out several
  quantisation steps off (onnxruntime's quantisation documentation warns about exactly
  this). With AVX512-VNNI or AVX-VNNI (`vpdpbusd`, int32 accumulation) it is exact.
* **s8s8**: int8 activations × int8 weights, sign-extended to int16 and multiplied with
  `vpmaddwd` (int32 sums): exact on every x86-64 CPU; slower than u8s8 with VNNI.

ARM's kernels (widening multiplies, SDOT/UDOT) are exact in either form.

The driver keeps u8s8 — our `unsigned_activations` rewrite and onnxruntime's own QDQ
s8→u8 conversion — only where it is exact, and s8s8 elsewhere: no unsigned rewrite, and
`session.qdqisint8allowed` so that onnxruntime fuses the int8 QDQ pairs as they are.
`--int8-kernels` / `$NNRT_ORT_INT8_KERNELS` force a form (the test suite runs both on
every machine, and the default on an emulated CPU without VNNI:
tests/drivers/cpu/ort/test_int8_kernels.py).

What is detected is also checked, once per process: a full-range int8 product in the
chosen form against int64 arithmetic (`inexact`); a form that fails it gives way to the
next (u8s8 → s8s8 → numpy: the quantised nodes on the numpy kernels), logged as an error.

The CPU is read with CPUID itself (what onnxruntime's MLAS reads), not /proc/cpuinfo: under
an emulator (qemu-user) /proc/cpuinfo describes the host, CPUID the emulated CPU.
"""

from __future__ import annotations

import ctypes
import enum
import functools
import logging
import mmap
import os
import platform
import threading
from dataclasses import dataclass

import numpy as np

log = logging.getLogger(__name__)

ENV = "NNRT_ORT_INT8_KERNELS"
CHOICES = ("auto", "u8s8", "s8s8", "numpy")


class Int8Form(enum.Enum):
    U8S8 = "u8s8"
    S8S8 = "s8s8"
    NUMPY = "numpy"  # neither is exact here: quantised nodes run on the numpy kernels


@dataclass(frozen=True)
class Int8Kernels:
    """The form in force and why (the start log, the admin details, `nnrt devices`)."""

    form: Int8Form
    reason: str
    forced: bool = False

    @property
    def unsigned_activations(self) -> bool:
        """Whether int8 activations are presented to onnxruntime as uint8."""
        return self.form is Int8Form.U8S8

    @property
    def lowered(self) -> bool:
        """Whether quantised nodes go to onnxruntime at all."""
        return self.form is not Int8Form.NUMPY

    def describe(self) -> str:
        return f"{self.form.value} ({'forced: ' if self.forced else ''}{self.reason})"


# ---------------------------------------------------------------------------- the CPU

# uint32 cpuid(uint32 leaf /*edi*/, uint32 subleaf /*esi*/, uint32 out[4] /*rdx*/), SysV x86-64:
# push rbx; mov eax, edi; mov ecx, esi; mov r8, rdx; cpuid;
# mov [r8], eax; mov [r8+4], ebx; mov [r8+8], ecx; mov [r8+12], edx; pop rbx; ret
_CPUID_CODE = bytes.fromhex("5389f889f14989d00fa2418900418958044189480841895" "00c5bc3")


class _Cpuid:
    """CPUID through a few bytes of machine code in an executable page (as py-cpuinfo
    does); None where no such page may be mapped (a W^X policy)."""

    def __init__(self) -> None:
        self._page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE |
                               mmap.PROT_EXEC)
        self._page.write(_CPUID_CODE)
        address = ctypes.addressof(ctypes.c_char.from_buffer(self._page))
        self._call = ctypes.CFUNCTYPE(None, ctypes.c_uint32, ctypes.c_uint32,
                                      ctypes.POINTER(ctypes.c_uint32 * 4))(address)

    def __call__(self, leaf: int, subleaf: int = 0) -> tuple[int, int, int, int]:
        out = (ctypes.c_uint32 * 4)()
        self._call(leaf, subleaf, ctypes.byref(out))
        return tuple(out)


def _x86_64() -> bool:
    return platform.machine().lower() in ("x86_64", "amd64")


@functools.cache
def vnni() -> str | None:
    """The VNNI extension the OS lets this process use ('AVX512-VNNI', 'AVX-VNNI'), None
    without; raises OSError where CPUID cannot be run."""
    try:
        cpuid = _Cpuid()
    except (OSError, ValueError, PermissionError) as exc:
        raise OSError(f"CPUID cannot be run here ({exc})") from None
    max_leaf = cpuid(0)[0]
    _, _, ecx1, _ = cpuid(1)
    if max_leaf < 7 or not ecx1 & (1 << 27):  # OSXSAVE: XGETBV's state is known
        return None
    xcr0 = _xgetbv0()
    ymm = xcr0 & 0b110 == 0b110
    zmm = xcr0 & 0b11100110 == 0b11100110
    _, ebx7, ecx7, _ = cpuid(7, 0)
    if zmm and ebx7 & (1 << 16) and ebx7 & (1 << 30) and ecx7 & (1 << 11):
        return "AVX512-VNNI"  # AVX512F, AVX512BW, AVX512_VNNI
    if ymm and cpuid(7, 0)[0] >= 1 and cpuid(7, 1)[0] & (1 << 4):
        return "AVX-VNNI"
    return None


# uint64 xgetbv0(void): xor ecx, ecx; xgetbv; shl rdx, 32; or rax, rdx; ret
_XGETBV_CODE = bytes.fromhex("31c90f01d048c1e2204809d0c3")


def _xgetbv0() -> int:
    page = mmap.mmap(-1, mmap.PAGESIZE, prot=mmap.PROT_READ | mmap.PROT_WRITE | mmap.PROT_EXEC)
    page.write(_XGETBV_CODE)
    address = ctypes.addressof(ctypes.c_char.from_buffer(page))
    value = ctypes.CFUNCTYPE(ctypes.c_uint64)(address)()
    return int(value)


def detect() -> Int8Kernels:
    """The exact form for the CPU this process runs on."""
    if not _x86_64():
        return Int8Kernels(Int8Form.U8S8, f"{platform.machine()}: int8 kernels exact either way")
    try:
        found = vnni()
    except OSError as exc:
        return Int8Kernels(Int8Form.S8S8, f"{exc}: the form exact without VNNI")
    if found:
        return Int8Kernels(Int8Form.U8S8, f"{found}: U8S8 kernels accumulate exactly")
    return Int8Kernels(Int8Form.S8S8, "x86-64 without VNNI: U8S8 kernels saturate in int16")


def choose(option: str | None) -> Int8Kernels:
    """The form `--int8-kernels` (else $NNRT_ORT_INT8_KERNELS, else auto) asks for; auto:
    the detected form, verified (`inexact`), else the next exact one down to numpy."""
    value = (option or os.environ.get(ENV) or "auto").lower()
    if value not in CHOICES:
        raise ValueError(f"int8 kernels {value!r} is not one of {', '.join(CHOICES)}")
    detected = detect()
    if value != "auto":
        form = Int8Form(value)
        reason = detected.reason if form is detected.form else f"detected {detected.describe()}"
        off = inexact(form)
        if off:
            log.warning("onnxruntime's %s int8 kernels are inexact on this CPU (%s), as forced",
                        form.value, off)
        return Int8Kernels(form, reason, forced=True)
    failures = []
    for form in dict.fromkeys([detected.form, Int8Form.S8S8, Int8Form.NUMPY]):
        off = inexact(form)
        if off is None:
            if not failures:
                return detected
            return Int8Kernels(form, f"detected {detected.describe()}, but " + "; ".join(failures))
        failures.append(f"{form.value} failed its check ({off})")
        log.error("onnxruntime's %s int8 kernels failed their check on this CPU: %s",
                  form.value, off)
    raise AssertionError("the numpy kernels need no check")


def inexact(form: Int8Form) -> str | None:
    """What onnxruntime's kernels of `form` got wrong in a full-range int8 product on this
    CPU (MatMulInteger [64, 256] × [256, 64] against int64 arithmetic; ~10 ms, once per
    process), None when exact. U8S8 without VNNI gets ~99 % of the sums wrong."""
    if form is Int8Form.NUMPY:
        return None
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    unsigned = form is Int8Form.U8S8
    a = (rng.integers(0, 256, (64, 256)).astype(np.uint8) if unsigned else
         rng.integers(-128, 128, (64, 256)).astype(np.int8))
    b = rng.integers(-127, 128, (256, 64)).astype(np.int8)
    graph = helper.make_graph(
        [helper.make_node("MatMulInteger", ["a", "b"], ["y"])], "int8_check",
        [helper.make_tensor_value_info("a", TensorProto.UINT8 if unsigned else TensorProto.INT8,
                                       a.shape)],
        [helper.make_tensor_value_info("y", TensorProto.INT32, None)],
        [numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.log_severity_level = 4
    try:
        session = ort.InferenceSession(model.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        got = session.run(None, {"a": a})[0]
    except Exception as exc:  # onnxruntime without the kernel: not usable either
        return f"onnxruntime refused the check: {str(exc).splitlines()[0][:200]}"
    want = a.astype(np.int64) @ b.astype(np.int64)
    wrong = got.astype(np.int64) != want
    if not wrong.any():
        return None
    return (f"{np.count_nonzero(wrong)} of {wrong.size} int32 sums wrong, up to "
            f"{int(np.abs(got.astype(np.int64) - want).max())} off")


_lock = threading.Lock()
_in_force: Int8Kernels | None = None


def configure(option: str | None) -> Int8Kernels:
    """The process's form, fixed by the first call (every session of the process shares
    onnxruntime's kernels and the model caches name the form)."""
    global _in_force
    with _lock:
        if _in_force is None:
            _in_force = choose(option)
            log.info("onnxruntime int8 kernels: %s", _in_force.describe())
        elif option and Int8Form(option) is not _in_force.form:
            log.warning("onnxruntime int8 kernels already %s; %s ignored",
                        _in_force.form.value, option)
        return _in_force


def in_force() -> Int8Kernels:
    """The process's form (configured from the environment at first use)."""
    return _in_force if _in_force is not None else configure(None)
