"""A template NNRt driver (`nnrt-driver template`): copy it to start a driver of your own.

`kind.py` is what nnrt finds through the entry point (its options and how to create the
device); `device.py` is the device: what it supports, how it prepares, runs and caches
models, and how much memory it has. docs/writing-a-driver.md in nnrt walks through both.
"""
