"""What the client and the drivers share: return codes (errors), data types (dtypes), the
session channel's framing, the runtime directory, the device manager's control protocol,
fault descriptions, the HDI model as data (hdi_model) and the saved-model file format.

Nothing here imports `nnrt.server`, `nnrt.drivers` or `nnrt.client`.
"""
