"""What every guard shares: the token's range, the refusal's error, no driver imported."""

from __future__ import annotations

import subprocess
import sys

import pytest

import tenure
from tenure.errors import (
    FencedError,
    InvalidArgumentError,
    LimitExceededError,
    PreconditionFailedError,
    TenureError,
    code_of,
)
from tenure.fencing import MAX_TOKEN, check_token
from tenure.fencing._token import check_resource


@pytest.mark.parametrize("token", [1, 2**53 + 1, 2**63, MAX_TOKEN])
def test_a_token_is_an_int_from_1_to_2_64_minus_1(token: int) -> None:
    assert check_token(token) == token
    assert MAX_TOKEN == 2**64 - 1


@pytest.mark.parametrize("token", [0, -1, 2**64, True, False, 1.0, "5", b"5", None])
def test_anything_else_is_refused_naming_the_token(token: object) -> None:
    with pytest.raises(InvalidArgumentError, match=r"token must be an integer in \[1, 2\*\*64-1\]"):
        check_token(token)


@pytest.mark.parametrize("resource", ["", None, 5, b"bytes", "nul\0inside", "\udcff"])
def test_a_resource_is_a_non_empty_str(resource: object) -> None:
    with pytest.raises(InvalidArgumentError, match="resource must"):
        check_resource(resource, 100)


def test_a_resource_longer_than_the_limit_names_the_limit() -> None:
    assert check_resource("é" * 50, 100) == "é" * 50  # 100 bytes of UTF-8
    with pytest.raises(
        LimitExceededError, match=r"resource is 102 bytes .*max_resource_bytes is 100"
    ):
        check_resource("é" * 51, 100)


def test_the_refusal_names_resource_token_and_highest() -> None:
    error = FencedError("invoices", 7, 9)
    assert (error.resource, error.token, error.highest) == ("invoices", 7, 9)
    assert "'invoices'" in str(error)
    assert "fencing token 7 is older than 9" in str(error)
    assert isinstance(error, PreconditionFailedError)
    assert isinstance(error, TenureError)
    assert code_of(error) is PreconditionFailedError.code
    assert tenure.errors.FencedError is FencedError


def test_the_guards_import_without_redis_or_psycopg() -> None:
    # Blocked in sys.modules, as if not installed: the module must import, and the
    # file guard (which needs neither) must work.
    program = (
        "import sys, tempfile, os\n"
        "for name in ('redis', 'psycopg', 'psycopg_pool'): sys.modules[name] = None\n"
        "import tenure, tenure.fencing as f\n"
        "fence = f.FileFence(os.path.join(tempfile.mkdtemp(), 'data'))\n"
        "fence.write(3, b'x')\n"
        "f.RedisFence(); f.PostgresFence()\n"
        "assert 'redis' not in {m for m in sys.modules if sys.modules[m] is not None}\n"
        "print(fence.highest(), fence.read())\n"
    )
    result = subprocess.run(
        [sys.executable, "-W", "error", "-c", program],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == "3 b'x'\n"
