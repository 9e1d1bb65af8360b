"""The tooz driver's pure parts: its URL, tooz's ids as tenure names, results (no server)."""

from __future__ import annotations

from typing import Any

import pytest
import tooz
from tooz import coordination

from tenure._core.members import check_member_id
from tenure._core.values import check_name
from tenure.backends._remote_url import OPTIONS
from tenure.contrib.tooz import TenureDriver
from tenure.contrib.tooz._results import Result
from tenure.contrib.tooz._settings import (
    _TENURE,
    DEFAULT_MAX_MEMBERS,
    DEFAULT_NODE,
    DEFAULT_TIMEOUT,
    decode_capabilities,
    encode_capabilities,
    id_of,
    name_of,
)


@pytest.mark.parametrize(
    "given",
    [
        b"cinder-volume",
        b"volume 7",
        b"50%",
        b"%41",
        b"h\xc3\xa9",
        b"\xff\xfe not utf-8",
        b"tab\there\nnewline\x00nul\x7fdel",
        bytes(range(256)),
    ],
)
def test_every_id_becomes_a_name_tenure_takes_and_reads_back(given: bytes) -> None:
    name = name_of(given)
    assert id_of(name) == given
    assert check_name("semaphore", "tooz/group/" + name)
    if len(name) <= 256:  # MAX_MEMBER_ID_BYTES: a longer member id is refused
        assert check_member_id(name) == name
    text = given.decode("latin-1")  # a str id is its UTF-8
    assert name_of(text) == name_of(text.encode("utf-8"))


def test_printable_ids_stay_readable() -> None:
    assert name_of(b"cinder-volume@host:backend#pool") == "cinder-volume@host:backend#pool"
    assert name_of("str-id") == "str-id"
    assert name_of(b"volume 7") == "volume%207"
    assert name_of(b"50%") == "50%25"


def test_capabilities_are_toozs_msgpack_and_none_is_no_data() -> None:
    assert encode_capabilities(None) == b""
    assert decode_capabilities(b"") is None
    caps = {"type": "warrior", "abilities": ["fight", "flight"], "weight": 5}
    assert decode_capabilities(encode_capabilities(caps)) == caps
    with pytest.raises(tooz.ToozError):
        decode_capabilities(b"\xc1")  # never used by msgpack


def driver(url: str, **options: Any) -> TenureDriver:
    coord = coordination.get_coordinator(url, b"m", **options)
    assert isinstance(coord, TenureDriver)
    return coord


def test_the_url_gives_the_driver_its_options_and_tenure_its_own() -> None:
    plain = driver("tenure://a:1,b:2").settings
    assert (plain.url, plain.node, plain.timeout, plain.max_members) == (
        "tenure://a:1,b:2",
        DEFAULT_NODE,
        DEFAULT_TIMEOUT,
        DEFAULT_MAX_MEMBERS,
    )
    full = driver(
        "tenures://a:1/ignored?node=cinder&timeout=5&max_members=50&ca=/ca.pem&token=s3cret"
    ).settings
    assert full.url == "tenures://a:1?ca=%2Fca.pem&token=s3cret"
    assert (full.node, full.timeout, full.max_members) == ("cinder", 5.0, 50)
    # The caller's keyword arguments win over the query, as tooz says.
    assert driver("tenure://a:1?timeout=5", timeout=7).settings.timeout == 7.0


def test_every_option_of_tenure_urls_passes_through() -> None:
    # (ssl= is a keyword of tenure.connect only: an SSLContext cannot be written in a URL.)
    assert OPTIONS - {"ssl"} == _TENURE
    deadline = driver("tenure://a:1?request_timeout=2&node=n").settings
    assert deadline.url == "tenure://a:1?request_timeout=2"


def test_the_settings_show_the_url_without_its_token() -> None:
    """Issue 47: the driver's settings showed the URL's token in clear (their repr, which
    a log line of the coordinator's quotes): masked as tenure's backends mask it."""
    settings = driver("tenure://a:1?token=s3cr3t-token&node=cinder").settings
    assert settings.url == "tenure://a:1?token=s3cr3t-token"  # (what it connects with)
    shown = repr(settings)
    assert "s3cr3t-token" not in shown
    assert "tenure://a:1?token=***" in shown
    assert "'cinder'" in shown


@pytest.mark.parametrize(
    ("url", "why"),
    [
        ("tenure://a:1?executor=threaded", "unknown option"),
        ("tenure://a:1?timeout=soon", "timeout must be a number"),
        ("tenure://a:1?timeout=-1", "timeout must be a positive number"),
        ("tenure://a:1?timeout=inf", "timeout must be a positive number"),
        ("tenure://a:1?max_members=0", "max_members must be a positive number"),
        ("tenure://?node=x", "names its server"),
    ],
)
def test_a_bad_url_is_refused_before_anything_is_sent(url: str, why: str) -> None:
    with pytest.raises(tooz.ToozError, match=why):
        driver(url)


def test_members_live_by_heartbeats() -> None:
    coord = driver("tenure://a:1")
    assert coord.requires_beating  # heartbeat() is the driver's own
    assert coordination.Characteristics.NON_TIMEOUT_BASED not in coord.CHARACTERISTICS
    assert coordination.Characteristics.DISTRIBUTED_ACROSS_HOSTS in coord.CHARACTERISTICS
    with pytest.raises(tooz.ToozError, match="not started"):
        coord.heartbeat()


def test_a_result_is_ready_with_its_value_or_its_error() -> None:
    assert Result.of(lambda: 42).get() == 42
    assert Result.of(lambda: 42).done()

    def fails() -> int:
        raise coordination.GroupNotCreated(b"g")

    failed = Result.of(fails)
    assert failed.done()
    with pytest.raises(coordination.GroupNotCreated):
        failed.get()
