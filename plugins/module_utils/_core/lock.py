# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The writers' lock: one writer of ours at a time, from its read to the end
of its write.

Every writer of ours (the ``masq_chain`` module, the node-side resync, the
daemon modules' rule clean-up) takes this lock around read -> plan -> write
(``sync.sync``), so two of them can never both plan from the same read.  It
is an advisory ``flock`` on a file of its own, not on ``/run/xtables.lock``:
``iptables-restore --wait`` of the legacy backend takes the xtables lock
itself, and holding that one here would make it wait for us forever.

The file is opened read-only (flock needs no write access), so the hardened
resync service, which sees ``/run`` read-only, can take it once
systemd-tmpfiles (or the module) has created it.  The wait is bounded; a
writer that gives up says which process holds the lock.

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import fcntl
import os
import time

from ansible_collections.ipmasq.agent.plugins.module_utils._core.errors import MasqError

LOCK_PATH = '/run/ipmasq-agent.lock'
LOCK_WAIT_SECONDS = 60


def _holders(fd):
    """Who holds a lock on the open file ``fd``, from /proc/locks (best effort)."""
    try:
        st = os.fstat(fd)
        with open('/proc/locks') as handle:
            lines = handle.read().splitlines()
    except (IOError, OSError):
        return []
    want = ':%d' % st.st_ino
    found = []
    for line in lines:
        parts = line.split()
        if len(parts) < 6 or '->' in parts[1] or not parts[5].endswith(want):
            continue
        pid = parts[4]
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as handle:
                cmd = handle.read().replace(b'\0', b' ').decode('utf-8', 'replace').strip()
        except (IOError, OSError):
            cmd = '?'
        found.append('pid %s (%s)' % (pid, cmd[:120]))
    return found


class Lock:
    """``with Lock(): ...`` holds the writers' lock for the block."""

    def __init__(self, path=LOCK_PATH, wait=LOCK_WAIT_SECONDS):
        self.path = path
        self.wait = wait
        self.fd = None

    def _open(self):
        try:
            return os.open(self.path, os.O_RDONLY | os.O_CREAT, 0o600)
        except (IOError, OSError) as e:
            raise MasqError('cannot open the lock file %s that every writer of ipmasq.agent takes (%s); '
                            'nothing was changed.' % (self.path, e.strerror or e))

    def __enter__(self):
        fd = self._open()
        deadline = time.monotonic() + self.wait
        delay = 0.005
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except (IOError, OSError) as e:
                if e.errno not in (errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    raise MasqError('cannot lock %s (%s); nothing was changed.' % (self.path, e.strerror or e))
            if time.monotonic() >= deadline:
                holders = _holders(fd)
                os.close(fd)
                raise MasqError('another run of ipmasq.agent held the lock %s for more than %d seconds%s; '
                                'nothing was changed. Run again when it has finished.'
                                % (self.path, self.wait, ' (held by %s)' % ', '.join(holders) if holders else ''))
            time.sleep(delay)
            delay = min(delay * 2, 0.1)
        self.fd = fd
        return self

    def __exit__(self, *exc):
        fd, self.fd = self.fd, None
        if fd is not None:
            os.close(fd)       # closing the only descriptor releases the flock
        return False
