# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Running the node's tools outside Ansible (the node-side resync).

``make_run()`` gives the ``run(argv, data=None) -> (rc, stdout, stderr)``
that the core expects (modules get the same from ``AnsibleModule.run_command``,
see ``_module.py``): an argv list, never a shell; ``LC_ALL=C``; bounded in
time.  It spawns with ``os.posix_spawn`` and reads through ``select`` rather
than importing ``subprocess``, which alone costs about a third of a resync
cycle's own work; Pythons without ``posix_spawn`` (before 3.8) use
``subprocess``.

Standard library only: this file runs on managed nodes.
"""

import os

COMMAND_TIMEOUT = 90          # iptables-restore waits up to 30 s for the xtables lock
TOOL_DIRS = ('/usr/sbin', '/sbin', '/usr/bin', '/bin')
TIMEOUT_RC = 124
NOT_RUN_RC = 127


def find(name):
    """The tool on $PATH, then in the sbin directories (systemd's PATH has them)."""
    dirs = os.environ.get('PATH', '').split(os.pathsep) + list(TOOL_DIRS)
    for directory in dirs:
        if not directory:
            continue
        candidate = os.path.join(directory, name)
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def _env():
    env = dict(os.environ)
    env.update({'LC_ALL': 'C', 'LANG': 'C'})
    return env


def _decode(data):
    return data.decode('utf-8', 'surrogateescape')


def _exit_code(status):
    if os.WIFEXITED(status):
        return os.WEXITSTATUS(status)
    return -os.WTERMSIG(status)


# How many pids a ``record`` list keeps (the last ones).
RECORDED = 32


def _spawned(record, pid):
    if record is not None:
        record.append(pid)
        del record[:-RECORDED]


def _spawn(argv, data, env, timeout, record):
    """posix_spawn + select: feed ``data`` on stdin, collect stdout and stderr."""
    import select  # pylint: disable=import-outside-toplevel
    import time  # pylint: disable=import-outside-toplevel

    out_r, out_w = os.pipe()
    err_r, err_w = os.pipe()
    actions = [(os.POSIX_SPAWN_DUP2, out_w, 1), (os.POSIX_SPAWN_DUP2, err_w, 2)]
    in_r = in_w = None
    if data is None:
        actions.insert(0, (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0))
    else:
        in_r, in_w = os.pipe()
        actions.insert(0, (os.POSIX_SPAWN_DUP2, in_r, 0))
    try:
        # The resync runs outside Ansible: there is no AnsibleModule.run_command to call.
        pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)  # pylint: disable=ansible-bad-function
        _spawned(record, pid)
    except OSError as e:
        for fd in (out_r, out_w, err_r, err_w, in_r, in_w):
            if fd is not None:
                os.close(fd)
        return NOT_RUN_RC, '', '%s: %s' % (argv[0], e.strerror or e)
    for fd in (out_w, err_w, in_r):
        if fd is not None:
            os.close(fd)
    chunks = {out_r: [], err_r: []}
    readers = [out_r, err_r]
    writers = []
    pending = b''
    if in_w is not None:
        pending = data.encode('utf-8', 'surrogateescape')
        if pending:
            writers.append(in_w)
        else:
            os.close(in_w)
    deadline = time.monotonic() + timeout
    timed_out = False
    try:
        while readers or writers:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready_r, ready_w, _x = select.select(readers, writers, [], left)
            for fd in ready_w:
                try:
                    sent = os.write(fd, pending[:65536])
                except OSError:          # the tool exited without reading all of it
                    sent = len(pending)
                pending = pending[sent:]
                if not pending:
                    writers.remove(fd)
                    os.close(fd)
            for fd in ready_r:
                chunk = os.read(fd, 65536)
                if chunk:
                    chunks[fd].append(chunk)
                else:
                    readers.remove(fd)
    finally:
        for fd in readers + writers:
            os.close(fd)
        for fd in (out_r, err_r):
            if fd not in readers:
                os.close(fd)
    if timed_out:
        os.kill(pid, 9)
    _pid, status = os.waitpid(pid, 0)
    if timed_out:
        return TIMEOUT_RC, _decode(b''.join(chunks[out_r])), '%s did not finish within %d seconds' % (argv[0], timeout)
    return _exit_code(status), _decode(b''.join(chunks[out_r])), _decode(b''.join(chunks[err_r]))


def _subprocess(argv, data, env, timeout, record):
    import subprocess  # pylint: disable=import-outside-toplevel

    try:
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE if data is not None else subprocess.DEVNULL,  # pylint: disable=ansible-bad-function
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    except OSError as e:
        return NOT_RUN_RC, '', '%s: %s' % (argv[0], e.strerror or e)
    _spawned(record, proc.pid)
    try:
        out, err = proc.communicate(None if data is None else data.encode('utf-8', 'surrogateescape'),
                                    timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, _err = proc.communicate()
        return TIMEOUT_RC, _decode(out), '%s did not finish within %d seconds' % (argv[0], timeout)
    return proc.returncode, _decode(out), _decode(err)


def make_run(timeout=COMMAND_TIMEOUT, record=None):
    """``run(argv, data=None) -> (rc, stdout, stderr)``; ``data`` goes to stdin.
    ``record``: a list that gets the pid of each command run (the last
    :data:`RECORDED`): the watcher's (``watch.py``), which tells our own
    writes' netfilter events by the committing pid."""
    env = _env()
    spawn = _spawn if hasattr(os, 'posix_spawn') else _subprocess

    def run(argv, data=None):
        return spawn(list(argv), data, env, timeout, record)

    return run
