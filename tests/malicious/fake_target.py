#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""A small scriptable iSCSI target (RFC 7143) that misbehaves on cue.

    fake_target.py --port PORT [--port2 PORT] [--alua FILE] [--report ADDR]... [--misbehave NAME [--always]] [--log FILE]
    fake_target.py --dump OFFSET LENGTH     the disk's initial bytes, to stdout
    fake_target.py --list                   the misbehaviours, one per line
    fake_target.py --trigger NAME           what sets NAME off: login, probe, read, write,
                                            nop (the first NOP-Out ping), seek (GET LBA STATUS),
                                            rescan (a rescan after the first READ)

It listens on 127.0.0.1:PORT and serves one target, IQN below, with one
disk LUN 1 of 1 MiB in 512-byte blocks, held in memory and filled with a
fixed pseudo-random pattern.  It answers the login (AuthMethod=None, then
the operational keys), a normal LUN probe (REPORT LUNS, INQUIRY and VPD page
0x00, TEST UNIT READY, READ CAPACITY, MODE SENSE), READ, WRITE (the rest of
a write after its immediate data is asked for with R2Ts), SYNCHRONIZE CACHE,
NOP-Out and Logout.

With --event NAME it plays a target event on the first READ instead (see
EVENTS): transient statuses the initiator must retry, or a capacity that
grows with a UNIT ATTENTION.

With --alua FILE it is an ALUA target (SPC-4 §5.15, implicit: TPGS 01b in
standard INQUIRY) with two target port groups: the main portal (--port) is
TPG 1 / relative target port 1, the second portal (--port2, by default a
free one) TPG 2 / port 2, both presenting the same LU (VPD 0x80 serial, VPD
0x83 NAA), each connection served on a thread of its own.  VPD 0x83 names
the TPG (association 1, type 5) and relative target port (type 4) of the
portal a connection came in on.  FILE holds the states, one "TPG STATE"
line each (STATE a number or ao, ano, standby, unavailable, lbd, offline,
transitioning; "#" starts a comment; a TPG not named is active/optimized),
and is read again whenever its mtime, size or inode changed, at every
command.  REPORT TARGET PORT GROUPS answers both TPGs with those states
(length-only or extended header, as asked).  When a state changed since a
connection last saw the states, the next command on it for LUN 1 (other
than INQUIRY) gets CHECK CONDITION, UNIT ATTENTION, ASYMMETRIC ACCESS STATE
CHANGED (2Ah/06h), once.  READ and WRITE through a TPG in standby get NOT
READY 04h/0Bh, unavailable or offline 04h/0Ch, transitioning 04h/0Ah.
Without --alua, TPGS is 0 and MAINTENANCE IN is an invalid opcode (20h/00h).
--alua takes no --misbehave but silent_rtpg.

SendTargets (RFC 7143 Appendix C) answers the target with the portal the
connection came in on; each --report ADDR adds one more TargetAddress, sent
as given (host[:port][,tag]: other portals, other spellings of one, host
names), for an initiator that must not take a target's word for where to
connect.

With --misbehave NAME it breaks the protocol once: in the login for the
login_* names, in READ CAPACITY for capacity_overflow, otherwise on the
first READ or WRITE command (see TRIGGER).  After that it serves normally
again, or with --always it misbehaves again on every new connection.
Standard library only.
"""
import argparse
import random
import select
import os
import socket
import sys
import threading
import time

IQN = "iqn.2026-11.org.example:malicious"
BLOCK = 512
NBLOCKS = 2048
LUN_ID = 1
MAX_RECV_DSL = 8192          # ours: what the initiator may send us
DATA_IN_CHUNK = 8192         # Data-In payload per PDU
MAX_BURST = 262144
FIRST_BURST = 65536
RESERVED = 0xFFFFFFFF

OP_NOP_OUT, OP_SCSI_CMD, OP_TMF_REQ, OP_LOGIN_REQ, OP_TEXT_REQ, OP_DATA_OUT, OP_LOGOUT_REQ = 0, 1, 2, 3, 4, 5, 6
OP_NOP_IN, OP_SCSI_RSP, OP_TMF_RSP, OP_LOGIN_RSP, OP_TEXT_RSP, OP_DATA_IN, OP_LOGOUT_RSP = (
    0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26)
OP_R2T, OP_ASYNC, OP_REJECT = 0x31, 0x32, 0x3F

# name -> what triggers it: "login", "read" (first READ command) or "write"
TRIGGER = {
    "data_in_wrong_itt": "read",
    "data_in_beyond_buffer": "read",
    "data_in_offset_gap": "read",
    "data_in_datasn_wrong": "read",
    "data_in_short_good": "read",
    "dsl_over_limit": "read",
    "dsl_max": "read",
    "rsp_impossible_residual": "read",
    "rsp_good_short": "read",
    "rsp_sense_length_over_segment": "read",
    "rsp_huge_sense": "read",
    "rsp_unknown_itt": "read",
    "r2t_for_read": "read",
    "statsn_out_of_window": "read",
    "maxcmdsn_below_expcmdsn": "read",
    "nop_in_flood": "read",
    "async_bad_fields": "read",
    "reject_garbage": "read",
    "reject_command": "read",
    "text_rsp_unsolicited": "read",
    "data_in_trickle": "read",
    "pdu_cut_then_close": "read",
    "ahs_overflow": "read",
    "unknown_opcode": "read",
    "status_without_final": "read",
    "r2t_beyond_length": "write",
    "r2t_zero_length": "write",
    "r2t_flood": "write",
    "r2t_small_bursts": "write",
    "data_in_for_write": "write",
    "login_unknown_key": "login",
    "login_duplicate_key": "login",
    "login_bad_value": "login",
    "login_huge_text": "login",
    "login_wrong_itt": "login",
    "login_no_tsih": "login",
    "login_silent": "login",
    "login_empty_continue": "login",  # the mount's operational stage answered with empty C=1 responses, for ever
    "capacity_overflow": "probe",
    "capacity_block_size_zero": "probe",  # READ CAPACITY (16) and (10) report a logical block length of 0
    "capacity_block_size_huge": "probe",  # READ CAPACITY (16) reports a logical block length of 1 MiB
    "no_response": "read",        # the READ is never answered: cmd_timeout, then ABORT TASK
    "tmf_ignored": "read",        # neither the READ nor task management is answered
    "window_closed": "read",      # MaxCmdSN = ExpCmdSN - 1 from then on: cmd_timeout drops the connection
    # the same on this connection and the next WINDOW_CLOSED_LOGINS (from their Login Responses on),
    # then the window opens: a command the window never lets out fails after 5 re-issues
    "window_closed_forever": "read",
    # Target events the initiator must follow (RFC 7143 §11.9, §11.13.5).
    "login_redirect_temporary": "login",   # 0x0101 to a second portal; the first READ there drops the connection
    "login_redirect_permanent": "login",   # 0x0102 to a second portal, the first one then closes; READ drops too
    "login_busy": "login",                 # 0x0301 service unavailable, once
    "login_out_of_resources": "login",     # 0x0302 out of resources, once
    "async_logout": "read",                # Async Message: target requests logout (AsyncEvent 1)
    "async_drop_connection": "read",       # Async Message: target will drop the connection (AsyncEvent 2)
    "async_renegotiate": "read",           # Async Message: target requests parameter negotiation (AsyncEvent 4)
    # Hostile loops and waits during recovery (see RECOVERY_LOGIN): the trigger drops the
    # connection, and the initiator's later logins meet a target that never finishes them.
    "recovery_login_empty_continue": "read",      # empty C=1 Login Responses, as fast as asked, for 8 s
    "recovery_login_empty_continue_nop": "nop",   # the same from the first NOP-Out ping on, for ever
    "recovery_login_slow_continue": "read",       # one empty C=1 Login Response every 0.5 s, for ever
    "recovery_login_silent": "read",              # later logins never answered (connection kept open)
    "recovery_login_empty_continue_stop": "read", # empty C=1 Login Responses for ever; SIGTERM meanwhile
    # later logins succeed, then no SCSI command is answered (the identity check after the reconnect)
    "recovery_probe_silent": "read",
    "recovery_probe_silent_stop": "read",         # the same; SIGTERM meanwhile
    "recovery_probe_slow": "read",                # later logins succeed, then each SCSI command is answered 1 s late
    "logout_time2wait_max": "read",               # AsyncEvent 1, then a Logout Response with Time2Wait 65535
    # Target-driven walks: GET LBA STATUS (LBPME set) answers one deallocated block at a time.
    "lba_status_one_block": "seek",
    # REPORT LUNS whose LUN LIST LENGTH always claims 8 bytes more than was asked for.
    "report_luns_growth": "probe",
    # Every write, from the first on, is asked for its first burst again and again (legal R2Ts, no end).
    "r2t_repeat_storm": "write",
    "write_rsp_early_good": "write",  # GOOD, residual 0, before the write's data came: the data is dropped
    "log_flood": "read",  # LOG_FLOOD unsolicited TMF Responses and as many unknown Async Messages, then the data
    # Control commands never answered on a live connection (see SILENT); SIGTERM and unmount meanwhile.
    "silent_probe_second_path": "probe",    # every command on the second session on: its identity probe
    "silent_rtpg": "probe",                 # REPORT TARGET PORT GROUPS (an ALUA target, --alua)
    "silent_rescan_report_luns": "rescan",  # REPORT LUNS from the first READ on: the next rescan's
    # Reconnect churn (see CHURN): the first READ is never answered, and on every new connection
    # its re-issue meets the same announcement again.
    "reconnect_churn_drop": "read",         # AsyncEvent 2: the target will drop the connection
    "reconnect_churn_logout": "read",       # AsyncEvent 1: the target asks for a logout within 2 s
    # A target that freezes (as under SIGSTOP) when the first READ arrives: nothing is answered any
    # more, NOP-Outs and later logins included, and every connection is kept open.  Stop meanwhile.
    "frozen_after_read": "read",
}

# silent_*: (when, opcodes) -- the SCSI commands (opcodes; None: every one) left
# unanswered, on every connection ("always"), from the second normal session's
# login on ("second") or from the first READ on ("after_read").  Task
# management for them is ignored too; NOP-Outs are answered, so the connection
# stays up.  Every connection is served on a thread of its own.
SILENT = {
    "silent_probe_second_path": ("second", None),
    "silent_rtpg": ("always", {0xA3}),
    "silent_rescan_report_luns": ("after_read", {0xA0}),
}

# reconnect_churn_*: the Async Message event each READ meets (the READ is never answered).
CHURN = {"reconnect_churn_drop": 2, "reconnect_churn_logout": 1}

# log_flood: bogus PDUs of each kind, each one ignored by the initiator with a line of its log
LOG_FLOOD = 1000

# What the later logins meet after a recovery_login_* trigger: mode, and until when
# (time.monotonic(); None: for ever).  Only the operational stage misbehaves.
RECOVERY_LOGIN = {
    "recovery_login_empty_continue": ("empty", 8.0),
    "recovery_login_empty_continue_nop": ("empty", None),
    "recovery_login_slow_continue": ("slow", None),
    "recovery_login_silent": ("silent", None),
    "recovery_login_empty_continue_stop": ("empty", None),
    "recovery_probe_silent": ("silent_commands", None),
    "recovery_probe_silent_stop": ("silent_commands", None),
    "recovery_probe_slow": ("slow_commands", None),
}

# window_closed_forever: new connections whose window stays closed (5: the command fails on the 6th loss)
WINDOW_CLOSED_LOGINS = 5

# Shared by the connections of one run: the second portal's port, and
# whether a redirection happened (so the redirected session's first READ
# drops the connection, which makes the initiator log in again).
STATE = {"report": [], "port2": 0, "redirected": "", "dropped_after_redirect": False,
         "bad_login": "", "bad_login_until": None, "time2wait": 0, "lba_status_cmds": 0,
         "logins": 0, "read_seen": False, "churn": 0}

# Misbehaviours left out of --list (and so of the suite).
GAPS = {}


# --event NAME: what the target does from the first READ on (not protocol
# violations: an initiator must ride them out).
EVENTS = {
    "busy": "BUSY for the first 5 READs",
    "task_set_full": "TASK SET FULL for the first 5 READs",
    "becoming_ready": "NOT READY, becoming ready (04h/01h) for 1.5 s",
    "never_ready": "NOT READY, becoming ready (04h/01h) for every READ",
    "ua_reset": "UNIT ATTENTION power on / reset (29h/00h) once",
    "ua_capacity": "capacity doubles; UNIT ATTENTION CAPACITY DATA HAS CHANGED (2Ah/09h) once",
    "busy_write": "BUSY for the first 10 WRITEs (more than 8 immediate retries can ride out)",
}
EVENT_STATE = {"reads": 0, "writes": 0, "t0": None}

# --alua FILE: asymmetric access states (SPC-4 §6.36.2), read from FILE.
ALUA_STATES = {"ao": 0x0, "ano": 0x1, "standby": 0x2, "unavailable": 0x3, "lbd": 0x4, "offline": 0xE,
               "transitioning": 0xF}
ALUA_TPGS = (1, 2)                # TPG n is relative target port n: the main portal 1, the second 2
ALUA_IMPLICIT_TRANSITION_S = 5
ALUA_SERIAL = b"FAKE0001"
ALUA_NAA = bytes.fromhex("6001405fa4e0000100000000000000a1")  # NAA 6, the same through both portals
ALUA = {"file": "", "key": None, "states": {}, "lock": threading.Lock()}
# The NOT READY sense of READ and WRITE through a TPG in a state that does not process them.
ALUA_NOT_READY = {0x2: (0x04, 0x0B), 0x3: (0x04, 0x0C), 0xE: (0x04, 0x0C), 0xF: (0x04, 0x0A)}


def alua_states():
    """The states {tpg: state} from --alua FILE, read again when it changed (mtime, size, inode)."""
    with ALUA["lock"]:
        try:
            st = os.stat(ALUA["file"])
            key = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            key = None
        if key != ALUA["key"] or not ALUA["states"]:
            states = {t: 0 for t in ALUA_TPGS}
            try:
                with open(ALUA["file"]) as f:
                    for line in f:
                        words = line.split("#", 1)[0].split()
                        if len(words) != 2:
                            continue
                        tpg, name = words
                        v = ALUA_STATES.get(name.lower())
                        if v is None:
                            v = int(name, 0) & 0xF
                        if int(tpg) in states:
                            states[int(tpg)] = v
            except (OSError, ValueError) as e:
                log("--alua %s: %s (keeping the states)" % (ALUA["file"], e))
                states = ALUA["states"] or states
            if states != ALUA["states"]:
                log("ALUA states: %s" % " ".join("%d=0x%x" % kv for kv in sorted(states.items())))
            ALUA["key"] = key
            ALUA["states"] = states
        return dict(ALUA["states"])


def alua_rtpg(cdb):
    """REPORT TARGET PORT GROUPS parameter data for both TPGs, in the format the CDB asks for."""
    states = alua_states()
    desc = b""
    for tpg in ALUA_TPGS:
        # state; T_SUP|U_SUP|S_SUP|AN_SUP|AO_SUP; TPG; status code 2 (implicit); one target port
        desc += bytes([states[tpg], 0x8F]) + tpg.to_bytes(2, "big") + bytes([0, 2, 0, 1])
        desc += bytes(2) + tpg.to_bytes(2, "big")
    if cdb[1] >> 5 == 1:
        body = bytes([0x10, ALUA_IMPLICIT_TRANSITION_S, 0, 0]) + desc
    else:
        body = desc
    return len(body).to_bytes(4, "big") + body


def alua_vpd83(tpg):
    """VPD 0x83: the LU's NAA and T10 vendor id, then this portal's relative target port and TPG."""
    d = bytes([0x01, 0x03, 0, len(ALUA_NAA)]) + ALUA_NAA
    t10 = b"FAKE    " + ALUA_SERIAL
    d += bytes([0x02, 0x01, 0, len(t10)]) + t10
    # iSCSI protocol id 5, binary, PIV, association 1 (target port), type 4 / 5
    d += bytes([0x51, 0x94, 0, 4]) + tpg.to_bytes(4, "big")
    d += bytes([0x51, 0x95, 0, 4]) + tpg.to_bytes(4, "big")
    return bytes([0, 0x83]) + len(d).to_bytes(2, "big") + d


def disk_pattern():
    return bytearray(random.Random(20261130).randbytes(BLOCK * NBLOCKS))


def log(msg):
    # one write a line: print() writes the text and its newline apart, and
    # the lines of two connection threads then interleave ("...portfake_target: ...")
    sys.stderr.write("fake_target: " + msg + "\n")
    sys.stderr.flush()


class Closed(Exception):
    pass


def sense_fixed(key, asc, ascq):
    s = bytearray(18)
    s[0] = 0x70
    s[2] = key
    s[7] = 10
    s[12] = asc
    s[13] = ascq
    return bytes(s)


def bhs(op, flags=0, dlen=0, lun=0, itt=RESERVED, ahs=0):
    """A 48-byte BHS with the common fields set; the caller fills the rest."""
    h = bytearray(48)
    h[0] = op
    h[1] = flags
    h[4] = ahs
    h[5:8] = dlen.to_bytes(3, "big")
    h[8:16] = lun.to_bytes(8, "big")
    h[16:20] = itt.to_bytes(4, "big")
    return h


def pad(data):
    return data + b"\0" * ((4 - len(data) % 4) % 4)


def lun_field(lun):
    return (lun << 48) if lun < 256 else ((0x4000 | lun) << 48)


class Conn:
    def __init__(self, sock, disk, misbehave, event="", tpg=1):
        self.event = event
        self.tpg = tpg                              # --alua: the TPG of the portal it came in on
        self.alua_seen = alua_states() if ALUA["file"] else None
        self.s = sock
        self.disk = disk
        self.mis = misbehave
        self.trigger = TRIGGER.get(misbehave, GAPS.get(misbehave, ""))
        self.fired = False
        self.statsn = 0x1000
        self.expcmdsn = 1
        self.window = 32
        self.discovery = False
        self.writes = {}      # ITT -> write state
        self.pings = {}       # TTT of a NOP-In -> its ping data, echoed in the NOP-Out
        self.ttt = 0x100
        self.login_no = 0     # normal sessions' logins counted from 1 (SILENT "second")

    # ---- wire ----
    def recv_exact(self, n):
        out = bytearray()
        while len(out) < n:
            chunk = self.s.recv(n - len(out))
            if not chunk:
                raise Closed()
            out += chunk
        return bytes(out)

    def recv_pdu(self):
        h = self.recv_exact(48)
        ahs = h[4] * 4
        dlen = int.from_bytes(h[5:8], "big")
        if ahs:
            self.recv_exact(ahs)
        data = self.recv_exact(dlen + (4 - dlen % 4) % 4)[:dlen] if dlen else b""
        return h, data

    def send(self, h, data=b"", ahs_bytes=b""):
        self.s.sendall(bytes(h) + ahs_bytes + pad(data))

    def sn_fields(self, h, statsn=None, advance=True):
        """StatSN at 24, ExpCmdSN at 28, MaxCmdSN at 32."""
        if statsn is None:
            statsn = self.statsn
            if advance:
                self.statsn = (self.statsn + 1) & 0xFFFFFFFF
        h[24:28] = statsn.to_bytes(4, "big")
        h[28:32] = self.expcmdsn.to_bytes(4, "big")
        h[32:36] = ((self.expcmdsn + self.window - 1) & 0xFFFFFFFF).to_bytes(4, "big")
        return h

    # ---- login ----
    def login(self):
        stage_done = {}
        tsih = 0x2A
        answers_owed = []
        huge_sent = 0
        while True:
            h, data = self.recv_pdu()
            op = h[0] & 0x3F
            if op != OP_LOGIN_REQ:
                log("expected a Login Request, got opcode 0x%02x" % op)
                raise Closed()
            transit, cont = bool(h[1] & 0x80), bool(h[1] & 0x40)
            csg, nsg = (h[1] >> 2) & 3, h[1] & 3
            isid_tsih = h[8:16]
            itt = int.from_bytes(h[16:20], "big")
            cmdsn = int.from_bytes(h[24:28], "big")
            self.expcmdsn = cmdsn
            keys = []
            for item in data.split(b"\0"):
                if item:
                    k, _, v = item.decode("utf-8", "replace").partition("=")
                    keys.append((k, v))
            reply = []
            rsp_transit, rsp_nsg = transit, nsg
            status = (0, 0)
            if self.mis.startswith("login_redirect_") and self.fire("login"):
                permanent = self.mis.endswith("permanent")
                STATE["redirected"] = "permanent" if permanent else "temporary"
                addr = "TargetAddress=127.0.0.1:%d,1" % STATE["port2"]
                log("redirecting %s to port %d" % (STATE["redirected"], STATE["port2"]))
                self.login_rsp(itt, isid_tsih, False, False, csg, 0, 0, addr.encode() + b"\0",
                               (1, 2 if permanent else 1))
                raise Closed()
            if self.mis in ("login_busy", "login_out_of_resources") and self.fire("login"):
                self.login_rsp(itt, isid_tsih, False, False, csg, 0, 0, b"", (3, 1 if self.mis == "login_busy" else 2))
                raise Closed()
            if self.mis == "login_silent":
                log("not answering the login")
                while self.s.recv(65536):
                    pass
                raise Closed()
            if csg == 1 and self.mis == "login_empty_continue" and self.fire("login"):
                STATE["bad_login"] = "empty"
            if csg == 1 and self.bad_login_mode() not in ("", "silent_commands", "slow_commands"):
                self.bad_login(itt, isid_tsih, csg)
                raise Closed()
            if self.mis == "login_huge_text" and csg == 1:
                # Text continues (C bit) for ever, 8 KiB at a time.
                huge_sent += 1
                payload = (b"X-Junk%06d=" % huge_sent + b"j" * (MAX_RECV_DSL - 20)) [:MAX_RECV_DSL]
                self.login_rsp(itt, isid_tsih, False, True, csg, 0, 0, payload, (0, 0))
                continue
            if csg == 0:
                reply.append(("AuthMethod", "None"))
                reply.append(("TargetPortalGroupTag", "1"))
                names = dict(keys)
                if names.get("TargetName", IQN) != IQN:
                    status = (2, 3)
                # a discovery session (SendTargets) never takes a normal session's misbehaviour
                self.discovery = names.get("SessionType") == "Discovery"
                if not self.discovery and STATE.get("window_closed_logins", 0) > 0 and "window" not in stage_done:
                    stage_done["window"] = True
                    STATE["window_closed_logins"] -= 1
                    self.window = 0
                    log("window closed from the login on (%d more)" % STATE["window_closed_logins"])
            elif csg == 1:
                offered = dict(keys)
                for k, v in keys:
                    a = self.answer_key(k, v)
                    if a is not None:
                        reply.append((k, a))
                if self.mis == "login_unknown_key":
                    if "X-FakeTarget-Probe" not in stage_done:
                        stage_done["X-FakeTarget-Probe"] = True
                        reply.append(("X-FakeTarget-Probe", "1"))
                        reply.append(("FakeTargetUnknownKey", "Something"))
                        answers_owed = ["X-FakeTarget-Probe", "FakeTargetUnknownKey"]
                        rsp_transit = False  # we want the answers first
                    else:
                        for k in answers_owed:
                            if offered.get(k) != "NotUnderstood":
                                log("no NotUnderstood answer for %s: %r" % (k, offered))
                                status = (2, 7)
                        reply = []
                if self.mis == "login_duplicate_key":
                    reply.append(("MaxBurstLength", "4096"))
                if self.mis == "login_bad_value":
                    reply = [(k, "abc" if k == "MaxBurstLength" else v) for k, v in reply]
                if not transit:
                    rsp_transit = False
            rsp_itt = itt
            if self.mis == "login_wrong_itt":
                rsp_itt = (itt + 1) & 0xFFFFFFFF
            final = rsp_transit and rsp_nsg == 3
            text = b"".join(("%s=%s" % kv).encode() + b"\0" for kv in reply)
            use_tsih = tsih if final and self.mis != "login_no_tsih" else 0
            self.login_rsp(rsp_itt, isid_tsih, rsp_transit, False, csg, rsp_nsg if rsp_transit else 0, use_tsih,
                           text, status)
            if status != (0, 0):
                raise Closed()
            if final:
                self.expcmdsn = cmdsn
                if not self.discovery:
                    STATE["logins"] += 1
                    self.login_no = STATE["logins"]
                return

    @staticmethod
    def bad_login_mode():
        mode, until = STATE["bad_login"], STATE["bad_login_until"]
        if mode and until is not None and time.monotonic() >= until:
            log("recovery logins: behaving again")
            STATE["bad_login"] = mode = ""
        return mode

    def bad_login(self, itt, isid_tsih, csg):
        """Answer this login for as long as the initiator keeps it open, never finishing it."""
        mode = STATE["bad_login"]
        log("login during recovery: %s" % mode)
        if mode == "silent":
            while self.s.recv(65536):
                pass
            return
        n = 0
        while True:
            if mode == "slow":
                time.sleep(0.5)
            self.login_rsp(itt, isid_tsih, False, True, csg, 0, 0, b"", (0, 0))
            n += 1
            if n % 100000 == 0:
                log("%d empty Login Responses with C=1 on this connection" % n)
            h, _ = self.recv_pdu()
            if h[0] & 0x3F != OP_LOGIN_REQ:
                log("expected a Login Request, got opcode 0x%02x" % (h[0] & 0x3F))
                return

    def login_rsp(self, itt, isid_tsih, transit, cont, csg, nsg, tsih, text, status):
        flags = (0x80 if transit else 0) | (0x40 if cont else 0) | (csg << 2) | nsg
        h = bhs(OP_LOGIN_RSP, flags, len(text), 0, itt)
        h[8:14] = isid_tsih[0:6]
        h[14:16] = tsih.to_bytes(2, "big")
        self.sn_fields(h)
        h[36] = status[0]
        h[37] = status[1]
        self.send(h, text)

    @staticmethod
    def answer_key(k, v):
        def num(default):
            try:
                return int(v, 0)
            except ValueError:
                return default
        if k in ("HeaderDigest", "DataDigest"):
            return "None"
        if k == "MaxRecvDataSegmentLength":
            return str(MAX_RECV_DSL)
        if k == "MaxBurstLength":
            return str(min(num(MAX_BURST), MAX_BURST))
        if k == "FirstBurstLength":
            return str(min(num(FIRST_BURST), FIRST_BURST))
        if k == "ImmediateData":
            return "Yes" if v == "Yes" else "No"
        if k == "InitialR2T":
            return "Yes"
        if k == "MaxOutstandingR2T":
            return "1"
        if k in ("DataPDUInOrder", "DataSequenceInOrder"):
            return "Yes"
        if k == "DefaultTime2Wait":
            return str(max(num(2), 2))
        if k == "DefaultTime2Retain":
            return "0"
        if k == "ErrorRecoveryLevel":
            return "0"
        if k == "MaxConnections":
            return "1"
        if k in ("InitiatorName", "SessionType", "TargetName", "AuthMethod", "InitiatorAlias"):
            return None
        if v in ("NotUnderstood", "Irrelevant", "Reject"):
            return None
        return "NotUnderstood"

    # ---- full feature phase ----
    def serve(self):
        while True:
            h, data = self.recv_pdu()
            op = h[0] & 0x3F
            itt = int.from_bytes(h[16:20], "big")
            if op == OP_SCSI_CMD:
                cmdsn = int.from_bytes(h[24:28], "big")
                if not h[0] & 0x40:
                    self.expcmdsn = max(self.expcmdsn, (cmdsn + 1) & 0xFFFFFFFF)
                if STATE["bad_login"] == "silent_commands":
                    log("not answering SCSI command 0x%02x after the reconnect" % h[32])
                    continue
                if STATE["bad_login"] == "slow_commands":
                    time.sleep(1.0)
                self.scsi_cmd(h, data)
            elif op == OP_DATA_OUT:
                self.data_out(h, data)
            elif op == OP_NOP_OUT:
                if itt != RESERVED and self.fire("nop"):
                    self.start_bad_logins()
                    raise Closed()
                ttt = int.from_bytes(h[20:24], "big")
                if itt == RESERVED and ttt != RESERVED:
                    want = self.pings.pop(ttt, None)
                    if want is not None and data != want:
                        log("NOP-Out for TTT %d does not echo the ping data: closing" % ttt)
                        raise Closed()
                if itt != RESERVED:
                    r = bhs(OP_NOP_IN, 0x80, len(data), int.from_bytes(h[8:16], "big"), itt)
                    r[20:24] = RESERVED.to_bytes(4, "big")
                    self.sn_fields(r)
                    self.send(r, data)
            elif op == OP_LOGOUT_REQ:
                r = bhs(OP_LOGOUT_RSP, 0x80, 0, 0, itt)
                self.sn_fields(r)
                if STATE["time2wait"]:
                    r[40:42] = STATE["time2wait"].to_bytes(2, "big")  # Time2Wait
                    r[42:44] = (65535).to_bytes(2, "big")             # Time2Retain
                    log("Logout Response with Time2Wait %d" % STATE["time2wait"])
                    STATE["time2wait"] = 0
                self.send(r)
                log("logout")
                raise Closed()
            elif op == OP_TEXT_REQ and b"SendTargets=" in data:
                # SendTargets (RFC 7143 Appendix C): this target and the portal the connection came in on
                port = self.s.getsockname()[1]
                text = ("TargetName=%s\0TargetAddress=127.0.0.1:%d,1\0" % (IQN, port)).encode()
                text += b"".join(("TargetAddress=%s\0" % a).encode() for a in STATE["report"])
                r = bhs(OP_TEXT_RSP, 0x80, len(text), 0, itt)
                r[20:24] = RESERVED.to_bytes(4, "big")
                self.sn_fields(r)
                self.send(r, text)
                log("SendTargets answered")
            elif op == OP_TMF_REQ and getattr(self, "ignore_tmf", False):
                log("ignoring task management function %d" % (h[1] & 0x7F))
            elif op == OP_TMF_REQ:
                log("task management function %d: function complete" % (h[1] & 0x7F))
                if h[1] & 0x7F == 1:  # ABORT TASK: the referenced task is gone
                    self.writes.pop(int.from_bytes(h[20:24], "big"), None)
                r = bhs(OP_TMF_RSP, 0x80, 0, 0, itt)
                self.sn_fields(r)
                self.send(r)
            else:
                log("ignoring opcode 0x%02x" % op)

    def start_bad_logins(self):
        mode, secs = RECOVERY_LOGIN[self.mis]
        STATE["bad_login"] = mode
        STATE["bad_login_until"] = None if secs is None else time.monotonic() + secs
        log("dropping the connection; later logins: %s%s" % (mode, "" if secs is None else " for %g s" % secs))

    def fire(self, kind):
        if self.trigger == kind and not self.fired:
            self.fired = True
            log("misbehaving: " + self.mis)
            return True
        return False

    def respond(self, itt, status=0, sense=b"", resid=0, under=False, over=False, statsn=None):
        data = b""
        if sense:
            data = len(sense).to_bytes(2, "big") + sense
        flags = 0x80 | (0x02 if under else 0) | (0x04 if over else 0)
        h = bhs(OP_SCSI_RSP, flags, len(data), 0, itt)
        h[3] = status
        self.sn_fields(h, statsn)
        h[44:48] = resid.to_bytes(4, "big")
        self.send(h, data)

    def check(self, itt, key, asc, ascq):
        self.respond(itt, 0x02, sense_fixed(key, asc, ascq))

    def data_in(self, itt, lun, payload, offset, datasn, final=False, status=None, resid=0, under=False,
                flags=None, dlen=None, ahs_bytes=b"", statsn=None):
        f = 0x80 if final else 0
        if status is not None:
            f |= 0x01 | (0x02 if under else 0)
        if flags is not None:
            f = flags
        h = bhs(OP_DATA_IN, f, len(payload) if dlen is None else dlen, lun, itt, ahs=len(ahs_bytes) // 4)
        h[20:24] = RESERVED.to_bytes(4, "big")
        if status is not None:
            h[3] = status
            self.sn_fields(h, statsn)
        else:
            self.sn_fields(h, self.statsn, advance=False)
        h[36:40] = datasn.to_bytes(4, "big")
        h[40:44] = offset.to_bytes(4, "big")
        h[44:48] = resid.to_bytes(4, "big")
        self.send(h, payload, ahs_bytes)

    def send_read_data(self, itt, lun, edtl, payload):
        """Normal Data-In sequence, status in the last PDU."""
        n = min(len(payload), edtl)
        resid = edtl - n
        if n == 0:
            self.respond(itt, 0, resid=resid, under=resid > 0)
            return
        off, sn = 0, 0
        while off < n:
            chunk = payload[off:off + DATA_IN_CHUNK]
            last = off + len(chunk) >= n
            if last:
                self.data_in(itt, lun, chunk, off, sn, final=True, status=0, resid=resid, under=resid > 0)
            else:
                self.data_in(itt, lun, chunk, off, sn)
            off += len(chunk)
            sn += 1

    def capacity_block_size(self):
        """The logical block length READ CAPACITY reports (capacity_block_size_*: a bad one)."""
        if self.mis == "capacity_block_size_zero":
            self.fired = True
            return 0
        if self.mis == "capacity_block_size_huge":
            self.fired = True
            return 1 << 20
        return BLOCK

    def silenced(self, op):
        """SILENT: whether command op is left unanswered (logged once per connection and opcode)."""
        spec = SILENT.get(self.mis)
        if not spec:
            return False
        when, ops = spec
        if (ops is not None and op not in ops) or (when == "second" and self.login_no < 2) or \
                (when == "after_read" and not STATE["read_seen"]):
            return False
        self.ignore_tmf = True
        seen = self.__dict__.setdefault("silent_seen", set())
        if op not in seen:
            seen.add(op)
            log("not answering opcode 0x%02x (session %d)" % (op, self.login_no))
        return True

    def churn(self, itt):
        """CHURN: announce the drop or ask for the logout; the READ (itt) stays unanswered."""
        event = STATE["churn"] = STATE["churn"] or CHURN[self.mis]
        self.send_async(event, 60 if event == 2 else 0, 0 if event == 2 else 2)
        log("READ ITT 0x%08x: AsyncEvent %d, the READ left unanswered" % (itt, event))

    def send_async(self, event, param2, param3):
        """An Async Message (RFC 7143 §11.9): event, Parameter2 (Time2Wait), Parameter3 (seconds to log out)."""
        h = bhs(OP_ASYNC, 0x80, 0, 0, RESERVED)
        self.sn_fields(h)
        h[36] = event
        h[40:42] = param2.to_bytes(2, "big")
        h[42:44] = param3.to_bytes(2, "big")
        self.send(h)

    def scsi_cmd(self, h, data):
        lun = int.from_bytes(h[8:16], "big")
        itt = int.from_bytes(h[16:20], "big")
        edtl = int.from_bytes(h[20:24], "big")
        cdb = h[32:48]
        op = cdb[0]
        if self.silenced(op):
            return
        if op == 0xA0:  # REPORT LUNS
            body = (8).to_bytes(4, "big") + bytes(4) + lun_field(LUN_ID).to_bytes(8, "big")
            alloc = int.from_bytes(cdb[6:10], "big")
            if self.mis == "report_luns_growth":
                STATE["report_luns"] = STATE.get("report_luns", 0) + 1
                log("REPORT LUNS #%d (allocation length %d)" % (STATE["report_luns"], alloc))
                body = alloc.to_bytes(4, "big") + body[4:]  # the list "needs" alloc + 8 bytes
            self.send_read_data(itt, lun, edtl, body[:alloc])
            return
        if lun == lun_field(LUN_ID) and self.alua_seen is not None and self.alua_cmd(itt, lun, edtl, op, cdb):
            return
        if lun != lun_field(LUN_ID):
            if op == 0x12:
                inq = bytearray(36)
                inq[0] = 0x7F  # no device here
                self.send_read_data(itt, lun, edtl, bytes(inq)[:int.from_bytes(cdb[3:5], "big")])
            else:
                self.check(itt, 0x05, 0x25, 0x00)
            return
        if op == 0x12:  # INQUIRY
            alloc = int.from_bytes(cdb[3:5], "big")
            if cdb[1] & 1:
                if self.alua_seen is not None and cdb[2] in (0x00, 0x80, 0x83):
                    body = {0x00: bytes([0, 0x00, 0, 3, 0x00, 0x80, 0x83]),
                            0x80: bytes([0, 0x80, 0, len(ALUA_SERIAL)]) + ALUA_SERIAL,
                            0x83: alua_vpd83(self.tpg)}[cdb[2]]
                    self.send_read_data(itt, lun, edtl, body[:alloc])
                    return
                if cdb[2] != 0x00:
                    self.check(itt, 0x05, 0x24, 0x00)
                    return
                body = bytes([0, 0x00, 0, 1, 0x00])
            else:
                inq = bytearray(96)
                inq[0] = 0x00
                inq[2] = 0x05
                inq[3] = 0x02
                inq[4] = 96 - 5
                if self.alua_seen is not None:
                    inq[5] = 0x10  # TPGS 01b: implicit ALUA
                inq[7] = 0x02  # CmdQue
                inq[8:16] = b"FAKE    "
                inq[16:32] = b"MALICIOUS DISK  "
                inq[32:36] = b"0001"
                body = bytes(inq)
            self.send_read_data(itt, lun, edtl, body[:alloc])
        elif op == 0x00:  # TEST UNIT READY
            self.respond(itt)
        elif op == 0x9E and (cdb[1] & 0x1F) == 0x10:  # READ CAPACITY(16)
            body = bytearray(32)
            last = len(self.disk) // BLOCK - 1
            if self.mis == "capacity_overflow" and self.fire("probe"):
                last = (1 << 56) - 1  # 2^56 blocks of 512 bytes: 2^65 bytes
            body[0:8] = last.to_bytes(8, "big")
            body[8:12] = self.capacity_block_size().to_bytes(4, "big")
            if self.mis == "lba_status_one_block":
                body[14] = 0x80  # LBPME: GET LBA STATUS answers
            alloc = int.from_bytes(cdb[10:14], "big")
            self.send_read_data(itt, lun, edtl, bytes(body)[:alloc])
        elif op == 0x9E and (cdb[1] & 0x1F) == 0x12 and self.mis == "lba_status_one_block":  # GET LBA STATUS
            # One descriptor of one deallocated block, however many were asked for.
            self.fire("seek")
            lba = int.from_bytes(cdb[2:10], "big")
            STATE["lba_status_cmds"] += 1
            log("GET LBA STATUS #%d (LBA %d)" % (STATE["lba_status_cmds"], lba))
            body = (20).to_bytes(4, "big") + bytes(4) + lba.to_bytes(8, "big") + (1).to_bytes(4, "big") + \
                bytes([1, 0, 0, 0])
            self.send_read_data(itt, lun, edtl, body[:int.from_bytes(cdb[10:14], "big")])
        elif op == 0x25:  # READ CAPACITY(10)
            self.send_read_data(itt, lun, edtl, (len(self.disk) // BLOCK - 1).to_bytes(4, "big") +
                                self.capacity_block_size().to_bytes(4, "big"))
        elif op == 0x1A:  # MODE SENSE(6)
            self.send_read_data(itt, lun, edtl, bytes([3, 0, 0, 0])[:cdb[4]])
        elif op == 0x5A:  # MODE SENSE(10)
            self.send_read_data(itt, lun, edtl, bytes([0, 6, 0, 0, 0, 0, 0, 0])[:int.from_bytes(cdb[7:9], "big")])
        elif op in (0x35, 0x91):  # SYNCHRONIZE CACHE
            self.respond(itt)
        elif op in (0x28, 0x88):
            lba, n = (int.from_bytes(cdb[2:6], "big"), int.from_bytes(cdb[7:9], "big")) if op == 0x28 else (
                int.from_bytes(cdb[2:10], "big"), int.from_bytes(cdb[10:14], "big"))
            if self.event and self.event_read(itt):
                return
            STATE["read_seen"] = True
            if STATE["churn"] or (self.mis in CHURN and self.fire("read")):
                self.churn(itt)  # on every later connection too (the misbehaviour itself is once)
                return
            if lba + n > len(self.disk) // BLOCK:
                self.check(itt, 0x05, 0x21, 0x00)
                return
            payload = bytes(self.disk[lba * BLOCK:(lba + n) * BLOCK])
            if STATE["redirected"] and not STATE["dropped_after_redirect"]:
                STATE["dropped_after_redirect"] = True
                log("first READ after the redirection: dropping the connection")
                raise Closed()
            if self.fire("read"):
                self.misbehave_read(itt, lun, edtl, payload)
            else:
                self.send_read_data(itt, lun, edtl, payload)
        elif op in (0x2A, 0x8A):
            lba, n = (int.from_bytes(cdb[2:6], "big"), int.from_bytes(cdb[7:9], "big")) if op == 0x2A else (
                int.from_bytes(cdb[2:10], "big"), int.from_bytes(cdb[10:14], "big"))
            if lba + n > len(self.disk) // BLOCK:
                self.check(itt, 0x05, 0x21, 0x00)
                return
            if self.event == "busy_write" and EVENT_STATE["writes"] < 10:
                EVENT_STATE["writes"] += 1
                log("event busy_write: write %d" % EVENT_STATE["writes"])
                self.respond(itt, 0x08)
                return
            w = {"itt": itt, "lun": lun, "lba": lba, "edtl": edtl, "buf": bytearray(edtl), "got": 0,
                 "r2t_off": 0, "r2tsn": 0, "burst_end": 0}
            w["buf"][:len(data)] = data
            w["got"] = len(data)
            self.writes[itt] = w
            if self.fire("write"):
                self.misbehave_write(w)
                return
            self.write_progress(w)
        else:
            self.check(itt, 0x05, 0x20, 0x00)

    def alua_cmd(self, itt, lun, edtl, op, cdb):
        """--alua: the UNIT ATTENTION of a state change, RTPG, NOT READY for READ/WRITE; True when answered."""
        states = alua_states()
        if states != self.alua_seen and op != 0x12:
            log("TPG %d connection: ASYMMETRIC ACCESS STATE CHANGED (%s)" % (
                self.tpg, " ".join("%d=0x%x" % kv for kv in sorted(states.items()))))
            self.alua_seen = states
            self.check(itt, 0x06, 0x2A, 0x06)
            return True
        if op == 0xA3 and (cdb[1] & 0x1F) == 0x0A:  # MAINTENANCE IN: REPORT TARGET PORT GROUPS
            self.send_read_data(itt, lun, edtl, alua_rtpg(cdb)[:int.from_bytes(cdb[6:10], "big")])
            return True
        sense = ALUA_NOT_READY.get(states[self.tpg])
        if sense and op in (0x28, 0x88, 0x2A, 0x8A):
            self.check(itt, 0x02, sense[0], sense[1])
            return True
        return False

    def event_read(self, itt):
        """Play --event on a READ; True when it answered the command."""
        st = EVENT_STATE
        st["reads"] += 1
        if st["t0"] is None:
            st["t0"] = time.monotonic()
        e = self.event
        if e in ("busy", "task_set_full") and st["reads"] <= 5:
            log("event %s: read %d" % (e, st["reads"]))
            self.respond(itt, 0x08 if e == "busy" else 0x28)
            return True
        if (e == "becoming_ready" and time.monotonic() - st["t0"] < 1.5) or e == "never_ready":
            self.check(itt, 0x02, 0x04, 0x01)
            return True
        if e == "ua_reset" and st["reads"] == 1:
            self.check(itt, 0x06, 0x29, 0x00)
            return True
        if e == "ua_capacity" and st["reads"] == 1:
            self.disk.extend(disk_pattern())  # twice the blocks; the new half repeats the pattern
            log("event ua_capacity: now %d blocks" % (len(self.disk) // BLOCK))
            self.check(itt, 0x06, 0x2A, 0x09)
            return True
        return False

    def send_r2t(self, w, off, length, ttt=None):
        self.send(self.r2t_pdu(w, off, length, ttt))

    def r2t_pdu(self, w, off, length, ttt=None):
        h = bhs(OP_R2T, 0x80, 0, w["lun"], w["itt"])
        if ttt is None:
            ttt = self.ttt
            self.ttt += 1
        h[20:24] = ttt.to_bytes(4, "big")
        self.sn_fields(h, self.statsn, advance=False)
        h[36:40] = w["r2tsn"].to_bytes(4, "big")
        w["r2tsn"] += 1
        h[40:44] = off.to_bytes(4, "big")
        h[44:48] = length.to_bytes(4, "big")
        return h

    def write_progress(self, w):
        if STATE.get("r2t_storm"):
            STATE["r2ts"] = STATE.get("r2ts", 0) + 1
            if STATE["r2ts"] % 50 == 1:
                log("R2T storm: R2T #%d (ITT 0x%08x)" % (STATE["r2ts"], w["itt"]))
            time.sleep(0.01)
            w["burst_end"] = min(MAX_BURST, w["edtl"])
            self.send_r2t(w, 0, w["burst_end"])
            return
        if w["got"] >= w["edtl"]:
            lba = w["lba"]
            self.disk[lba * BLOCK:lba * BLOCK + w["edtl"]] = w["buf"][:w["edtl"]]
            del self.writes[w["itt"]]
            self.respond(w["itt"])
            return
        off = w["got"]
        length = min(w.get("burst", MAX_BURST), w["edtl"] - off)
        w["burst_end"] = off + length
        self.send_r2t(w, off, length)

    def data_out(self, h, data):
        itt = int.from_bytes(h[16:20], "big")
        off = int.from_bytes(h[40:44], "big")
        w = self.writes.get(itt)
        if w is None:
            return
        if off + len(data) <= w["edtl"]:
            w["buf"][off:off + len(data)] = data
        w["got"] = max(w["got"], off + len(data))
        if h[1] & 0x80 and not w.get("dead"):
            self.write_progress(w)

    # ---- misbehaviours ----
    def misbehave_write(self, w):
        m = self.mis
        if m == "r2t_small_bursts":
            # Legal: one R2T at a time for 3000 bytes each (odd offsets).
            w["burst"] = 3000
            self.write_progress(w)
            return
        if m == "r2t_repeat_storm":
            STATE["r2t_storm"] = True
            self.write_progress(w)
            return
        w["dead"] = True  # Data-Out for this write is swallowed
        rest = w["edtl"] - w["got"]
        if m == "write_rsp_early_good":
            log("GOOD for the write after %d of %d bytes; its data is dropped" % (w["got"], w["edtl"]))
            del self.writes[w["itt"]]
            self.respond(w["itt"])
            return
        if m == "r2t_beyond_length":
            self.send_r2t(w, w["got"], rest + 4096)
        elif m == "r2t_zero_length":
            self.send_r2t(w, w["got"], 0)
        elif m == "data_in_for_write":
            self.data_in(w["itt"], w["lun"], bytes(512), 0, 0)
        elif m == "r2t_flood":
            # 16 R2Ts in one go where MaxOutstandingR2T=1 allows one.
            burst = b""
            for i in range(16):
                burst += bytes(self.r2t_pdu(w, (i * 512) % w["edtl"], 512))
            self.s.sendall(burst)

    def swallow(self):
        """Read and drop whatever the initiator sends until it closes the connection (a frozen target)."""
        while self.s.recv(65536):
            pass
        raise Closed()

    def misbehave_read(self, itt, lun, edtl, payload):
        m = self.mis
        if m == "frozen_after_read":
            STATE["frozen"] = True
            log("READ ITT 0x%08x: frozen from now on, nothing answered" % itt)
            self.swallow()
        n = len(payload)
        half = payload[:n // 2]
        if m == "data_in_wrong_itt":
            self.data_in(itt ^ 0x00FF0000, lun, payload[:DATA_IN_CHUNK], 0, 0)
        elif m == "data_in_beyond_buffer":
            self.data_in(itt, lun, payload + bytes(4096), 0, 0, final=True, status=0)
        elif m == "data_in_offset_gap":
            self.data_in(itt, lun, payload[:DATA_IN_CHUNK], 0, 0)
            self.data_in(itt, lun, payload[2 * DATA_IN_CHUNK:3 * DATA_IN_CHUNK], 2 * DATA_IN_CHUNK, 1)
        elif m == "data_in_datasn_wrong":
            self.data_in(itt, lun, payload[:DATA_IN_CHUNK], 0, 0)
            self.data_in(itt, lun, payload[DATA_IN_CHUNK:2 * DATA_IN_CHUNK], DATA_IN_CHUNK, 7)
        elif m == "data_in_short_good":
            # Half the data, then GOOD in the last Data-In without an underflow.
            self.data_in(itt, lun, half, 0, 0, final=True, status=0)
        elif m == "dsl_over_limit":
            self.data_in(itt, lun, bytes(262144 + 512), 0, 0)
        elif m == "dsl_max":
            self.data_in(itt, lun, b"", 0, 0, dlen=0xFFFFFF)
            self.s.sendall(bytes(65536))
        elif m == "rsp_impossible_residual":
            self.send_data_only(itt, lun, payload)
            self.respond(itt, 0, resid=edtl + 4096, under=True)
        elif m == "rsp_good_short":
            self.send_data_only(itt, lun, half)
            self.respond(itt, 0)
        elif m == "rsp_sense_length_over_segment":
            data = (200).to_bytes(2, "big") + sense_fixed(0x03, 0x11, 0x00)
            h = bhs(OP_SCSI_RSP, 0x80, len(data), 0, itt)
            h[3] = 0x02
            self.sn_fields(h)
            self.send(h, data)
        elif m == "rsp_huge_sense":
            # 65535 bytes of descriptor-format sense with nonsense descriptors.
            s = bytearray(random.Random(7).randbytes(65535))
            s[0] = 0x72
            s[1] = 0x03
            s[2] = 0x11
            s[3] = 0x00
            s[7] = 0xFF
            self.respond(itt, 0x02, bytes(s))
        elif m == "rsp_unknown_itt":
            self.respond((itt + 0x12340000) & 0xFFFFFFFF)
        elif m == "r2t_for_read":
            self.send_r2t({"lun": lun, "itt": itt, "r2tsn": 0}, 0, 512)
        elif m == "statsn_out_of_window":
            self.statsn = (self.statsn + 0x80000000 - 5) & 0xFFFFFFFF
            self.send_read_data(itt, lun, edtl, payload)
        elif m == "maxcmdsn_below_expcmdsn":
            self.window = -3  # MaxCmdSN = ExpCmdSN - 4 from now on
            self.send_read_data(itt, lun, edtl, payload)
            self.window = 32
        elif m == "nop_in_flood":
            # 2000 NOP-Ins, every other one a ping (TTT set) with 4 KiB of
            # data the answering NOP-Out must echo.
            for i in range(2000):
                ping = bytes([i & 0xFF, i >> 8]) * 2048 if i % 2 else b""
                if ping:
                    self.pings[i] = ping
                h = bhs(OP_NOP_IN, 0x80, len(ping), 0, RESERVED)
                h[20:24] = (i if i % 2 else RESERVED).to_bytes(4, "big")
                self.sn_fields(h, self.statsn, advance=False)
                self.send(h, ping)
            self.send_read_data(itt, lun, edtl, payload)
        elif m == "async_bad_fields":
            # SenseLength 65535 in front of 1000 bytes of junk.
            junk = b"\xff\xff" + random.Random(3).randbytes(1000)
            h = bhs(OP_ASYNC, 0x80, len(junk), 0xDEADBEEFCAFEF00D, RESERVED)
            self.sn_fields(h)
            h[36] = 0xEE
            h[37] = 0x77
            h[38:44] = b"\xff\xff\x00\x00\xff\xff"
            self.send(h, junk)
            h = bhs(OP_ASYNC, 0x80, 3, 0, 0x12345678)
            self.sn_fields(h)
            h[36] = 0x00  # SCSI async event with a 1-byte sense "segment"
            self.send(h, b"\x00\x40\x70")
            self.send_read_data(itt, lun, edtl, payload)
        elif m == "reject_garbage":
            h = bhs(OP_REJECT, 0x80, 10, 0, RESERVED)
            h[2] = 0x09
            self.sn_fields(h)
            self.send(h, bytes(10))
        elif m == "reject_command":
            # A well-formed Reject of the READ itself (reason: protocol error).
            cmd = bhs(OP_SCSI_CMD, 0xC1, 0, lun, itt)
            h = bhs(OP_REJECT, 0x80, 48, 0, RESERVED)
            h[2] = 0x04
            self.sn_fields(h)
            self.send(h, bytes(cmd))
        elif m == "text_rsp_unsolicited":
            # A Text Response nobody asked for, then the data.
            h = bhs(OP_TEXT_RSP, 0x80, 12, 0, 0x7777)
            h[20:24] = RESERVED.to_bytes(4, "big")
            self.sn_fields(h)
            self.send(h, b"X-Foo=bar\0\0\0")
            self.send_read_data(itt, lun, edtl, payload)
        elif m == "data_in_trickle":
            # Legal but awkward: odd segment lengths (with padding), each PDU
            # written in three pieces with pauses between them.
            sizes = [1, 3, 510, 1021, 8191, 2, 4093, 7]
            off, sn, i = 0, 0, 0
            while off < n:
                k = min(sizes[i % len(sizes)], n - off)
                last = off + k == n
                f = (0x81 if last else 0x00)
                h = bhs(OP_DATA_IN, f, k, lun, itt)
                h[20:24] = RESERVED.to_bytes(4, "big")
                if last:
                    self.sn_fields(h)
                else:
                    self.sn_fields(h, self.statsn, advance=False)
                h[36:40] = sn.to_bytes(4, "big")
                h[40:44] = off.to_bytes(4, "big")
                wire = bytes(h) + pad(payload[off:off + k])
                cuts = sorted({len(wire) // 3, 47, 48 + k // 2})
                prev = 0
                for c in cuts + [len(wire)]:
                    if c > prev:
                        self.s.sendall(wire[prev:c])
                        if i % 8 == 0:
                            time.sleep(0.002)
                    prev = c
                off += k
                sn += 1
                i += 1
        elif m in ("async_logout", "async_drop_connection", "async_renegotiate"):
            event = {"async_logout": 1, "async_drop_connection": 2, "async_renegotiate": 4}[m]
            self.send_async(event, 0 if event == 1 else 1, 3 if event == 1 else 0)
            log("sent AsyncEvent %d" % event)
            self.send_read_data(itt, lun, edtl, payload)
        elif m in RECOVERY_LOGIN:
            self.start_bad_logins()
            raise Closed()
        elif m == "logout_time2wait_max":
            STATE["time2wait"] = 65535
            h = bhs(OP_ASYNC, 0x80, 0, 0, RESERVED)
            self.sn_fields(h)
            h[36] = 1                                 # AsyncEvent 1: logout requested
            h[42:44] = (1).to_bytes(2, "big")         # Parameter3: within 1 s
            self.send(h)
            log("sent AsyncEvent 1")
            self.send_read_data(itt, lun, edtl, payload)
        elif m == "no_response":
            log("not answering the READ")
        elif m == "tmf_ignored":
            log("not answering the READ, nor ABORT TASK or LOGICAL UNIT RESET")
            self.ignore_tmf = True
        elif m == "window_closed":
            self.window = 0
            self.send_read_data(itt, lun, edtl, payload)
        elif m == "window_closed_forever":
            self.window = 0
            STATE["window_closed_logins"] = WINDOW_CLOSED_LOGINS
            self.send_read_data(itt, lun, edtl, payload)
        elif m == "pdu_cut_then_close":
            h = bhs(OP_DATA_IN, 0x80, len(payload), lun, itt)
            self.s.sendall(bytes(h[:20]))
            time.sleep(0.2)
            self.s.shutdown(socket.SHUT_RDWR)
            raise Closed()
        elif m == "ahs_overflow":
            ahs = bytearray(random.Random(5).randbytes(255 * 4))
            ahs[0:3] = b"\xff\xff\x01"  # AHSLength 65535, type 1
            k = min(DATA_IN_CHUNK, n)  # the last PDU (a read of one chunk or less: the only one)
            self.send_data_only(itt, lun, payload[:n - k])
            self.data_in(itt, lun, payload[n - k:], n - k, -(-(n - k) // DATA_IN_CHUNK),
                         final=True, status=0, ahs_bytes=bytes(ahs))
        elif m == "unknown_opcode":
            h = bhs(0x1C, 0x80, 8, 0, itt)
            self.sn_fields(h)
            self.send(h, b"whatever")
        elif m == "status_without_final":
            k = min(DATA_IN_CHUNK, n)
            self.send_data_only(itt, lun, payload[:n - k])
            self.data_in(itt, lun, payload[n - k:], n - k, -(-(n - k) // DATA_IN_CHUNK),
                         final=False, status=0, flags=0x01)
        elif m == "log_flood":
            for i in range(LOG_FLOOD):
                h = bhs(OP_TMF_RSP, 0x80, 0, 0, 0x7700000 + i)
                self.sn_fields(h)
                self.send(h)
            for i in range(LOG_FLOOD):
                h = bhs(OP_ASYNC, 0x80, 0, lun, RESERVED)
                self.sn_fields(h)
                h[36] = 0xFF  # AsyncEvent 255, vendor specific
                h[37] = i & 0xFF
                self.send(h)
            self.send_read_data(itt, lun, edtl, payload)
        else:
            log("unknown misbehaviour %s: serving normally" % m)
            self.send_read_data(itt, lun, edtl, payload)

    def send_data_only(self, itt, lun, payload):
        """Data-In PDUs without status (a SCSI Response follows)."""
        off, sn = 0, 0
        while off < len(payload):
            chunk = payload[off:off + DATA_IN_CHUNK]
            last = off + len(chunk) >= len(payload)
            self.data_in(itt, lun, chunk, off, sn, final=last)
            off += len(chunk)
            sn += 1


def serve_thread(c, sock, peer):
    """--alua or SILENT: one connection on a thread of its own."""
    try:
        c.login()
        log("logged in from %s:%d (TPG %d)" % (peer[0], peer[1], c.tpg))
        c.serve()
    except (Closed, ConnectionError, BrokenPipeError, OSError):
        pass
    finally:
        sock.close()
        log("connection closed (TPG %d)" % c.tpg)


def main():
    ap = argparse.ArgumentParser(description="scriptable misbehaving iSCSI target")
    ap.add_argument("--port", type=int)
    ap.add_argument("--misbehave", default="")
    ap.add_argument("--always", action="store_true", help="misbehave on every connection, not once")
    ap.add_argument("--dump", nargs=2, type=int, metavar=("OFFSET", "LENGTH"))
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--event", default="", choices=[""] + list(EVENTS))
    ap.add_argument("--trigger", metavar="NAME", help="print what triggers misbehaviour NAME")
    ap.add_argument("--port2", type=int, default=0, help="the second portal's port (default: a free one)")
    ap.add_argument("--alua", metavar="FILE", default="", help="an ALUA target, the TPG states in FILE")
    ap.add_argument("--report", metavar="ADDR", action="append", default=[],
                    help="one more TargetAddress in the SendTargets answer, as given (repeatable)")
    args = ap.parse_args()
    STATE["report"] = args.report
    if args.list:
        print("\n".join(TRIGGER))
        return 0
    if args.trigger:
        if args.trigger not in TRIGGER and args.trigger not in GAPS:
            return 2
        print(TRIGGER.get(args.trigger) or GAPS[args.trigger])
        return 0
    if args.dump:
        sys.stdout.buffer.write(disk_pattern()[args.dump[0]:args.dump[0] + args.dump[1]])
        return 0
    if args.port is None:
        ap.error("--port is required")
    if args.misbehave and args.misbehave not in TRIGGER and args.misbehave not in GAPS:
        ap.error("unknown misbehaviour %s" % args.misbehave)
    if args.alua and (args.misbehave not in ("", "silent_rtpg") or args.event):
        ap.error("--alua serves without --misbehave (but silent_rtpg) and --event")
    disk = disk_pattern()
    ls = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", args.port))
    ls.listen(4)
    # A second portal, where the login_redirect_* scenarios send the initiator.
    ls2 = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    ls2.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls2.bind(("127.0.0.1", args.port2))
    ls2.listen(4)
    STATE["port2"] = ls2.getsockname()[1]
    log("listening on 127.0.0.1:%d (and :%d), misbehaviour %s" % (args.port, STATE["port2"],
                                                                    args.misbehave or "none"))
    if args.alua:
        ALUA["file"] = args.alua
        alua_states()
        log("ALUA: TPG 1 on :%d, TPG 2 on :%d, states from %s" % (args.port, STATE["port2"], args.alua))
    misbehave = args.misbehave
    listening = [ls, ls2]
    while True:
        if STATE["redirected"] == "permanent" and ls in listening:
            listening.remove(ls)
            ls.close()
            log("first portal closed (permanent redirection)")
        ready, _, _ = select.select(listening, [], [])
        sock, peer = ready[0].accept()
        log("connection on port %d" % sock.getsockname()[1])
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c = Conn(sock, disk, misbehave, args.event, tpg=1 if ready[0] is ls else 2)
        if STATE.get("frozen"):  # frozen_after_read: the login is not answered either
            log("frozen: not answering the login")
            try:
                c.swallow()
            except (Closed, OSError):
                pass
            sock.close()
            log("connection closed")
            continue
        if args.alua or misbehave in SILENT:
            # every connection at once, as a multipath initiator has them
            threading.Thread(target=serve_thread, args=(c, sock, peer), daemon=True).start()
            continue
        try:
            c.login()
            log("logged in from %s:%d" % peer)
            c.serve()
        except (Closed, ConnectionError, BrokenPipeError):
            pass
        finally:
            if c.fired and not args.always:
                misbehave = ""  # once
            sock.close()
            log("connection closed")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(0)
