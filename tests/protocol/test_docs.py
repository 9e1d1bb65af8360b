"""docs/protocol.md says exactly what the codec does: layouts, tags, tables, codes, bytes."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tenure._core import MAX_COUNT, Acquire, AcquireResult, AcquireStatus
from tenure._protocol import (
    DEFAULT_MAX_FRAME_SIZE,
    MIN_MAX_FRAME_SIZE,
    PROTOCOL_VERSION,
    Hello,
    Message,
    Reply,
    Request,
    Side,
)
from tenure._protocol.blocking import (
    NAME_STAT,
    WHY_HOLDER,
    WHY_LINK,
    WHY_ROOT,
    WHY_WAIT,
    WHY_WAITER,
)
from tenure._protocol.cluster import CELL_VIEW, MEMBER_VIEW
from tenure._protocol.messages import MESSAGE, version_refusal
from tenure._protocol.payload_records import (
    BROKEN_DEADLOCK,
    CLIENT_IDENTITY,
    SEMAPHORE_SUMMARY,
    SESSION_SUMMARY,
)
from tenure._protocol.payloads import (
    ACQUIRE_STATUS,
    COMMAND,
    EFFECT,
    HELD_GRANT,
    NODE_CONFIG,
    OWNER_INFO,
    QUEUED_ACQUIRE,
    SEMAPHORE_DESCRIPTION,
    VALUE,
    WAITER_INFO,
    layout,
)
from tenure._protocol.state import render
from tenure._protocol.wire import Record
from tenure.errors import ErrorCode
from tests.docs.blocks import Block
from tests.docs.roles import Role, blocks_of, ids
from tests.protocol.helpers import raw_frame

DOC = (Path(__file__).resolve().parents[2] / "docs" / "protocol.md").read_text(encoding="utf-8")

RECORDS: list[Record] = [
    *MESSAGE.records,
    *COMMAND.records,
    *VALUE.records.records,
    *EFFECT.records,
    NODE_CONFIG,
    SEMAPHORE_DESCRIPTION,
    OWNER_INFO,
    WAITER_INFO,
    MEMBER_VIEW,
    CELL_VIEW,
    WHY_HOLDER,
    WHY_WAIT,
    WHY_WAITER,
    WHY_LINK,
    WHY_ROOT,
    NAME_STAT,
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: r.name)
def test_every_layout_is_documented_exactly(record):
    assert f"\n{record.name} = {layout(record)}\n" in DOC


@pytest.mark.parametrize("side", list(Side))
def test_the_state_tables_are_the_codec_tables(side):
    assert render(side) in DOC


@pytest.mark.parametrize("code", list(ErrorCode), ids=lambda c: c.name)
def test_every_error_code_is_documented(code):
    assert f"\n| {int(code)} | {code.name} |" in DOC


def test_acquire_status_numbers_are_documented():
    numbers = [f"`{ACQUIRE_STATUS.numbers[status]}` {status.name}" for status in AcquireStatus]
    assert ", ".join(numbers) in DOC


def test_the_sizes_and_version_are_documented():
    assert f"version {PROTOCOL_VERSION}" in DOC.splitlines()[0]
    assert f"{DEFAULT_MAX_FRAME_SIZE:,}" in DOC
    assert f"{MIN_MAX_FRAME_SIZE:,}" in DOC


def test_the_version_refusal_is_quoted_as_the_server_words_it():
    # The doc quotes a refusal of a version the server does not speak, with the
    # versions it does speak (it said "speaks 1" long after version 2 came).
    refusal = version_refusal(Hello(PROTOCOL_VERSION + 1))
    assert refusal is not None
    quoted = refusal.message.replace(str(PROTOCOL_VERSION + 1), "N", 1)
    assert f'`Refused(UNSUPPORTED, "{quoted}")`' in DOC


EXAMPLES: list[Message] = [
    # A mutex: every token of an ephemeral semaphore (docs/protocol.md section 6.1).
    Request(1, Acquire(3, "db", MAX_COUNT, 7, ephemeral=True)),
    Reply(1, AcquireResult(AcquireStatus.GRANTED, token=42, count=MAX_COUNT)),
    Hello(1, "cli", None, 1048576),
]


@pytest.mark.parametrize("message", EXAMPLES, ids=lambda m: type(m).__name__)
def test_the_worked_examples_are_the_real_bytes(message):
    assert f"\n{raw_frame(message).hex(' ')}\n" in DOC


def test_the_annotated_example_adds_up():
    table = DOC[DOC.index("| bytes | meaning |") :].split("\n\n")[0]
    annotated = "".join(re.findall(r"^\| `([0-9a-f ]+)` \|", table, re.MULTILINE))
    assert bytes.fromhex(annotated) == raw_frame(EXAMPLES[0])


#: What a text block of docs/protocol.md may hold: the codec's layouts, a line each
#: (those above, and the records inside them).
LAYOUT_LINES = {
    f"{record.name} = {layout(record)}"
    for record in [
        *RECORDS,
        CLIENT_IDENTITY,
        BROKEN_DEADLOCK,
        SEMAPHORE_SUMMARY,
        SESSION_SUMMARY,
        HELD_GRANT,
        QUEUED_ACQUIRE,
    ]
}


@pytest.mark.parametrize("block", blocks_of(Role.PROTOCOL), ids=ids(blocks_of(Role.PROTOCOL)))
def test_every_layout_and_frame_block_is_the_codecs_own(block: Block) -> None:
    # The page's text blocks (tests/docs/roles.py), each either layouts the codec
    # has, a line each, or one frame of its worked examples, byte for byte.
    lines = block.text.splitlines()
    frames = {raw_frame(message).hex(" ") for message in EXAMPLES}
    assert set(lines) <= LAYOUT_LINES or (len(lines) == 1 and lines[0] in frames), block.name
