"""A writer that is not ours adds our jump while our run writes (issue 18,
item 4).  ``iptables-restore --wait`` waits while another program holds the
xtables lock; when that program has added our POSTROUTING jump meanwhile,
our restore adds a second one.  The run reads the table back after it wrote
(only a run that wrote) and removes the duplicate in the same run, and says
so.

The foreign writer is real: a wrapper ``iptables-restore`` first on PATH
that adds the jump with the real ``iptables`` just before the real restore
runs (deterministic, both iptables backends), and a legacy
``iptables-restore`` that holds the xtables lock with the jump in its input
while our run waits for it.  That lock is the test's own: every process of
that test runs with a directory of its own as /run (private_run.py), so no
other run on the machine waits for it.  The module runs its real main()
(race_run.py) in the test's network namespace; every wait is bounded."""
import json
import os
import select
import shlex
import stat
import subprocess
import time

from ipmasq_lab import netlab
from ipmasq_lab.policy_view import CHAIN, JUMP, chain_lines

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, 'race_run.py')
PRIVATE_RUN = os.path.join(HERE, 'private_run.py')
PYTHON = os.path.join(netlab.VENV_BIN, 'python')
TIMEOUT = 60

JUMP_LINE = JUMP % (CHAIN, CHAIN)
EXPECT = chain_lines(['169.254.0.0/16', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'])
# The chain as the policy wants it, its jump missing: a run appends the jump.
CHAIN_ONLY = '*nat\n:%s - [0:0]\n%s\nCOMMIT\n' % (CHAIN, '\n'.join(EXPECT[1:]))
DUPLICATE = ('IPv4: remove 1 duplicate POSTROUTING jump(s) to %s (another writer changed the nat table while this '
             'run wrote it: found by the read after the write)' % CHAIN)

# Adds our jump with the real iptables (the other writer), then runs the real
# iptables-restore: once (a marker file), or on every call with ``always``.
WRAPPER = '''#!/usr/bin/python3
import os, subprocess, sys
try:
    os.close(os.open(%(marker)r, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    first = True
except FileExistsError:
    first = False
if first or %(always)r:
    subprocess.run([%(iptables)r, '-w', '-t', 'nat', '-A', 'POSTROUTING'] + %(jump)r, check=True)
os.execv(%(real)r, [%(real)r] + sys.argv[1:])
'''


def module_spec(tmp, **args):
    args_file = os.path.join(tmp, 'args.json')
    with open(args_file, 'w') as handle:
        json.dump({'ANSIBLE_MODULE_ARGS': dict(args, backend='iptables')}, handle)
    spec = os.path.join(tmp, 'spec.json')
    with open(spec, 'w') as handle:
        json.dump({'kind': 'module', 'collections': netlab.COLLECTIONS, 'args_file': args_file}, handle)
    return spec


def result_of(proc):
    out, err = proc.communicate(timeout=TIMEOUT)
    assert 'Traceback' not in err.decode(), err.decode()
    return json.loads(out.decode()[out.decode().index('{'):])


def jumps(node):
    return [r for r in node.rules() if r.startswith('-A POSTROUTING ') and r.endswith('-j ' + CHAIN)]


def wrapped(node, tmp, always=False):
    """A PATH directory whose iptables-restore is the wrapper."""
    wrap = os.path.join(tmp, 'wrap')
    os.makedirs(wrap)
    path = os.path.join(wrap, 'iptables-restore')
    with open(path, 'w') as handle:
        handle.write(WRAPPER % {'marker': os.path.join(tmp, 'injected'), 'always': always,
                                'iptables': node.backend.tool('iptables'), 'real': node.backend.tool('iptables-restore'),
                                'jump': shlex.split(JUMP_LINE)[2:]})
    os.chmod(path, stat.S_IRWXU)
    env = node.backend.env(dict(os.environ, LC_ALL='C.UTF-8'))
    env['PATH'] = wrap + os.pathsep + env['PATH']
    return env


def test_a_jump_another_writer_adds_during_the_write_is_found_and_removed(node, tmp_path):
    node.ns.exec([node.backend.tool('iptables-restore'), '--noflush'], input=CHAIN_ONLY)
    env = wrapped(node, str(tmp_path))
    proc = node.ns.popen([PYTHON, RUNNER, module_spec(str(tmp_path))], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    res = result_of(proc)
    assert os.path.exists(str(tmp_path / 'injected')), 'the other writer never ran'
    assert not res.get('failed'), res.get('msg')
    assert jumps(node) == [JUMP_LINE]
    assert res['changed'] is True
    assert res['actions'] == ['IPv4: append the POSTROUTING jump to %s' % CHAIN, DUPLICATE]
    assert res['drift_kinds'] == ['jump_missing', 'jump_duplicate']
    # Ansible hands warnings back as its own objects: their text is enough here.
    assert 'another program changed the nat table while this run wrote it' in json.dumps(res['warnings'])
    assert [r for r in node.rules() if r.startswith(('-A %s ' % CHAIN, ':%s ' % CHAIN))] == EXPECT
    # The read that verifies the write is in the commands, as a check-mode run lists it too.
    save = node.backend.tool('iptables-save') + ' -t nat'
    assert res['commands'].count(save) == 3, res['commands']


def test_a_table_another_writer_keeps_changing_is_an_error_that_says_what_was_written(nft_node, tmp_path):
    node = nft_node
    node.ns.exec([node.backend.tool('iptables-restore'), '--noflush'], input=CHAIN_ONLY)
    env = wrapped(node, str(tmp_path), always=True)
    proc = node.ns.popen([PYTHON, RUNNER, module_spec(str(tmp_path))], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env=env)
    res = result_of(proc)
    assert res.get('failed') is True and res['changed'] is True
    assert res['msg'] == (
        'IPv4: the write was applied (append the POSTROUTING jump to {c}; remove 1 duplicate POSTROUTING jump(s) to '
        '{c} (another writer changed the nat table while this run wrote it: found by the read after the write)), '
        'but the nat table still differs from the policy after it was repaired once: another program keeps '
        'changing chain {c} or its POSTROUTING jump (remove 1 duplicate POSTROUTING jump(s) to {c}). Find that '
        'program, then run again.'.format(c=CHAIN))


def _holds_lock(path):
    """Whether a process holds a flock on the file ``path`` (/proc/locks)."""
    try:
        ino = os.stat(path).st_ino
    except OSError:
        return False
    with open('/proc/locks') as handle:
        return any(line.split()[1] != '->' and line.split()[-3].endswith(':%d' % ino)
                   for line in handle.read().splitlines())


def _running(ns, fragment):
    """Whether a process of the namespace ``ns`` has ``fragment`` in its command line."""
    for pid in netlab.run(['ip', 'netns', 'pids', ns.name], check=False).stdout.split():
        try:
            with open('/proc/%s/cmdline' % pid, 'rb') as handle:
                if fragment in handle.read():
                    return True
        except OSError:
            pass
    return False


def _wait_for(what, test):
    deadline = time.monotonic() + 30
    while not test():
        assert time.monotonic() < deadline, what
        time.sleep(0.02)


def test_a_legacy_writer_holding_the_xtables_lock_adds_our_jump_while_our_run_waits(make_node, tmp_path):
    node = make_node('iptables-legacy')
    node.ns.exec([node.backend.tool('iptables-restore'), '--noflush'], input=CHAIN_ONLY)
    run = tmp_path / 'run'
    run.mkdir()
    private = ['/usr/bin/python3', PRIVATE_RUN, str(run), '--']
    # The other writer: a legacy iptables-restore takes the xtables lock when it starts and holds it
    # while it reads its input, which adds our jump.
    other = node.ns.popen(private + [node.backend.tool('iptables-restore'), '--noflush', '-w'],
                          stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc = None
    try:
        other.stdin.write(('*nat\n%s\n' % JUMP_LINE).encode())
        other.stdin.flush()
        _wait_for('the other writer never took the xtables lock', lambda: _holds_lock(str(run / 'xtables.lock')))
        env = node.backend.env(dict(os.environ, LC_ALL='C.UTF-8'))
        proc = node.ns.popen(private + [PYTHON, RUNNER, module_spec(str(tmp_path))], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, env=env)
        # Our run has read the table (no jump), planned to append it, and waits in iptables-restore --wait.
        _wait_for('our run never reached iptables-restore', lambda: _running(node.ns, b'iptables-restore\0--wait=30\0--noflush'))
        assert select.select([proc.stdout], [], [], 0.5)[0] == [], 'our run did not wait for the xtables lock'
        assert jumps(node) == []
    finally:
        other.stdin.write(b'COMMIT\n')
        other.stdin.close()
        assert other.wait(timeout=TIMEOUT) == 0, other.stderr.read()
    res = result_of(proc)
    assert not res.get('failed'), res.get('msg')
    assert jumps(node) == [JUMP_LINE]
    assert res['actions'] == ['IPv4: append the POSTROUTING jump to %s' % CHAIN, DUPLICATE]
