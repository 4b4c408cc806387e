"""The C API tests' fixtures (tests/capi/conftest.py) for the C API tests in tests/client/capi/,
until tests/capi/test_executor.py and the modules it imports join them there (this file then
goes, and tests/capi/conftest.py becomes tests/client/capi/conftest.py)."""

from tests.capi.conftest import *  # noqa: F401,F403
