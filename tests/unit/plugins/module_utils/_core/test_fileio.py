"""fileio.read_regular / open_regular (module_utils/_core/node/fileio.py) on real
files: what is not a regular file (a FIFO, a socket, a device, a directory)
is refused at once, never waited on (issue 18, item 5).  Each read runs in a
process of its own with a time limit, so a read that blocks fails the test
instead of hanging it."""
import errno
import os
import socket
import subprocess
import sys

import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._core.node import fileio

COLLECTIONS = os.path.join(os.path.dirname(os.path.abspath(__file__)), *(['..'] * 5 + ['build', 'collections']))
READ = ('import sys\nsys.path.insert(0, sys.argv[2])\n'
        'from ansible_collections.ipmasq.agent.plugins.module_utils._core.node import fileio\n'
        'try:\n    print(repr(fileio.read_regular(sys.argv[1], 100)))\n'
        'except OSError as e:\n    print("%s %s: %s" % (type(e).__name__, e.errno, e.strerror))\n')


def read_in_a_process(path):
    proc = subprocess.run([sys.executable, '-c', READ, path, os.path.abspath(COLLECTIONS)],
                          capture_output=True, text=True, timeout=20, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_a_regular_file_is_read(tmp_path):
    path = tmp_path / 'config'
    path.write_bytes(b'nonMasqueradeCIDRs: []\n')
    assert fileio.read_regular(str(path)) == b'nonMasqueradeCIDRs: []\n'
    assert fileio.read_regular(str(path), 4) == b'nonM'


def test_a_missing_file_is_enoent_as_open_says(tmp_path):
    with pytest.raises(OSError) as e:
        fileio.read_regular(str(tmp_path / 'missing'))
    assert e.value.errno == errno.ENOENT and not isinstance(e.value, fileio.NotRegularFile)


def test_a_fifo_socket_device_or_directory_is_refused_at_once(tmp_path):
    fifo = str(tmp_path / 'fifo')
    os.mkfifo(fifo)
    sock_path = str(tmp_path / 'sock')
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(sock_path)
    link = str(tmp_path / 'link-to-fifo')
    os.symlink(fifo, link)
    try:
        for path, kind in ((fifo, 'a FIFO (named pipe)'), (link, 'a FIFO (named pipe)'), (sock_path, 'a socket'),
                           ('/dev/null', 'a character device'), (str(tmp_path), 'a directory')):
            assert read_in_a_process(path) == 'NotRegularFile %d: it is %s, not a regular file' % (errno.EINVAL, kind)
    finally:
        sock.close()


def test_open_regular_creates_a_missing_file_and_refuses_a_fifo_with_o_creat(tmp_path):
    path = str(tmp_path / 'lock')
    os.close(fileio.open_regular(path, os.O_RDONLY | os.O_CREAT, 0o600))
    assert os.path.isfile(path)
    fifo = str(tmp_path / 'fifo')
    os.mkfifo(fifo)
    with pytest.raises(fileio.NotRegularFile) as e:
        fileio.open_regular(fifo, os.O_RDONLY | os.O_CREAT, 0o600)
    assert e.value.kind == 'a FIFO (named pipe)' and e.value.filename == fifo
