"""Length-prefixed frames between the grader and a student process.

A frame is an 8-byte little-endian length followed by that many bytes. Requests from the
grader carry a JSON header (with a fresh random request id) and an optional binary body;
replies from the student process carry the request id and the body, which the grader only
ever parses with `grader.codec.loads` (never pickle). Frames whose id is not that of the
pending request are discarded, so a frame forged by student code can at most answer the
request its own code is serving (its own answer), never a later one: the id of each request is
fresh and random. Replies are read into one buffer of their announced size, which is bounded
before anything is read, and grader.codec bounds the JSON inside before parsing it. Reading is
bounded in time too, so a child that trickles bytes or stops answering cannot stall the grader.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import time

from grader import codec

LENGTH = struct.Struct("<Q")
REPLY_HEAD = struct.Struct("<Qc")  # the request id a frame answers, and its kind
REPLY, CALLBACK = b"R", b"C"
MAX_REPLY_BYTES = codec.MAX_ARRAY_BYTES + 2**20
MAX_REQUEST_BYTES = 2**31
LOOP_FAILED_EXIT = 71  # the student process's request loop ended without the grader closing it


class ChannelClosed(Exception):
    """The other side closed the connection (for the grader: the student process ended)."""


class ChannelTimeout(Exception):
    """No complete frame arrived before the deadline."""


class ProtocolError(Exception):
    """The bytes received do not form a valid frame."""


def encode_request(header: dict, body: bytes = b"") -> bytes:
    """A request payload: length-prefixed JSON header, then the body."""
    text = json.dumps(header).encode()
    return LENGTH.pack(len(text)) + text + body


def decode_request(payload: bytes) -> tuple[dict, bytes]:
    """Inverse of `encode_request` (runs in the student process, on trusted input)."""
    (size,) = LENGTH.unpack_from(payload, 0)
    header = json.loads(payload[LENGTH.size : LENGTH.size + size])
    return header, payload[LENGTH.size + size :]


def send_frame(sock: socket.socket, payload: bytes, deadline: float | None = None) -> None:
    """Send one frame; with a deadline, give up (ChannelTimeout) when the reader stalls."""
    data = LENGTH.pack(len(payload)) + payload
    if deadline is None:
        sock.settimeout(None)
    else:
        sock.settimeout(max(deadline - time.monotonic(), 0.001))
    try:
        sock.sendall(data)
    except socket.timeout:
        raise ChannelTimeout("the student process stopped reading its requests") from None
    except (BrokenPipeError, ConnectionResetError, OSError) as error:
        raise ChannelClosed(str(error)) from None


def _prepare(sock: socket.socket, deadline: float | None) -> None:
    sock.setblocking(deadline is None)
    if deadline is None:
        sock.settimeout(None)


def _fill(sock: socket.socket, view: memoryview, deadline: float | None) -> None:
    filled, size = 0, len(view)
    while filled < size:
        if deadline is not None:
            wait = deadline - time.monotonic()
            if wait <= 0:
                raise ChannelTimeout("no reply before the deadline")
            ready, _, _ = select.select([sock], [], [], wait)
            if not ready:
                raise ChannelTimeout("no reply before the deadline")
        try:
            got = sock.recv_into(view[filled:], min(size - filled, 1 << 20))
        except BlockingIOError:
            continue
        except OSError as error:
            raise ChannelClosed(str(error)) from None
        if not got:
            raise ChannelClosed("the connection was closed")
        filled += got


def _read_exact(sock: socket.socket, size: int, deadline: float | None) -> bytearray:
    buffer = bytearray(size)  # one buffer, filled in place: a frame costs its size, once
    _fill(sock, memoryview(buffer), deadline)
    return buffer


def _skip(sock: socket.socket, size: int, deadline: float | None) -> None:
    scratch = memoryview(bytearray(min(size, 1 << 20)))
    while size:
        _fill(sock, scratch[: min(size, len(scratch))], deadline)
        size -= min(size, len(scratch))


def recv_frame(
    sock: socket.socket, deadline: float | None = None, max_bytes: int = MAX_REPLY_BYTES
) -> bytearray:
    """Receive one frame, no larger than `max_bytes`, before `deadline` (time.monotonic())."""
    _prepare(sock, deadline)
    (size,) = LENGTH.unpack(_read_exact(sock, LENGTH.size, deadline))
    if size > max_bytes:
        raise ProtocolError(f"a frame of {size} bytes exceeds the {max_bytes}-byte limit")
    return _read_exact(sock, size, deadline)


def encode_reply(request_id: int, body: bytes, kind: bytes = REPLY) -> bytes:
    return REPLY_HEAD.pack(request_id, kind) + body


def recv_reply(
    sock: socket.socket,
    request_id: int,
    deadline: float | None,
    max_bytes: int = MAX_REPLY_BYTES,
    max_stray: int = 10_000,
) -> tuple[bytes, memoryview]:
    """(kind, body) of the next frame for request `request_id`: its REPLY, or a CALLBACK asking the
    grader to run one of the callables handed to student code. Stray frames (stale replies, or
    frames forged by student code) are skipped unread, so none can shift the replies that follow.
    A body's JSON header length is checked before the rest of it is read."""
    _prepare(sock, deadline)
    for _ in range(max_stray):
        (size,) = LENGTH.unpack(_read_exact(sock, LENGTH.size, deadline))
        if size > max_bytes:
            raise ProtocolError(f"a frame of {size} bytes exceeds the {max_bytes}-byte limit")
        if size < REPLY_HEAD.size:
            raise ProtocolError("a reply too short to carry a request id")
        number, kind = REPLY_HEAD.unpack(_read_exact(sock, REPLY_HEAD.size, deadline))
        size -= REPLY_HEAD.size
        if number != request_id:
            _skip(sock, size, deadline)
            continue
        if kind not in (REPLY, CALLBACK):
            raise ProtocolError(f"a reply of unknown kind {kind!r}")
        if size < LENGTH.size:
            return kind, memoryview(_read_exact(sock, size, deadline))
        head = _read_exact(sock, LENGTH.size, deadline)
        (header,) = LENGTH.unpack(head)
        if header > codec.MAX_HEADER_BYTES:
            raise ProtocolError(
                f"a reply whose header of {header} bytes exceeds the {codec.MAX_HEADER_BYTES}-byte limit"
            )
        body = bytearray(size)
        body[: LENGTH.size] = head
        view = memoryview(body)
        _fill(sock, view[LENGTH.size :], deadline)
        return kind, view
    raise ProtocolError(f"more than {max_stray} stray frames while waiting for a reply")
