"""A bare grpc.aio ``CoordinationService/Session`` server: the ceiling of a YDB face in Python.

Not tenure: a child process on uvloop, as ``tenure serve`` runs, that answers every
request of a Session stream at once with a canned success (SessionStarted, each
semaphore request's result with ``SUCCESS``, a pong for a ping): no engine, no
journal, no outbox, no check. :mod:`bench.peers.ydb_seq` and
:mod:`bench.peers.ydb_par` run their raw streams against it too (the ``grpc-echo``
way), so one run shows how far the YDB face is from what Python's gRPC server can
do at all on this machine, with the same client.

Run alone: ``python -m bench.peers.ydb_echo --port N`` (prints ``ready`` once it
listens).
"""

from __future__ import annotations

import argparse
import contextlib
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import ydb._grpc.common  # noqa: F401  (picks the generated code for the installed protobuf)
from ydb._grpc.common.protos import ydb_coordination_pb2 as coordination

_Response = coordination.SessionResponse
_SUCCESS = 400000  # Ydb.StatusIds.SUCCESS
_STARTED = _Response(session_started={"session_id": 1, "timeout_millis": 30000})
#: Each request kind answered, and the field of its answer.
_RESULTS = {
    "acquire_semaphore": "acquire_semaphore_result",
    "release_semaphore": "release_semaphore_result",
    "create_semaphore": "create_semaphore_result",
    "describe_semaphore": "describe_semaphore_result",
    "update_semaphore": "update_semaphore_result",
    "delete_semaphore": "delete_semaphore_result",
}


def answer(request: Any) -> bytes | None:
    """The canned answer to one request after the start (None: nothing to answer)."""
    kind = request.WhichOneof("request")
    if kind == "ping":
        return bytes(_Response(pong={"opaque": request.ping.opaque}).SerializeToString())
    result = _RESULTS.get(kind)
    if result is None:
        return None
    fields: dict[str, Any] = {"req_id": getattr(request, kind).req_id, "status": _SUCCESS}
    if kind == "acquire_semaphore":
        fields["acquired"] = True
    elif kind == "release_semaphore":
        fields["released"] = True
    return bytes(_Response(**{result: fields}).SerializeToString())


async def session(requests: Any, context: Any) -> None:
    """One Session stream: started at its first message, then every request answered."""
    if await context.read() is grpc.aio.EOF:
        return
    await context.write(_STARTED.SerializeToString())
    while (request := await context.read()) is not grpc.aio.EOF:
        response = answer(request)
        if response is not None:
            await context.write(response)


async def serve(port: int) -> None:
    """Listen on 127.0.0.1:``port`` until killed."""
    server = grpc.aio.server()
    handler = grpc.stream_stream_rpc_method_handler(
        session,
        request_deserializer=coordination.SessionRequest.FromString,
        response_serializer=bytes,
    )
    service = "Ydb.Coordination.V1.CoordinationService"
    server.add_generic_rpc_handlers(
        (grpc.method_handlers_generic_handler(service, {"Session": handler}),)
    )
    server.add_insecure_port(f"127.0.0.1:{port}")
    await server.start()
    print("ready", flush=True)
    await server.wait_for_termination()


@contextlib.contextmanager
def running(port: int) -> Iterator[int]:
    """An echo server in a child process on ``port``, killed (by its pid) at the end."""
    child = subprocess.Popen(
        [sys.executable, "-m", "bench.peers.ydb_echo", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        cwd=Path(__file__).resolve().parents[2],
    )
    try:
        deadline = time.monotonic() + 15
        while True:  # bounded: listening within 15 s, or the run fails
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 1):
                break
            if child.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError("the gRPC echo server did not start")
            time.sleep(0.1)
        yield port
    finally:
        child.kill()
        child.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.peers.ydb_echo", description=__doc__)
    parser.add_argument("--port", type=int, required=True)
    args = parser.parse_args()
    import uvloop  # as `tenure serve` runs when it is installed

    uvloop.run(serve(args.port))
