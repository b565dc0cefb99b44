#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""File semantics of an iserfuse mount that tools rely on: names that cannot
be made or removed, attributes that are kept, times that follow writes.

    fsops_names.py MOUNTPOINT LUN_NAME rw|ro

rw (run as root, the mount's owner): rm, mv, mkdir, touch newfile, ln -s,
ln, mknod and mkfifo are EPERM and change nothing; chmod, chown and
utimens are kept (stat returns them) on the LUN file and EPERM on the
directory and .stats; a write, a punch and a zero range move mtime and
ctime to now; truncating to another size keeps the size (EFBIG beyond the
end); setxattr is EOPNOTSUPP.  ro (a -o ro mount): the same name
operations and chmod are EROFS.  The LUN is written to.

Prints "ok - ..." / "not ok - ..." lines; exits 1 if any check failed.
"""
import ctypes
import errno
import os
import stat
import sys
import time

libc = ctypes.CDLL(None, use_errno=True)
libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]

mnt, name, kind = sys.argv[1], sys.argv[2], sys.argv[3]
lun = os.path.join(mnt, name)
failed = 0


def report(ok, what, detail=None):
    global failed
    print(("ok - " if ok else "not ok - ") + what)
    if not ok:
        failed += 1
        if detail:
            print(f"#   {detail}")


def err_of(fn, *args, **kw):
    """The errno fn raised, or 0."""
    try:
        fn(*args, **kw)
        return 0
    except OSError as e:
        return e.errno


def ename(e):
    return errno.errorcode.get(e, str(e)) if e else "success"


def create(path):
    os.close(os.open(path, os.O_CREAT | os.O_WRONLY, 0o644))


listing = sorted(os.listdir(mnt))
want = errno.EROFS if kind == "ro" else errno.EPERM
names = [
    ("rm LUN", os.unlink, lun),
    ("rm by-id", os.rmdir, os.path.join(mnt, "by-id")),
    ("mv LUN", os.rename, lun, os.path.join(mnt, "moved")),
    ("mv LUN onto .stats", os.rename, lun, os.path.join(mnt, ".stats")),
    ("mkdir", os.mkdir, os.path.join(mnt, "dir")),
    ("touch newfile", create, os.path.join(mnt, "newfile")),
    ("ln -s", os.symlink, name, os.path.join(mnt, "sym")),
    ("ln", os.link, lun, os.path.join(mnt, "hard")),
    ("mknod", os.mknod, os.path.join(mnt, "node"), stat.S_IFREG | 0o600),
    ("mkfifo", os.mkfifo, os.path.join(mnt, "fifo")),
    ("mkdir in by-id", os.mkdir, os.path.join(mnt, "by-id", "dir")),
]
for what, fn, *args in names:
    e = err_of(fn, *args)
    report(e == want, f"{kind}: {what} is {ename(want)}", f"got {ename(e)}")
report(sorted(os.listdir(mnt)) == listing, f"{kind}: the directory is unchanged", f"{listing} -> {os.listdir(mnt)}")

if kind == "ro":
    e = err_of(os.chmod, lun, 0o400)
    report(e == errno.EROFS, "ro: chmod is EROFS", f"got {ename(e)}")
    e = err_of(os.utime, lun, (1000000000, 1000000000))
    report(e == errno.EROFS, "ro: touch -d is EROFS", f"got {ename(e)}")
    sys.exit(1 if failed else 0)

# -------- chmod, chown, touch -d: kept for the life of the mount

def daemon_stat(path):
    """stat answered by the daemon: the kernel keeps attributes for 1 s (ATTR_TIMEOUT in gateway/fs/fs.c)"""
    time.sleep(1.2)
    return os.stat(path)


st0 = os.stat(lun)
e = err_of(os.chmod, lun, 0o640)
mode = stat.S_IMODE(daemon_stat(lun).st_mode)
report(e == 0 and mode == 0o640, "chmod 640 is kept", f"{ename(e)}, mode {oct(mode)}")
e = err_of(os.chown, lun, 1234, 5678)
st = daemon_stat(lun)
report(e == 0 and (st.st_uid, st.st_gid) == (1234, 5678), "chown 1234:5678 (as root) is kept",
       f"{ename(e)}, owner {st.st_uid}:{st.st_gid}")
before = time.time()
e = err_of(os.utime, lun, ns=(1000000000 * 10**9 + 5, 1100000000 * 10**9 + 7))
st = daemon_stat(lun)
report(e == 0 and (st.st_atime_ns, st.st_mtime_ns) == (1000000000 * 10**9 + 5, 1100000000 * 10**9 + 7),
       "touch -d (utimensat) sets atime and mtime to the ns", f"{ename(e)}, {st.st_atime_ns} {st.st_mtime_ns}")
report(st.st_ctime >= before - 0.01, "the attribute changes moved ctime to now", f"{st.st_ctime} < {before}")
os.chown(lun, st0.st_uid, st0.st_gid)
os.chmod(lun, stat.S_IMODE(st0.st_mode))
report(stat.S_IMODE(os.stat(lun).st_mode) == stat.S_IMODE(st0.st_mode), "chmod back is kept")
e = err_of(os.utime, lun, None)  # touch: now
st = os.stat(lun)
report(e == 0 and abs(st.st_mtime - time.time()) < 2, "touch (times to now) sets mtime to now",
       f"{ename(e)}, mtime {st.st_mtime}")
for what, path in (("the directory", mnt), (".stats", os.path.join(mnt, ".stats")),
                   ("by-id", os.path.join(mnt, "by-id"))):
    e = err_of(os.chmod, path, 0o755)
    report(e == errno.EPERM, f"chmod on {what} is EPERM", f"got {ename(e)}")
    e = err_of(os.utime, path, (1000000000, 1000000000))
    report(e == errno.EPERM, f"touch -d on {what} is EPERM", f"got {ename(e)}")

# -------- mtime and ctime follow writes
fd = os.open(lun, os.O_RDWR)
for what, act in (("a write", lambda: os.pwrite(fd, os.urandom(4096), 8192)),
                  ("a punch", lambda: libc.fallocate(fd, 0x03, 65536, 65536)),
                  ("a zero range", lambda: libc.fallocate(fd, 0x10, 131072, 4096))):
    os.utime(lun, (1000000000, 1000000000))
    t0 = os.stat(lun)
    time.sleep(0.05)
    start = time.time()
    act()
    os.fsync(fd)
    t1 = os.stat(lun)
    # the coarse clock may lag the fine one by a tick (a few ms)
    report(t1.st_mtime > 1000000000 and t1.st_mtime >= start - 0.05 and t1.st_mtime <= time.time() + 0.05,
           f"{what} moves mtime to now", f"mtime {t0.st_mtime} -> {t1.st_mtime}, write at {start}")
    report(t1.st_ctime_ns > t0.st_ctime_ns and t1.st_ctime >= start - 0.05, f"{what} moves ctime",
           f"ctime {t0.st_ctime} -> {t1.st_ctime}")
t0 = os.stat(lun)
os.pread(fd, 4096, 0)
report(os.stat(lun).st_mtime_ns == t0.st_mtime_ns, "a read leaves mtime")
time.sleep(0.05)
os.pwrite(fd, b"x", 1)
os.utime(lun, ns=(10**18, 10**18))  # right after a write (cp -p): the set time wins
report(os.stat(lun).st_mtime_ns == 10**18, "touch -d right after a write is kept (cp -p)")
os.close(fd)

# -------- a LUN cannot change size
size = os.stat(lun).st_size
e = err_of(os.truncate, lun, size + 4096)
report(e == errno.EFBIG, "truncate beyond the capacity is EFBIG", f"got {ename(e)}")
e = err_of(os.truncate, lun, size // 2)
report(e == 0 and os.stat(lun).st_size == size, "truncate below the capacity succeeds and keeps the size",
       f"{ename(e)}, size {os.stat(lun).st_size}")

# -------- extended attributes: none
e = err_of(os.setxattr, lun, "user.test", b"1")
report(e == errno.EOPNOTSUPP, "setxattr is EOPNOTSUPP", f"got {ename(e)}")
e = err_of(os.removexattr, lun, "user.test")
report(e == errno.EOPNOTSUPP, "removexattr is EOPNOTSUPP", f"got {ename(e)}")
sys.exit(1 if failed else 0)
