"""The accelerator (NPU) simulator: `nnrt-driver accel` (drivers/accel/device.py)."""
