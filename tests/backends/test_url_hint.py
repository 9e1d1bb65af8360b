"""A URL no backend takes is told the nearest scheme's form and the URL given (issue 50).

``tenure:/host`` (one slash) was told "expected a URL like 'memory://'", a scheme
the user never meant. Each typo here names the nearest scheme, its form, the URL
given and, where the rest can be kept, the URL it was probably meant to be.
"""

from __future__ import annotations

import pytest

import tenure
import tenure.sync
from tenure.errors import InvalidArgumentError

CASES = [
    ("tenure:/host", "'tenure://host:port'", "'tenure://host'"),
    ("tenure:host:6388", "'tenure://host:port'", "'tenure://host:6388'"),
    ("Tenure:/h:1", "'tenure://host:port'", "'tenure://h:1'"),
    ("tenur://h:1", "'tenure://host:port'", "'tenure://h:1'"),
    ("tenures:/h:1", "'tenures://host:port'", "'tenures://h:1'"),
    ("etcd//h:2379", "'etcd://host:2379'", "'etcd://h:2379'"),
    ("redis:/h", "'redis://host:6379/0'", "'redis://h'"),
    ("memory:", "'memory://'", "'memory://'"),
    ("127.0.0.1:6388", "'tenure://host:port'", "'tenure://127.0.0.1:6388'"),
]


@pytest.mark.parametrize(("url", "form", "meant"), CASES)
async def test_a_typo_is_told_the_nearest_scheme_and_the_url_given(
    url: str, form: str, meant: str
) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        async with tenure.connect(url):
            pass
    message = str(raised.value)
    assert f"expected a URL like {form}" in message
    assert f"got {url!r}" in message
    assert f"did you mean {meant}?" in message


def test_the_sync_face_says_the_same() -> None:
    with pytest.raises(InvalidArgumentError, match=r"did you mean 'tenure://host'\?"):
        tenure.sync.connect("tenure:/host")


@pytest.mark.parametrize("url", ["http://h", "foo:bar", "localhost"])
async def test_a_scheme_near_none_lists_the_known_ones(url: str) -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        async with tenure.connect(url):
            pass
    message = str(raised.value)
    assert repr(url) in message
    assert "'tenure://host:port' or 'memory://'" in message
    assert "known schemes: " in message
    assert "etcd, etcds, memory, postgres, postgresql, redis, rediss, tenure, tenures" in message
    assert "did you mean" not in message


async def test_a_password_in_a_url_without_slashes_is_masked() -> None:
    with pytest.raises(InvalidArgumentError) as raised:
        async with tenure.connect("postgres:/app:hunter2@db/app?password=hunter3"):
            pass
    message = str(raised.value)
    assert "hunter" not in message
    assert "did you mean 'postgres://app:***@db/app?password=***'?" in message
