# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Writing a file of our own atomically, outside Ansible; opening one that
must be a regular file without ever blocking.

For the files only ipmasq.agent writes (the resync's state file, the
originals kept under the backup directory and their records).  Files of the
node's own (daemon.json, unit files) are written by the modules through
``AnsibleModule.atomic_move``, which keeps their SELinux context.

``open_regular``/``read_regular`` open the writers' lock, the agent config
file, the state file and the metrics file: a FIFO, socket or device at one
of those paths would make a plain ``open()`` block for ever (a FIFO waits
for a writer); they refuse it instead (``NotRegularFile``, an ``OSError``
whose ``strerror`` says what is there), so each caller says so in its own
words and goes on or stops as it would for an unreadable file.

Standard library only: this file runs on managed nodes.
"""

import errno
import os
import stat


_TEMP_FLAGS = (os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, 'O_NOFOLLOW', 0) | getattr(os, 'O_CLOEXEC', 0))


def _make_temp(directory, prefix, suffix):
    """``(fd, path)`` of a new file (0600) of a name nobody has, as
    ``tempfile.mkstemp`` makes it, without importing ``tempfile`` (and with
    it ``re``, ``random`` and ``shutil``: more than a resync cycle's work)."""
    for _attempt in range(100):
        path = os.path.join(directory, '%s%s%s' % (prefix, ''.join('%02x' % b for b in bytearray(os.urandom(6))),
                                                   suffix))
        try:
            return os.open(path, _TEMP_FLAGS, 0o600), path
        except OSError as e:
            if e.errno != errno.EEXIST:
                raise
    raise OSError(errno.EEXIST, 'no free temporary file name', directory)


def write_temp(directory, data, mode=0o600, uid=None, gid=None, prefix='.ipmasq-agent.'):
    """``data`` (bytes, or text written as UTF-8 with surrogateescape) in a new
    temporary file in ``directory``, synced, with ``mode`` and owner; returns
    its path.  On failure nothing is left behind."""
    if not isinstance(data, bytes):
        data = data.encode('utf-8', 'surrogateescape')
    fd, tmp = _make_temp(directory, prefix, '.ipmasq-tmp')
    try:
        with os.fdopen(fd, 'wb') as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        if uid is not None and os.geteuid() == 0:
            os.chown(tmp, uid, gid)
    except BaseException:
        remove_quietly(tmp)
        raise
    return tmp


_KINDS = (
    (stat.S_ISFIFO, 'a FIFO (named pipe)'),
    (stat.S_ISSOCK, 'a socket'),
    (stat.S_ISCHR, 'a character device'),
    (stat.S_ISBLK, 'a block device'),
    (stat.S_ISDIR, 'a directory'),
)
_OPEN_FLAGS = os.O_NONBLOCK | getattr(os, 'O_NOCTTY', 0) | getattr(os, 'O_CLOEXEC', 0)


def kind_of(mode):
    """What a file of ``st_mode`` is, in words (``a FIFO (named pipe)``)."""
    for test, words in _KINDS:
        if test(mode):
            return words
    return 'not a regular file'


class NotRegularFile(OSError):
    """A FIFO, socket, device or directory where a regular file should be;
    ``kind`` says which (``strerror``: the sentence for messages)."""

    def __init__(self, path, mode):
        self.kind = kind_of(mode)
        super(NotRegularFile, self).__init__(errno.EINVAL, 'it is %s, not a regular file' % self.kind, path)


def _refuse_if_special(path, error=None):
    """Raise NotRegularFile when ``path`` exists and is not a regular file,
    else ``error`` (when given)."""
    try:
        st = os.stat(path)
    except OSError:
        st = None
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise NotRegularFile(path, st.st_mode)
    if error is not None:
        raise error


def open_regular(path, flags=os.O_RDONLY, mode=0o600):
    """``os.open(path, flags, mode)`` for a file that must be a regular file
    (``flags`` may hold O_CREAT).  Never blocks on what is at the path: a
    FIFO, socket, device or directory raises NotRegularFile before it is
    opened (looked at first, so a device is never opened at all) or, when it
    appeared in between, right after (opened with O_NONBLOCK, then fstat).
    The descriptor keeps O_NONBLOCK, which a regular file ignores."""
    _refuse_if_special(path)
    try:
        fd = os.open(path, flags | _OPEN_FLAGS, mode)
    except OSError as e:
        if e.errno in (errno.ENXIO, errno.EISDIR, errno.ENODEV, errno.EOPNOTSUPP):
            _refuse_if_special(path, e)     # a socket: ENXIO; a directory with O_CREAT: EISDIR
        raise
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise NotRegularFile(path, st.st_mode)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_regular(path, limit=-1):
    """The bytes of the regular file ``path`` (at most ``limit``; -1: all).
    OSError as ``open()`` raises it (ENOENT when missing), NotRegularFile
    for what is not a regular file: never blocks."""
    with os.fdopen(open_regular(path), 'rb') as handle:
        return handle.read(limit)


def remove_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def atomic_write(path, data, mode=0o600, uid=None, gid=None):
    """Replace ``path`` with ``data``: a temporary file beside it, then rename.
    The directory is created (0700) when missing.  On failure nothing changes."""
    directory = os.path.dirname(path) or '.'
    if not os.path.isdir(directory):
        os.makedirs(directory, 0o700)
    tmp = write_temp(directory, data, mode, uid, gid, prefix='.%s.' % os.path.basename(path))
    try:
        os.rename(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise
