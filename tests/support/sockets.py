"""Listening sockets of a process tree, read from /proc (no psutil here)."""

from __future__ import annotations

import os
from pathlib import Path

HAS_PROC_NET = Path("/proc/net/tcp").exists()


def listening(pids: set[int]) -> set[str]:
    """Listening TCP addresses (``/proc/net/tcp`` hex ``ADDR:PORT``) of ``pids``."""
    inodes: set[str] = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                link = os.readlink(f"/proc/{pid}/fd/{fd}")
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    out = set()
    for name in ("tcp", "tcp6"):
        for line in Path(f"/proc/net/{name}").read_text().splitlines()[1:]:
            f = line.split()
            if f[3] == "0A" and f[9] in inodes:  # 0A: LISTEN
                out.add(f[1])
    return out


def process_tree(root: int) -> set[int]:
    """``root`` and every process below it."""
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
                ppid = int(stat.rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            kids.setdefault(ppid, []).append(int(entry))
    seen, todo = set(), [root]
    while todo:
        pid = todo.pop()
        seen.add(pid)
        todo.extend(kids.get(pid, []))
    return seen


def is_loopback(hex_addr: str) -> bool:
    ip = hex_addr.split(":")[0]
    if len(ip) == 8:  # IPv4, little-endian bytes
        return ip.endswith("7F")
    # IPv6: ::1, or ::ffff:127.x.x.x
    return ip == "00000000000000000000000001000000" or (
        ip.startswith("0000000000000000FFFF0000") and ip.endswith("7F")
    )


def port_of(hex_addr: str) -> int:
    return int(hex_addr.split(":")[1], 16)


def refuses_without_token(port: int, host: str = "127.0.0.1") -> bool:
    """Whether the gRPC server on ``port`` refuses a call that carries no Ray token
    (UNAUTHENTICATED) before its handler reads anything (a Serve replica's handler
    unpickles its request)."""
    import grpc

    with grpc.insecure_channel(f"{host}:{port}") as channel:
        call = channel.unary_unary("/ray.serve.ASGIService/HandleRequest")
        try:
            call(b"", timeout=10)
        except grpc.RpcError as e:
            return bool(e.code() == grpc.StatusCode.UNAUTHENTICATED)
    return False
