"""Writers of ours at the same moment (issue: concurrent runs cost a node its
SNAT).  Each round puts the node in a drifted state, then starts 2 or 5
writers at the same instant (masq_chain's own main(), the resync's cycle, or
both; see race_run.py) against real iptables in a namespace, on both
backends.  Every round must end with exactly one POSTROUTING jump to the
chain and a chain equal to one of the policies that ran, and every writer
must have succeeded or said why it failed.  Bounded: 20 rounds, every writer
under a time limit."""
import json
import os
import select
import subprocess
import sys
import time

import pytest

import netlab
from policy_view import CHAIN, JUMP, chain_lines, ours

HERE = os.path.dirname(os.path.abspath(__file__))
RUNNER = os.path.join(HERE, 'race_run.py')
PYTHON = os.path.join(netlab.VENV_BIN, 'python')
ROUNDS = 20
WRITER_TIMEOUT = 90

POLICY_A = {'nonmasquerade_cidrs': ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']}
POLICY_B = {'nonmasquerade_cidrs': ['10.10.0.0/16', '192.0.2.0/24'], 'masq_link_local': True}
EXPECT = {
    'A': chain_lines(['169.254.0.0/16', '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']),
    'B': chain_lines(['10.10.0.0/16', '192.0.2.0/24']),
}
CONFIG_A = 'nonMasqueradeCIDRs: [10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16]\n'

# What a round starts from: (description, iptables-restore --noflush input).
JUMP_A = JUMP % (CHAIN, CHAIN)
DRIFTS = [
    ('nothing of ours', ''),
    ('the jump missing', ':%s - [0:0]\n%s\n' % (CHAIN, '\n'.join(EXPECT['A'][1:]))),
    ('two jumps', ':%s - [0:0]\n%s\n%s\n%s\n' % (CHAIN, JUMP_A, JUMP_A, '\n'.join(EXPECT['A'][1:]))),
    ('the chain flushed', ':%s - [0:0]\n%s\n' % (CHAIN, JUMP_A)),
    ('the other policy', ':%s - [0:0]\n%s\n%s\n' % (CHAIN, JUMP_A, '\n'.join(EXPECT['B'][1:]))),
]


def reset(node, index):
    """Empty the namespace's nat table, then load drift number ``index``."""
    _name, body = DRIFTS[index % len(DRIFTS)]
    text = '*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n'
    node.ns.exec([node.backend.tool('iptables-restore')], input=text + body + 'COMMIT\n')


def writer_spec(tmp, node, index, kind, policy):
    spec = {'kind': kind, 'collections': netlab.COLLECTIONS}
    if kind == 'module':
        args = os.path.join(tmp, 'args-%d.json' % index)
        with open(args, 'w') as handle:
            json.dump({'ANSIBLE_MODULE_ARGS': dict(POLICY_A if policy == 'A' else POLICY_B)}, handle)
        spec['args_file'] = args
    else:
        config = os.path.join(tmp, 'config')
        with open(config, 'w') as handle:
            handle.write(CONFIG_A)
        spec['argv'] = ['--config', config, '--state-file', os.path.join(tmp, 'state-%d' % index),
                        '--log-format', 'plain']
    path = os.path.join(tmp, 'spec-%d.json' % index)
    with open(path, 'w') as handle:
        json.dump(spec, handle)
    return path


def one_round(node, tmp, writers):
    """Start every writer at the same instant; return [(kind, policy, rc, stdout, stderr)]."""
    go_r, go_w = os.pipe()
    ready_r, ready_w = os.pipe()
    env = node.backend.env(dict(os.environ, IMQ_READY_FD=str(ready_w), LC_ALL='C.UTF-8'))
    procs = []
    try:
        for index, (kind, policy) in enumerate(writers):
            spec = writer_spec(tmp, node, index, kind, policy)
            procs.append(node.ns.popen([PYTHON, RUNNER, spec], stdin=go_r, stdout=subprocess.PIPE,
                                       stderr=subprocess.PIPE, env=env, pass_fds=(ready_w,)))
        os.close(ready_w)
        ready_w = None
        got = b''
        deadline = time.monotonic() + WRITER_TIMEOUT
        while len(got) < len(writers) and time.monotonic() < deadline:
            if select.select([ready_r], [], [], deadline - time.monotonic())[0]:
                chunk = os.read(ready_r, 16)
                if not chunk:
                    break
                got += chunk
        assert len(got) == len(writers), 'not every writer got ready'
    finally:
        os.close(go_w)          # every writer starts now
        os.close(go_r)
        os.close(ready_r)
        if ready_w is not None:
            os.close(ready_w)
    results = []
    for (kind, policy), proc in zip(writers, procs):
        try:
            out, err = proc.communicate(timeout=WRITER_TIMEOUT)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, err = proc.communicate()
            pytest.fail('a %s writer did not finish within %d s' % (kind, WRITER_TIMEOUT))
        results.append((kind, policy, proc.returncode, out.decode(), err.decode()))
    return results


def check_round(node, results, policies, number):
    for kind, _policy, rc, out, err in results:
        if kind == 'module':
            data = json.loads(out[out.index('{'):])
            assert rc == 0 and not data.get('failed'), 'round %d: a module run failed: %s' % (number, data.get('msg'))
            assert 'Traceback' not in err
        else:
            assert rc == 0, 'round %d: a resync cycle failed (rc=%d): %s' % (number, rc, err)
    rules = node.rules()
    jumps = [r for r in rules if r.startswith('-A POSTROUTING ') and r.endswith('-j ' + CHAIN)]
    assert jumps == [JUMP_A], 'round %d ended with %d jumps: %s' % (number, len(jumps), jumps)
    chain = [r for r in ours(rules) if not r.startswith('-A POSTROUTING ')]
    assert any(chain == EXPECT[p] for p in policies), 'round %d: the chain is none of the policies: %s' % (
        number, chain)


@pytest.mark.parametrize('writers', [
    [('module', 'A')] * 2,
    [('module', 'A')] * 5,
    [('module', 'A'), ('module', 'B')],
    [('module', 'A'), ('module', 'B'), ('module', 'A'), ('module', 'B'), ('module', 'A')],
    [('module', 'A'), ('resync', 'A')],
    [('resync', 'A'), ('module', 'A'), ('resync', 'A'), ('module', 'A'), ('resync', 'A')],
], ids=['2-same', '5-same', '2-different', '5-different', 'module-and-resync', '5-module-and-resync'])
def test_writers_at_the_same_moment_leave_one_jump_and_one_policy(node, tmp_path, writers):
    policies = sorted(set(p for _kind, p in writers))
    for number in range(ROUNDS):
        reset(node, number)
        results = one_round(node, str(tmp_path), writers)
        check_round(node, results, policies, number)


def test_a_writer_waits_for_the_lock_and_plans_from_a_fresh_read(nft_node, tmp_path):
    """While another writer holds the lock, a run waits; when it gets the lock it
    reads again, so it repairs what the first one left, whatever that was."""
    lock = '/run/ipmasq-agent.lock'
    holder = subprocess.Popen(['flock', lock, sys.executable, '-c', 'import sys; sys.stdin.read()'],
                              stdin=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 10
        while subprocess.run(['flock', '-n', lock, 'true'], check=False).returncode == 0:
            assert time.monotonic() < deadline, 'the holder did not take the lock'
            time.sleep(0.01)
        reset(nft_node, 0)
        go_r, go_w = os.pipe()
        ready_r, ready_w = os.pipe()
        spec = writer_spec(str(tmp_path), nft_node, 0, 'module', 'A')
        env = nft_node.backend.env(dict(os.environ, IMQ_READY_FD=str(ready_w)))
        proc = nft_node.ns.popen([PYTHON, RUNNER, spec], stdin=go_r, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, env=env, pass_fds=(ready_w,))
        os.close(ready_w)
        assert select.select([ready_r], [], [], WRITER_TIMEOUT)[0] and os.read(ready_r, 1) == b'x'
        os.close(go_w)
        os.close(go_r)
        os.close(ready_r)
        # The run is blocked on the lock: change the node meanwhile (the other
        # writer's work), then let it go.
        nft_node.ns.exec([nft_node.backend.tool('iptables-restore'), '--noflush'],
                         input='*nat\n%sCOMMIT\n' % DRIFTS[2][1])
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1)
    finally:
        holder.communicate(b'', timeout=30)
    out, _err = proc.communicate(timeout=WRITER_TIMEOUT)
    data = json.loads(out.decode())
    assert proc.returncode == 0 and data['changed'] is True
    assert data['actions'] == ['IPv4: remove 1 duplicate POSTROUTING jump(s) to %s' % CHAIN]
    rules = nft_node.rules()
    assert [r for r in rules if r.endswith('-j ' + CHAIN)] == [JUMP_A]
