# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Writing a file of our own atomically, outside Ansible.

For the files only ipmasq.agent writes (the resync's state file, the
originals kept under the backup directory and their records).  Files of the
node's own (daemon.json, unit files) are written by the modules through
``AnsibleModule.atomic_move``, which keeps their SELinux context.

Standard library only: this file runs on managed nodes.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import errno
import os


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
