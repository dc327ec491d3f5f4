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

The file can be removed while a writer holds it (by hand, a clean-up of
``/run``).  The next writer would then create and lock a new file at once,
and two writers would plan from the same reading again.  So:

* after its ``flock`` a writer checks that the file it locked is still the
  one at the path (same device and inode) and starts again when it is not
  (a writer that waited on the removed file);
* then it also takes a ``flock`` on the directory holding the file, which
  cannot be removed: a writer still holding a removed file holds that one
  too, so a writer that locked a new file waits there until it has
  finished.  Always in that order (file, then directory): no deadlock.

Something not a regular file at the path (a FIFO would block ``open()`` for
ever) is refused with an error naming it; nothing is changed.

Standard library only: this file runs on managed nodes.
"""

import errno
import fcntl
import os
import time

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.fileio import NotRegularFile, open_regular

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


def _flock(fd, deadline):
    """Take an exclusive flock on ``fd``, polling until ``deadline``; False
    when the deadline passed first.  Other errors: OSError."""
    delay = 0.005
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except (IOError, OSError) as e:
            if e.errno not in (errno.EAGAIN, errno.EACCES):
                raise
        if time.monotonic() >= deadline:
            return False
        time.sleep(delay)
        delay = min(delay * 2, 0.1)


def _same_file(fd, path):
    """Whether the open file ``fd`` is (still) the file at ``path``."""
    try:
        st = os.fstat(fd)
        now = os.stat(path)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == (now.st_dev, now.st_ino)


def _close(fd):
    if fd is not None:
        os.close(fd)


class Lock:
    """``with Lock(): ...`` holds the writers' lock for the block."""

    def __init__(self, path=LOCK_PATH, wait=LOCK_WAIT_SECONDS):
        self.path = path
        self.wait = wait
        self.fd = None
        self.dir_fd = None

    def _open(self):
        try:
            return open_regular(self.path, os.O_RDONLY | os.O_CREAT, 0o600)
        except NotRegularFile as e:
            raise MasqError('the lock file %s that every writer of ipmasq.agent takes is %s, not a regular file; '
                            'nothing was changed. Remove it (the next run creates the file again).'
                            % (self.path, e.kind))
        except (IOError, OSError) as e:
            raise MasqError('cannot open the lock file %s that every writer of ipmasq.agent takes (%s); '
                            'nothing was changed.' % (self.path, e.strerror or e))

    def _gave_up(self, fd, what=''):
        holders = _holders(fd)
        raise MasqError('another run of ipmasq.agent held the lock %s for more than %d seconds%s%s; '
                        'nothing was changed. Run again when it has finished.'
                        % (self.path, self.wait, what, ' (held by %s)' % ', '.join(holders) if holders else ''))

    def _lock_file(self, deadline):
        """The locked descriptor of the file at the path (see the module docstring)."""
        while True:
            fd = self._open()
            try:
                if not _flock(fd, deadline):
                    self._gave_up(fd)
                if _same_file(fd, self.path):
                    return fd
                # We waited on a file that was removed (or replaced) meanwhile: lock the one there now.
                if time.monotonic() >= deadline:
                    raise MasqError('the lock file %s kept being removed or replaced for %d seconds; nothing was '
                                    'changed. Find what removes it.' % (self.path, self.wait))
            except (IOError, OSError) as e:
                os.close(fd)
                raise MasqError('cannot lock %s (%s); nothing was changed.' % (self.path, e.strerror or e))
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)

    def _lock_dir(self, deadline):
        """The locked descriptor of the lock file's directory, or None when it
        cannot be opened (then the file's lock alone serves, as before)."""
        try:
            fd = os.open(os.path.dirname(self.path) or '.', os.O_RDONLY | getattr(os, 'O_DIRECTORY', 0)
                         | getattr(os, 'O_CLOEXEC', 0))
        except OSError:
            return None
        try:
            if not _flock(fd, deadline):
                self._gave_up(fd, ' (its file was removed while that run held it, so this run waited on the '
                                  'directory %s)' % (os.path.dirname(self.path) or '.'))
        except (IOError, OSError):
            os.close(fd)
            return None
        except BaseException:
            os.close(fd)
            raise
        return fd

    def __enter__(self):
        deadline = time.monotonic() + self.wait
        fd = self._lock_file(deadline)
        try:
            self.dir_fd = self._lock_dir(deadline)
        except BaseException:
            os.close(fd)
            raise
        self.fd = fd
        return self

    def __exit__(self, *exc):
        fd, self.fd = self.fd, None
        dir_fd, self.dir_fd = self.dir_fd, None
        _close(dir_fd)          # closing the only descriptor releases its flock
        _close(fd)
        return False
