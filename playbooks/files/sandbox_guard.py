# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The sandbox play's namespace and temporary folder, removed whatever ends the play.

    python3 sandbox_guard.py

Run by playbooks/sandbox.yml (as a task: a process of ansible-playbook's).
It starts a guard, a process of its own session (a Ctrl-C in the terminal
does not reach it), which makes the temporary folder and the network
namespace, prints ``{"dir": ..., "ns": ..., "guard": pid}`` and then watches
the ansible-playbook process that runs the play.  When that process ends,
however it ends (the play's last task, SIGINT, SIGTERM, SIGKILL), and the
folder is still there (the play's own clean-up did not run), the guard ends
the processes left in the namespace, deletes the namespace and removes the
folder.  When the play removed the folder itself, the guard does nothing.

Runs on the controller (the play's host is localhost); standard library only.
"""

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time

POLL = 0.5          # seconds between two looks at the folder


def _cmdline(pid):
    try:
        with open('/proc/%d/cmdline' % pid, 'rb') as handle:
            return handle.read().split(b'\0')
    except OSError:
        return []


def _parent(pid):
    try:
        with open('/proc/%d/stat' % pid) as handle:
            return int(handle.read().rsplit(')', 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def playbook_process():
    """The pid of the ansible-playbook process that runs this play (its
    workers are forks of it, with the same command line), or None."""
    pid = os.getppid()
    for _depth in range(64):
        if pid <= 1:
            return None
        argv = _cmdline(pid)
        if any(os.path.basename(arg) == b'ansible-playbook' for arg in argv[:2]):
            while _parent(pid) > 1 and _cmdline(_parent(pid)) == argv:
                pid = _parent(pid)
            return pid
        pid = _parent(pid)
    return None


def _ended(pid, timeout):
    """Whether ``pid`` ended, waiting at most ``timeout`` seconds."""
    if hasattr(os, 'pidfd_open'):
        try:
            fd = os.pidfd_open(pid)
        except OSError:
            return True
        try:
            return bool(select.select([fd], [], [], timeout)[0])
        finally:
            os.close(fd)
    try:
        os.kill(pid, 0)
    except OSError:
        return True
    time.sleep(timeout)
    return False


def clean_up(folder, ns):
    """End what runs in ``ns``, delete it, remove ``folder``; only while ``folder`` is there (ours)."""
    if not os.path.isdir(folder):
        return
    pids = subprocess.run(['ip', 'netns', 'pids', ns], capture_output=True, text=True, check=False).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (OSError, ValueError):
            pass
    subprocess.run(['ip', 'netns', 'del', ns], capture_output=True, check=False)
    shutil.rmtree(folder, ignore_errors=True)


def guard(owner, report):
    """The guard (in the child): make the folder and the namespace, report them, watch ``owner``."""
    folder = ns = None
    try:
        folder = tempfile.mkdtemp(prefix='ipmasq-sandbox.')
        # (ip netns add fails when the name is taken: it is never one that is not ours)
        ns = 'ipmasq-sandbox-' + ''.join(c for c in os.path.basename(folder) if c.isalnum()).lower()
        made = subprocess.run(['ip', 'netns', 'add', ns], capture_output=True, text=True, check=False)
        if made.returncode != 0:
            raise OSError(made.returncode, 'ip netns add %s failed: %s' % (ns, made.stderr.strip()))
        os.write(report, json.dumps({'dir': folder, 'ns': ns, 'guard': os.getpid()}).encode() + b'\n')
    except Exception as e:  # pylint: disable=broad-exception-caught
        os.write(report, json.dumps({'error': str(e)}).encode() + b'\n')
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
        os._exit(1)
    # Let go of the task's pipes, or the task would wait for this process.
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.closerange(3, 65536)
    ended = []
    signal.signal(signal.SIGTERM, lambda *_args: ended.append(True))
    while not ended and os.path.isdir(folder) and not _ended(owner, POLL):
        pass
    clean_up(folder, ns)
    os._exit(0)


def main():
    owner = playbook_process()
    if owner is None:
        sys.exit('sandbox_guard.py: not run by ansible-playbook (no ansible-playbook process above it)')
    read, write = os.pipe()
    blocked = signal.pthread_sigmask(signal.SIG_BLOCK, [signal.SIGINT, signal.SIGTERM, signal.SIGHUP])
    pid = os.fork()
    if pid == 0:
        # A session of its own before any signal gets through: a Ctrl-C in the terminal is the play's.
        os.close(read)
        os.setsid()
        for signum in (signal.SIGINT, signal.SIGHUP, signal.SIGPIPE):
            signal.signal(signum, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
        guard(owner, write)
    os.close(write)
    signal.pthread_sigmask(signal.SIG_SETMASK, blocked)
    with os.fdopen(read, 'rb') as handle:
        line = handle.readline()
    try:
        made = json.loads(line)
    except ValueError:
        sys.exit('sandbox_guard.py: the guard reported nothing')
    if 'error' in made:
        sys.exit('sandbox_guard.py: %s' % made['error'])
    print(json.dumps(made))


if __name__ == '__main__':
    main()
