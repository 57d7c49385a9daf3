import os
import subprocess

import pytest


@pytest.fixture(scope="session")
def parity_bin():
    path = os.environ.get("PARITY_BIN")
    if not path or not os.path.exists(path):
        pytest.skip("PARITY_BIN is not set (run through ctest)")
    return path


@pytest.fixture(scope="session")
def test_data():
    path = os.environ.get("PARITY_TEST_DATA")
    if not path or not os.path.isdir(path):
        pytest.skip("PARITY_TEST_DATA is not set (run through ctest)")
    return path


def run_parity(parity_bin, *args):
    return subprocess.run([parity_bin, *args], capture_output=True, text=True)
