"""The CPU driver: numpy kernels, one operator per module, registered by NodeType."""
