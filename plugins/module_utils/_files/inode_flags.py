# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The inode flags that stop even root from replacing a file (immutable,
append-only: ``chattr +i``/``+a``), read with the ``FS_IOC_GETFLAGS`` ioctl.

Standard library only: this file runs on managed nodes.
"""

import fcntl
import os
import stat
import struct

# The inode flags of chattr +i and +a (linux/fs.h), and the ioctl that reads
# them: _IOR('f', 1, long); powerpc, mips, sparc and alpha put the read bit
# one place lower.  The kernel writes an int at the buffer's start.
FS_IMMUTABLE_FL = 0x10
FS_APPEND_FL = 0x20
_IOC_READ = 0x40000000 if os.uname()[4].startswith(('ppc', 'mips', 'sparc', 'alpha')) else 0x80000000
FS_IOC_GETFLAGS = _IOC_READ | (struct.calcsize('l') << 16) | (ord('f') << 8) | 1


def inode_flags(real):
    """The inode flags (what ``lsattr`` shows) of the regular file or
    directory ``real``; None for anything else, or when the file system does
    not have them.  Opened without blocking and without following a link."""
    try:
        st = os.lstat(real)
    except OSError:
        return None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode)):
        return None
    try:
        fd = os.open(real, os.O_RDONLY | os.O_NONBLOCK | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_CLOEXEC', 0))
    except OSError:
        return None
    try:
        buf = bytearray(struct.calcsize('l'))
        fcntl.ioctl(fd, FS_IOC_GETFLAGS, buf, True)
        return struct.unpack('=i', bytes(buf[:4]))[0] & 0xffffffff
    except (IOError, OSError, ValueError):
        return None
    finally:
        os.close(fd)


def flag_words(real):
    """``(adjective, chattr letter)`` when ``real`` cannot be replaced or
    removed even by root (immutable, append-only), else None."""
    flags = inode_flags(real)
    if flags is None:
        return None
    if flags & FS_IMMUTABLE_FL:
        return 'immutable', 'i'
    if flags & FS_APPEND_FL:
        return 'append-only', 'a'
    return None
