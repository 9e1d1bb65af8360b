"""FileFence on a real directory: late writes refused, turns taken, bad input refused."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from tenure.errors import FencedError, InvalidArgumentError, PreconditionFailedError
from tenure.fencing import MAX_TOKEN, FileFence
from tenure.fencing import _file as file_guard
from tests.fencing.scenario import paused_holder_writes_late


async def test_a_paused_holders_late_write_is_refused(tmp_path: Path) -> None:
    fence = FileFence(tmp_path / "ledger.json")
    outcome = await paused_holder_writes_late(fence.awrite)
    assert fence.read() == b"B: writes again with the same token"
    assert fence.highest() == outcome.token_b
    assert outcome.refusal.resource == str(tmp_path / "ledger.json")


def test_before_the_first_write_there_is_nothing(tmp_path: Path) -> None:
    fence = FileFence(tmp_path / "data")
    assert fence.read() is None
    assert fence.highest() is None
    fence.write(MAX_TOKEN, b"")
    assert fence.read() == b""
    assert fence.highest() == MAX_TOKEN
    assert (tmp_path / "data.fence").read_text() == f"{MAX_TOKEN}\n"


def test_equal_tokens_write_again_lower_ones_change_nothing(tmp_path: Path) -> None:
    fence = FileFence(str(tmp_path / "data"))
    fence.write(5, b"one")
    fence.write(5, bytearray(b"two"))
    fence.write(6, memoryview(b"three"))
    with pytest.raises(FencedError, match="fencing token 5 is older than 6") as refused:
        fence.write(5, b"late")
    assert (refused.value.token, refused.value.highest) == (5, 6)
    assert fence.read() == b"three"
    assert fence.highest() == 6
    # Only the data, its token and its lock: no temporary file left behind.
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data", "data.fence", "data.lock"]


def test_two_fences_of_one_file_share_the_highest_token(tmp_path: Path) -> None:
    FileFence(tmp_path / "data").write(9, b"nine")
    with pytest.raises(FencedError):
        FileFence(tmp_path / "data").write(8, b"eight")
    assert FileFence(tmp_path / "data").read() == b"nine"


def test_a_crash_between_token_and_data_leaves_no_new_data_behind_an_old_token(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fence = FileFence(tmp_path / "data")
    fence.write(1, b"one")
    real_replace = file_guard._replace

    def crash_on_the_data(target: Path, content: bytes, mode: int) -> None:
        if target == fence.path:
            raise OSError("the machine stops here")
        real_replace(target, content, mode)

    monkeypatch.setattr(file_guard, "_replace", crash_on_the_data)
    with pytest.raises(OSError, match="the machine stops here"):
        fence.write(2, b"two")
    monkeypatch.undo()
    # The token went first: raised, over the old data. The old holder is refused,
    # the new one writes.
    assert (fence.highest(), fence.read()) == (2, b"one")
    with pytest.raises(FencedError):
        fence.write(1, b"one, late")
    fence.write(2, b"two")
    assert (fence.highest(), fence.read()) == (2, b"two")


def test_concurrent_writers_never_leave_an_older_tokens_data(tmp_path: Path) -> None:
    # Eight threads, tokens 1..8, each writing 25 times at once. Were the check and
    # the write not one step under the lock, a lower token could pass its check,
    # stall, and write after a higher one: the file would end with its data.
    fence = FileFence(tmp_path / "data")
    start = threading.Barrier(8)
    accepted: dict[int, int] = dict.fromkeys(range(1, 9), 0)
    refused: dict[int, int] = dict.fromkeys(range(1, 9), 0)
    lower: dict[int, int] = dict.fromkeys(range(1, 9), MAX_TOKEN)  # least highest - token

    def writer(token: int) -> None:
        start.wait(timeout=30)
        for i in range(25):
            try:
                fence.write(token, f"{token}:{i}".encode())
                accepted[token] += 1
            except FencedError as error:
                lower[token] = min(lower[token], error.highest - token)
                refused[token] += 1

    threads = [threading.Thread(target=writer, args=(token,)) for token in range(1, 9)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads)
    assert fence.highest() == 8
    assert fence.read() == b"8:24"
    assert accepted[8] == 25  # the highest token is never refused
    assert all(accepted[t] + refused[t] == 25 for t in accepted)
    assert all(lower[t] > 0 for t in lower), "refused only by a higher token"


def test_writers_in_two_processes_take_turns(tmp_path: Path) -> None:
    path = tmp_path / "data"
    program = (
        "import sys\n"
        "from tenure.fencing import FileFence\n"
        "from tenure.errors import FencedError\n"
        "fence, token = FileFence(sys.argv[1]), int(sys.argv[2])\n"
        "for i in range(40):\n"
        "    try: fence.write(token, f'{token}:{i}'.encode())\n"
        "    except FencedError: pass\n"
    )
    procs = [
        subprocess.Popen([sys.executable, "-c", program, str(path), str(token)]) for token in (3, 4)
    ]
    assert [proc.wait(timeout=60) for proc in procs] == [0, 0]
    fence = FileFence(path)
    assert fence.highest() == 4
    assert fence.read() == b"4:39"


def test_a_held_lock_makes_a_write_time_out_and_change_nothing(tmp_path: Path) -> None:
    fence = FileFence(tmp_path / "data", lock_timeout=0.05)
    fence.write(1, b"before")
    fd = os.open(fence.lock_path, os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)  # another writer, in the middle of its write
        with pytest.raises(TimeoutError, match=r"data.lock stayed locked .*lock_timeout=0.05"):
            fence.write(2, b"after")
    finally:
        os.close(fd)
    assert fence.read() == b"before"
    fence.write(2, b"after")
    assert fence.read() == b"after"


def test_a_token_file_not_written_by_a_fence_is_not_trusted(tmp_path: Path) -> None:
    fence = FileFence(tmp_path / "data")
    fence.token_path.write_text("not a number\n")
    with pytest.raises(PreconditionFailedError, match=r"data\.fence holds b'not a number"):
        fence.write(5, b"x")
    assert fence.read() is None


@pytest.mark.parametrize("token", [0, -3, 2**64, True, 2.0, "7"])
def test_a_bad_token_is_refused_before_anything_is_touched(tmp_path: Path, token: object) -> None:
    fence = FileFence(tmp_path / "data")
    with pytest.raises(InvalidArgumentError, match="token must be an integer"):
        fence.write(token, b"x")  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"lock_timeout": -1}, "lock_timeout must be in"),
        ({"lock_timeout": "1"}, "lock_timeout must be seconds"),
        ({"mode": 0o1777}, "mode must be permission bits"),
    ],
)
def test_bad_settings_are_refused(tmp_path: Path, kwargs: dict[str, object], message: str) -> None:
    with pytest.raises(InvalidArgumentError, match=message):
        FileFence(tmp_path / "data", **kwargs)  # type: ignore[arg-type]


def test_bad_data_and_paths_are_refused(tmp_path: Path) -> None:
    with pytest.raises(InvalidArgumentError, match="path must be"):
        FileFence("")
    with pytest.raises(InvalidArgumentError, match="data must be bytes, got str"):
        FileFence(tmp_path / "data").write(1, "text")  # type: ignore[arg-type]
