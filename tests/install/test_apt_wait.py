"""scripts/apt.sh: apt-get waits (bounded) for the package locks that a
fresh machine's unattended-upgrades often holds, and says so.  The locks
here are files of the test's own (APT_LOCK_PATHS), locked the way dpkg
locks them (fcntl); apt-get is a stand-in that prints its arguments."""
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

HOLDER = r'''
import fcntl, sys, time
f = open(sys.argv[1], 'w')
fcntl.lockf(f, fcntl.LOCK_EX)
print('locked', flush=True)
time.sleep(float(sys.argv[2]))
'''


def _hold(path, seconds):
    proc = subprocess.Popen([sys.executable, '-c', HOLDER, path, str(seconds)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == 'locked'
    return proc


def _apt_get(tmp_path, wait, locks):
    fake = tmp_path / 'bin'
    fake.mkdir(exist_ok=True)
    (fake / 'apt-get').write_text('#!/bin/sh\necho "apt-get ran: $*"\n')
    (fake / 'apt-get').chmod(0o755)
    env = dict(os.environ, PATH='%s:%s' % (fake, os.environ['PATH']), APT_LOCK_WAIT=str(wait),
               APT_LOCK_PATHS=' '.join(str(p) for p in locks))
    return subprocess.run(['bash', '-c', '. scripts/apt.sh && apt_get install -y foo'], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60, check=False)


def test_free_locks_run_at_once(tmp_path):
    lock = tmp_path / 'lock-frontend'
    lock.write_text('')
    run = _apt_get(tmp_path, 5, [lock])
    assert run.returncode == 0, run.stderr
    assert 'apt-get ran: -o DPkg::Lock::Timeout=5 install -y foo' in run.stdout
    assert 'waiting' not in run.stderr


def test_held_lock_is_waited_for_and_said(tmp_path):
    lock = tmp_path / 'lock-frontend'
    holder = _hold(str(lock), 2)
    try:
        start = time.monotonic()
        run = _apt_get(tmp_path, 30, [tmp_path / 'other', lock])
        took = time.monotonic() - start
    finally:
        holder.kill()
        holder.wait()
    assert run.returncode == 0, run.stderr
    assert 'apt: waiting for the package locks, held by %d(python' % holder.pid in run.stderr
    assert 'apt: the package locks are free after' in run.stderr
    assert 'apt-get ran:' in run.stdout
    assert took < 30


def test_wait_is_bounded(tmp_path):
    lock = tmp_path / 'lock'
    holder = _hold(str(lock), 30)
    try:
        run = _apt_get(tmp_path, 1, [lock])
    finally:
        holder.kill()
        holder.wait()
    assert run.returncode == 1
    assert 'still held after 1 s (pids: %d); giving up' % holder.pid in run.stderr
    assert 'apt-get ran' not in run.stdout
