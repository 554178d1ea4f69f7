"""A minimal NFQUEUE client over a raw netlink socket (no C library needed).

The kernel hands each packet an iptables `NFQUEUE` rule matched to the process bound to that queue
number (in the packet's network namespace) and holds it until that process sends a verdict. Only the
metadata is copied to us (packet id, no payload), and verdicts may be given in any order, which is
what a delay with jitter needs. Message layouts: linux/netfilter/nfnetlink_queue.h.
"""

from __future__ import annotations

import errno
import os
import socket
import struct
from collections.abc import Iterator

NETLINK_NETFILTER = 12
NFNL_SUBSYS_QUEUE = 3
NFQNL_MSG_PACKET, NFQNL_MSG_VERDICT, NFQNL_MSG_CONFIG = 0, 1, 2
NFQA_CFG_CMD, NFQA_CFG_PARAMS, NFQA_CFG_QUEUE_MAXLEN = 1, 2, 3
NFQNL_CFG_CMD_BIND, NFQNL_CFG_CMD_UNBIND = 1, 2
NFQNL_COPY_META = 1
NFQA_PACKET_HDR, NFQA_VERDICT_HDR = 1, 2
NF_DROP, NF_ACCEPT = 0, 1
NLM_F_REQUEST, NLM_F_ACK = 0x1, 0x4
NLMSG_ERROR = 2
SO_RCVBUFFORCE = 33
_NLMSG = struct.Struct("=IHHII")  # len, type, flags, seq, pid (host order)
_NFGEN = struct.Struct("=BBH")  # family, version, res_id (network order, packed by hand)
_NLATTR = struct.Struct("=HH")


class NfQueueError(OSError):
    pass


def _attr(kind: int, payload: bytes) -> bytes:
    raw = _NLATTR.pack(_NLATTR.size + len(payload), kind) + payload
    return raw + b"\0" * (-len(raw) % 4)


def _message(msg_type: int, flags: int, queue: int, attrs: list[tuple[int, bytes]], seq: int = 0) -> bytes:
    body = _NFGEN.pack(socket.AF_UNSPEC, 0, socket.htons(queue)) + b"".join(_attr(k, v) for k, v in attrs)
    kind = (NFNL_SUBSYS_QUEUE << 8) | msg_type
    return _NLMSG.pack(_NLMSG.size + len(body), kind, flags, seq, 0) + body


class NfQueue:
    """Bound to one queue number in the current network namespace until `close()`."""

    def __init__(self, queue: int, *, max_len: int = 8192, rcvbuf: int = 4 << 20) -> None:
        self.queue = queue
        self.sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
        try:
            self.sock.setsockopt(socket.SOL_SOCKET, SO_RCVBUFFORCE, rcvbuf)
            self.sock.bind((0, 0))
            self._seq = 0
            self._request(NFQNL_MSG_CONFIG, [(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_BIND, 0))])
            self._request(NFQNL_MSG_CONFIG, [(NFQA_CFG_PARAMS, struct.pack("!IB", 0, NFQNL_COPY_META))])
            self._request(NFQNL_MSG_CONFIG, [(NFQA_CFG_QUEUE_MAXLEN, struct.pack("!I", max_len))])
        except BaseException:
            self.sock.close()
            raise

    def fileno(self) -> int:
        return self.sock.fileno()

    def _request(self, msg_type: int, attrs: list[tuple[int, bytes]]) -> None:
        """Send a config message and wait for the kernel's ack (an error names what failed)."""
        self._seq += 1
        self.sock.send(_message(msg_type, NLM_F_REQUEST | NLM_F_ACK, self.queue, attrs, self._seq))
        while True:
            data = self.sock.recv(65536)
            for kind, payload in _split(data):
                if kind == NLMSG_ERROR:
                    code = struct.unpack_from("=i", payload)[0]
                    if code:
                        raise NfQueueError(-code, f"NFQUEUE {self.queue}: {os.strerror(-code)}")
                    return

    def packet_ids(self) -> Iterator[int]:
        """The ids of the packets that arrived (call when the socket is readable)."""
        try:
            data = self.sock.recv(1 << 20, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return
        except OSError as exc:
            if exc.errno == errno.ENOBUFS:  # we fell behind; those packets wait until we unbind
                return
            raise
        for kind, payload in _split(data):
            if kind != (NFNL_SUBSYS_QUEUE << 8) | NFQNL_MSG_PACKET:
                continue
            for attr, value in _attrs(payload[_NFGEN.size :]):
                if attr == NFQA_PACKET_HDR:
                    yield struct.unpack_from("!I", value)[0]

    def verdict(self, packet_id: int, verdict: int = NF_ACCEPT) -> None:
        header = struct.pack("!II", verdict, packet_id)
        self.sock.send(_message(NFQNL_MSG_VERDICT, NLM_F_REQUEST, self.queue, [(NFQA_VERDICT_HDR, header)]))

    def close(self) -> None:
        """Unbind; the kernel drops whatever is still queued to us."""
        try:
            self._request(NFQNL_MSG_CONFIG, [(NFQA_CFG_CMD, struct.pack("!BxH", NFQNL_CFG_CMD_UNBIND, 0))])
        except OSError:
            pass
        finally:
            self.sock.close()


def _split(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(type, payload) of each netlink message in one datagram."""
    pos = 0
    while pos + _NLMSG.size <= len(data):
        length, kind, _flags, _seq, _pid = _NLMSG.unpack_from(data, pos)
        if length < _NLMSG.size:
            return
        yield kind, data[pos + _NLMSG.size : pos + length]
        pos += (length + 3) & ~3


def _attrs(data: bytes) -> Iterator[tuple[int, bytes]]:
    pos = 0
    while pos + _NLATTR.size <= len(data):
        length, kind = _NLATTR.unpack_from(data, pos)
        if length < _NLATTR.size:
            return
        yield kind & 0x7FFF, data[pos + _NLATTR.size : pos + length]
        pos += (length + 3) & ~3
