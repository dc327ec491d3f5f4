"""The writers' lock (module_utils/_core/node/lock.py) on real files, held by real
processes: removing the lock file while a writer holds it must never let a
second writer in (issue 18, item 3), and something not a regular file at
its path is refused instead of blocking open() for ever (item 5).  Every
wait is bounded: a regression fails the test, it does not hang it."""
import os
import socket
import subprocess
import sys
import time

import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.lock import Lock

COLLECTIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), *(['..'] * 5 + ['build', 'collections']))
# A writer: takes the lock, says "in", holds it until its stdin closes, says "out".
HOLDER = (
    'import sys, time\n'
    'sys.path.insert(0, sys.argv[2])\n'
    'from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.lock import Lock\n'
    'with Lock(sys.argv[1], wait=float(sys.argv[3])):\n'
    '    print("in %.6f" % time.monotonic(), flush=True)\n'
    '    sys.stdin.read()\n'
    '    print("out %.6f" % time.monotonic(), flush=True)\n'
)


class Writer:
    """A process holding (or waiting for) the lock at ``path``."""

    def __init__(self, path, wait=20):
        self.proc = subprocess.Popen([sys.executable, '-c', HOLDER, str(path), os.path.abspath(COLLECTIONS), str(wait)],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def got_lock(self, timeout):
        """Whether it said "in" within ``timeout`` seconds."""
        import select
        ready = select.select([self.proc.stdout], [], [], timeout)[0]
        if not ready:
            return False
        line = self.proc.stdout.readline()
        assert line.startswith('in '), (line, self.proc.stderr.read() if self.proc.poll() is not None else '')
        return True

    def release(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=20)
        assert self.proc.returncode == 0, self.proc.stderr.read()

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


@pytest.fixture
def writers():
    made = []

    def make(path, wait=20):
        made.append(Writer(path, wait))
        return made[-1]
    yield make
    for writer in made:
        writer.kill()


def test_a_writer_does_not_get_in_while_the_holder_of_a_removed_lock_file_works(tmp_path, writers):
    path = tmp_path / 'ipmasq-agent.lock'
    a = writers(path)
    assert a.got_lock(10)
    os.unlink(str(path))
    b = writers(path)           # creates a new file at the path and locks it at once: must still wait for A
    assert not b.got_lock(1.0), 'a second writer got the lock while the first held the removed lock file'
    a.release()
    assert b.got_lock(10), 'the second writer did not get the lock after the first released it'
    b.release()


def test_a_writer_waiting_on_a_removed_lock_file_locks_the_new_one(tmp_path, writers):
    """B waits on the file A holds; the file is removed, and a new one at the
    path is locked by another holder (``flock`` on the file alone, as an
    operator pauses the writers).  When A finishes, B must not go on with the
    removed file: it locks the one at the path, so it waits for that holder."""
    import fcntl
    path = tmp_path / 'ipmasq-agent.lock'
    a = writers(path)
    assert a.got_lock(10)
    ino = os.stat(str(path)).st_ino
    b = writers(path)
    deadline = time.monotonic() + 10
    while not _has_open(b.proc.pid, ino):
        assert time.monotonic() < deadline, 'B never opened the lock file'
        time.sleep(0.01)
    os.unlink(str(path))
    fd = os.open(str(path), os.O_RDONLY | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        a.release()
        assert not b.got_lock(1.0), 'B went on with the removed lock file while the file at the path was held'
    finally:
        os.close(fd)
    assert b.got_lock(10)
    b.release()


def _has_open(pid, ino):
    """Whether process ``pid`` has the file of inode ``ino`` open."""
    fds = '/proc/%d/fd' % pid
    try:
        names = os.listdir(fds)
    except OSError:
        return False
    for name in names:
        try:
            if os.stat(os.path.join(fds, name)).st_ino == ino:
                return True
        except OSError:
            pass
    return False


def test_the_lock_is_taken_again_after_a_writer_removed_it_and_left(tmp_path):
    path = str(tmp_path / 'ipmasq-agent.lock')
    with Lock(path, wait=2):
        os.unlink(path)
    with Lock(path, wait=2) as lock:
        assert os.path.exists(path)
        assert os.fstat(lock.fd).st_ino == os.stat(path).st_ino


def test_a_held_lock_still_times_out_with_the_holder_named(tmp_path, writers):
    path = tmp_path / 'ipmasq-agent.lock'
    a = writers(path)
    assert a.got_lock(10)
    with pytest.raises(MasqError, match=r'held the lock .* for more than 0 seconds .*held by pid %d' % a.proc.pid):
        with Lock(str(path), wait=0.3):
            pass
    a.release()


def _fifo(path):
    os.mkfifo(path)


def _socket(path):
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(path)
    return sock


@pytest.mark.parametrize('make,kind', [(_fifo, 'a FIFO (named pipe)'), (_socket, 'a socket'),
                                       (os.mkdir, 'a directory')])
def test_a_lock_path_that_is_not_a_regular_file_is_refused_not_waited_on(tmp_path, make, kind):
    path = str(tmp_path / 'ipmasq-agent.lock')
    keep = make(path)
    code = ('import sys\nsys.path.insert(0, sys.argv[2])\n'
            'from ansible_collections.ipmasq.agent.plugins.module_utils._core.node.lock import Lock\n'
            'from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError\n'
            'try:\n    Lock(sys.argv[1], wait=1).__enter__()\nexcept MasqError as e:\n    print(e.msg)\n')
    # In a process of its own, bounded: a regression blocks in open() and fails here, not the run.
    proc = subprocess.run([sys.executable, '-c', code, path, os.path.abspath(COLLECTIONS)],
                          capture_output=True, text=True, timeout=20, check=False)
    assert proc.stdout.strip() == ('the lock file %s that every writer of ipmasq.agent takes is %s, not a regular '
                                   'file; nothing was changed. Remove it (the next run creates the file again).'
                                   % (path, kind)), proc.stderr
    if keep is not None:
        keep.close()
