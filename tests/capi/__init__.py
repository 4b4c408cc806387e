"""Tests of nnrt.client.capi, the OH_NN* C API in Python."""
