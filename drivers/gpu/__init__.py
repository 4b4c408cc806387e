"""The GPU driver: OpenCL kernels through pyopencl, `nnrt-driver gpu` (drivers/gpu/device.py)."""
