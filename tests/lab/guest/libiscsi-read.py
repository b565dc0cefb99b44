#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""Read a byte range of a LUN with libiscsi (libiscsi.so.7, READ(16)) and
write it to a file: an initiator independent of iserfuse, for cross-checks.

    libiscsi-read.py [--iser] INITIATOR PORTAL TARGET LUN OFFSET LENGTH OUT

OFFSET and LENGTH in bytes, multiples of the LUN's 512-byte blocks; read in
32 KiB commands.  Exit 0 when every command succeeded, else 1 with one
line on stderr.
"""
import ctypes
import sys

ISER_TRANSPORT = 1
ISCSI_SESSION_NORMAL = 2
ISCSI_HEADER_DIGEST_NONE = 1
SCSI_STATUS_GOOD = 0
BLOCK = 512
CHUNK = 32768


class ScsiSense(ctypes.Structure):
    # sense_specific, ill_param_in_cdb and bit_pointer_valid are bit fields: one byte
    _fields_ = [("error_type", ctypes.c_ubyte), ("key", ctypes.c_int), ("ascq", ctypes.c_int),
                ("bits", ctypes.c_ubyte), ("bit_pointer", ctypes.c_ubyte), ("field_pointer", ctypes.c_uint16)]


class ScsiData(ctypes.Structure):
    _fields_ = [("size", ctypes.c_int), ("data", ctypes.POINTER(ctypes.c_ubyte))]


class ScsiTask(ctypes.Structure):
    # datain at offset 64 on x86-64
    # the head of struct scsi_task (libiscsi 1.19 scsi-lowlevel.h), up to datain
    _fields_ = [("status", ctypes.c_int), ("cdb_size", ctypes.c_int), ("xfer_dir", ctypes.c_int),
                ("expxferlen", ctypes.c_int), ("cdb", ctypes.c_ubyte * 16), ("residual_status", ctypes.c_int),
                ("residual", ctypes.c_size_t), ("sense", ScsiSense), ("datain", ScsiData)]


assert ScsiTask.datain.offset == 64


def main(argv):
    iser = argv[:1] == ["--iser"]
    if iser:
        argv = argv[1:]
    if len(argv) != 7:
        print(__doc__.strip().splitlines()[3].strip(), file=sys.stderr)
        return 2
    initiator, portal, target, lun, off, length, out = argv
    lun, off, length = int(lun), int(off), int(length)
    lib = ctypes.CDLL("libiscsi.so.7")
    lib.iscsi_create_context.restype = ctypes.c_void_p
    lib.iscsi_create_context.argtypes = [ctypes.c_char_p]
    lib.iscsi_get_error.restype = ctypes.c_char_p
    lib.iscsi_get_error.argtypes = [ctypes.c_void_p]
    for name in ("iscsi_set_targetname", "iscsi_full_connect_sync"):
        getattr(lib, name).argtypes = [ctypes.c_void_p, ctypes.c_char_p] + ([ctypes.c_int] if "connect" in name else [])
    lib.iscsi_init_transport.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.iscsi_set_session_type.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.iscsi_set_header_digest.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.iscsi_read16_sync.restype = ctypes.POINTER(ScsiTask)
    lib.iscsi_read16_sync.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint64, ctypes.c_uint32,
                                      ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                                      ctypes.c_int]
    lib.scsi_free_scsi_task.argtypes = [ctypes.POINTER(ScsiTask)]
    lib.iscsi_logout_sync.argtypes = [ctypes.c_void_p]
    lib.iscsi_destroy_context.argtypes = [ctypes.c_void_p]

    ctx = lib.iscsi_create_context(initiator.encode())
    if not ctx:
        print("libiscsi-read: iscsi_create_context failed", file=sys.stderr)
        return 1

    def err(what):
        print("libiscsi-read: %s: %s" % (what, lib.iscsi_get_error(ctx).decode(errors="replace")), file=sys.stderr)
        return 1

    if iser and lib.iscsi_init_transport(ctx, ISER_TRANSPORT):
        return err("iSER transport")
    lib.iscsi_set_targetname(ctx, target.encode())
    lib.iscsi_set_session_type(ctx, ISCSI_SESSION_NORMAL)
    lib.iscsi_set_header_digest(ctx, ISCSI_HEADER_DIGEST_NONE)
    if lib.iscsi_full_connect_sync(ctx, portal.encode(), lun):
        return err("login to %s at %s" % (target, portal))
    got = bytearray()
    pos = off
    while pos < off + length:
        n = min(CHUNK, off + length - pos)
        task = lib.iscsi_read16_sync(ctx, lun, pos // BLOCK, n, BLOCK, 0, 0, 0, 0, 0)
        if not task:
            return err("READ(16) at %d" % pos)
        t = task.contents
        if t.status != SCSI_STATUS_GOOD or t.datain.size != n:
            print("libiscsi-read: READ(16) at %d: status %d, %d bytes" % (pos, t.status, t.datain.size),
                  file=sys.stderr)
            return 1
        got += ctypes.string_at(t.datain.data, n)
        lib.scsi_free_scsi_task(task)
        pos += n
    lib.iscsi_logout_sync(ctx)
    lib.iscsi_destroy_context(ctx)
    with open(out, "wb") as f:
        f.write(got)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
