#!/usr/bin/env python3
"""Turn the kernel's audit on (what `auditctl -e 1` does, without auditd):
Landlock then logs the denials of the runs cordon asks it to, and a host
that reads the audit records (root) names them in a run's facts. Used by
scripts/test.sh under CI, so the suites that check those facts can run.
Exits 1 with the reason when this process may not (no CAP_AUDIT_CONTROL,
not the initial user namespace)."""

import socket
import struct
import sys

NETLINK_AUDIT = 9
AUDIT_GET, AUDIT_SET = 1000, 1001
AUDIT_STATUS_ENABLED = 1
NLM_F_REQUEST, NLM_F_ACK = 1, 4


def ask(sock, kind, payload=b""):
    sock.send(struct.pack("=IHHII", 16 + len(payload), kind, NLM_F_REQUEST | NLM_F_ACK, 1, 0) + payload)
    while True:
        data = sock.recv(65536)
        _, reply = struct.unpack("=IH", data[:6])
        if reply == 2:  # NLMSG_ERROR: an ack when 0
            (errno,) = struct.unpack("=i", data[16:20])
            if errno:
                raise OSError(-errno, "audit netlink")
            if kind == AUDIT_SET:
                return None
        elif reply == AUDIT_GET:
            return struct.unpack("=8I", data[16:48])


try:
    sock = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_AUDIT)
    sock.bind((0, 0))
    status = ask(sock, AUDIT_GET)
    if status[1]:
        print("audit-on: the kernel's audit is already on")
        sys.exit(0)
    ask(sock, AUDIT_SET, struct.pack("=8I", AUDIT_STATUS_ENABLED, 1, 0, 0, 0, 0, 0, 0) + b"\0" * 8)
    print("audit-on: turned the kernel's audit on")
except OSError as err:
    print(f"audit-on: cannot turn the kernel's audit on: {err}", file=sys.stderr)
    sys.exit(1)
