#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A TCP relay between one iSCSI initiator and a target that corrupts one PDU.

    digest_proxy.py LISTEN_PORT TARGET_PORT MODE N HDIG DDIG PORT_FILE

Listens on 127.0.0.1:LISTEN_PORT (0: any free port, written to PORT_FILE),
relays each connection (the first, and those of the initiator's
reconnections) to 127.0.0.1:TARGET_PORT and follows the PDUs the
target sends (RFC 7143 §11: BHS, AHS, header digest, data, padding, data
digest; digests only after the final Login Response, HDIG/DDIG 0 or 1 say
which were negotiated).  It flips one bit:
  data    in the middle of the data segment of the Nth Data-In carrying at
          least 4 KiB (so a payload, not an edge block read for a merge)
  header  in the ITT of the Nth PDU of the full feature phase
and relays everything else unchanged: one PDU in all, whatever the number
of connections.  Prints what it corrupted to stderr.  Exits 120 s after the
last connection began.
"""
import socket
import sys
import threading


def pump_plain(src, dst):
    try:
        while True:
            b = src.recv(65536)
            if not b:
                break
            dst.sendall(b)
    except OSError:
        pass
    for s in (dst, src):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def read_exact(sock, n):
    buf = bytearray()
    while len(buf) < n:
        b = sock.recv(n - len(buf))
        if not b:
            raise EOFError
        buf += b
    return buf


state = {"count": 0, "done": False}


def pump_target(src, dst, mode, nth, hdig, ddig):
    full_feature = False
    try:
        while True:
            bhs = read_exact(src, 48)
            opcode = bhs[0] & 0x3F
            ahs = bhs[4] * 4
            dlen = int.from_bytes(bhs[5:8], "big")
            pad = (4 - dlen % 4) % 4
            hd = 4 if full_feature and hdig else 0
            dd = 4 if full_feature and ddig and dlen else 0
            rest = read_exact(src, ahs + hd + dlen + pad + dd)
            pdu = bhs + rest
            if full_feature and not state["done"]:
                if mode == "header":
                    state["count"] += 1
                    if state["count"] == nth:
                        pdu[17] ^= 0x10
                        state["done"] = True
                        print("corrupted the header of PDU %d (opcode 0x%02x)" % (nth, opcode), file=sys.stderr)
                elif opcode == 0x25 and dlen >= 4096:
                    state["count"] += 1
                    if state["count"] == nth:
                        pdu[48 + ahs + hd + dlen // 2] ^= 0x01
                        state["done"] = True
                        print("corrupted byte %d of Data-In %d (%d bytes)" % (dlen // 2, nth, dlen),
                              file=sys.stderr)
            # Login Response with T=1 and NSG=3: digests start after it.
            if opcode == 0x23 and (bhs[1] & 0x80) and (bhs[1] & 0x03) == 3:
                full_feature = True
            dst.sendall(pdu)
    except (EOFError, OSError):
        pass
    for s in (dst, src):
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def main():
    lport, tport, mode, nth, hdig, ddig, port_file = sys.argv[1:8]
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", int(lport)))
    ls.listen(1)
    with open(port_file, "w") as f:
        f.write("%d\n" % ls.getsockname()[1])
    ls.settimeout(120)
    while True:
        try:
            cs, _ = ls.accept()
        except socket.timeout:
            return
        ts = socket.create_connection(("127.0.0.1", int(tport)))
        for s in (cs, ts):
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=pump_plain, args=(cs, ts), daemon=True).start()
        threading.Thread(target=pump_target, args=(ts, cs, mode, int(nth), hdig == "1", ddig == "1"),
                         daemon=True).start()


if __name__ == "__main__":
    main()
