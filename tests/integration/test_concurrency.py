"""Writers of ours at the same moment (issue: concurrent runs cost a node its
SNAT).  Each round puts the node in a drifted state, then starts 2 or 5
writers at the same instant (masq_chain's own main(), the resync's cycle, or
both; see race_run.py) against real iptables and nftables in a namespace,
on every policy backend (the chain with either iptables backend, the
table), and writers of both backends against each other.  Every round must
end with the policy in one backend only: exactly one POSTROUTING jump to the
chain and a chain equal to one of the policies that ran, or our table equal
to one of them; and every writer must have succeeded or said why it failed.
Bounded: 20 rounds, every writer under a time limit."""
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time

import pytest

from ipmasq_lab import netlab, policy_view
from ipmasq_lab.policy_view import CHAIN, JUMP, chain_lines, ours

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
NFT_EXPECT = {
    'A': policy_view.nft_expect(POLICY_A['nonmasquerade_cidrs']),
    'B': policy_view.nft_expect(POLICY_B['nonmasquerade_cidrs'], masq_link_local=True),
}
CONFIG_A = 'nonMasqueradeCIDRs: [10.0.0.0/8, 172.16.0.0/12, 192.168.0.0/16]\n'

# What a round starts from: (description, iptables-restore --noflush input, nft -f input).
JUMP_A = JUMP % (CHAIN, CHAIN)
IPT_A = ':%s - [0:0]\n%s\n%s\n' % (CHAIN, JUMP_A, '\n'.join(EXPECT['A'][1:]))
NFT_RULES = ('fib daddr type local return comment "ip-masq-agent: local destinations are never subject to '
             'MASQUERADE"\n%s\nip daddr @nonmasq-ipv4 return comment "ip-masq-agent: cluster-local traffic should '
             'not be subject to MASQUERADE"\nmeta nfproto ipv4 masquerade comment "ip-masq-agent: outbound traffic '
             'should be subject to MASQUERADE (this match must come after cluster-local CIDR matches)"')
LINK_LOCAL_RULE = ('ip daddr 169.254.0.0/16 return comment "ip-masq-agent: cluster-local traffic should not be '
                   'subject to MASQUERADE"')


def nft_table(elements, rules=True, link_local=True):
    """Our table as nft -f input (a set with ``elements``; the chain empty unless ``rules``)."""
    body = NFT_RULES % (LINK_LOCAL_RULE if link_local else '') if rules else ''
    return ('table inet ip-masq-agent {\n set nonmasq-ipv4 { type ipv4_addr; flags interval; %s}\n'
            ' chain postrouting {\n  type nat hook postrouting priority srcnat + 1; policy accept;\n%s\n }\n}\n'
            % ('elements = { %s }; ' % ', '.join(elements) if elements else '', body))


DRIFTS = {
    'iptables': [
        ('nothing of ours', '', ''),
        ('the jump missing', ':%s - [0:0]\n%s\n' % (CHAIN, '\n'.join(EXPECT['A'][1:])), ''),
        ('two jumps', ':%s - [0:0]\n%s\n%s\n%s\n' % (CHAIN, JUMP_A, JUMP_A, '\n'.join(EXPECT['A'][1:])), ''),
        ('the chain flushed', ':%s - [0:0]\n%s\n' % (CHAIN, JUMP_A), ''),
        ('the other policy', ':%s - [0:0]\n%s\n%s\n' % (CHAIN, JUMP_A, '\n'.join(EXPECT['B'][1:])), ''),
        ('ours in nftables too', IPT_A, nft_table(['10.0.0.0/8'])),
    ],
    'nftables': [
        ('nothing of ours', '', ''),
        ('the set flushed', '', nft_table([])),
        ('the chain flushed', '', nft_table(POLICY_A['nonmasquerade_cidrs'], rules=False)),
        ('the other policy', '', nft_table(POLICY_B['nonmasquerade_cidrs'], link_local=False)),
        ('ours in iptables too', IPT_A, nft_table(POLICY_A['nonmasquerade_cidrs'])),
        ('ours in iptables only', IPT_A, ''),
    ],
}


def reset(node, index, kind=None):
    """Empty the namespace's nat table and our table, then load drift number ``index``."""
    _name, ipt, nft = DRIFTS[kind or node.policy][index % len(DRIFTS[kind or node.policy])]
    text = '*nat\n:PREROUTING ACCEPT [0:0]\n:INPUT ACCEPT [0:0]\n:OUTPUT ACCEPT [0:0]\n:POSTROUTING ACCEPT [0:0]\n'
    node.ns.exec([node.backend.tool('iptables-restore')], input=text + ipt + 'COMMIT\n')
    node.nft('delete', 'table', 'inet', 'ip-masq-agent', check=False)
    if nft:
        node.nft('-f', '-', input=nft)


def writer_spec(tmp, node, index, kind, policy, backend):
    spec = {'kind': kind, 'collections': netlab.COLLECTIONS}
    if kind == 'module':
        args = os.path.join(tmp, 'args-%d.json' % index)
        module_args = dict(POLICY_A if policy == 'A' else POLICY_B, backend=backend)
        with open(args, 'w') as handle:
            json.dump({'ANSIBLE_MODULE_ARGS': module_args}, handle)
        spec['args_file'] = args
    else:
        config = os.path.join(tmp, 'config')
        with open(config, 'w') as handle:
            handle.write(CONFIG_A)
        spec['argv'] = ['--config', config, '--state-file', os.path.join(tmp, 'state-%d' % index),
                        '--log-format', 'plain', '--backend', backend]
    path = os.path.join(tmp, 'spec-%d.json' % index)
    with open(path, 'w') as handle:
        json.dump(spec, handle)
    return path


class Writers:
    """The writers of one test, one process each (race_run.py --slot), that
    import their code once and fork a fresh writer for every round.  A round
    starts every writer at the same instant, as writers started on their own
    would: each blocks on the read end of one shared "go" pipe until the test
    closes its write end.  ``prefix``: what each writer's process runs under
    (private_run.py)."""

    def __init__(self, node, tmp, writers, prefix=()):
        self.tmp = tmp
        self.writers = writers
        self.socks = []
        self.procs = []
        env = node.backend.env(dict(os.environ, LC_ALL='C.UTF-8'))
        try:
            for index, (kind, policy, backend) in enumerate(writers):
                spec = writer_spec(tmp, node, index, kind, policy, backend)
                ours, theirs = socket.socketpair()
                self.socks.append(ours)
                log = open(os.path.join(tmp, 'slot-%d.log' % index), 'wb')
                with theirs, log:
                    self.procs.append(node.ns.popen(
                        list(prefix) + [PYTHON, RUNNER, '--slot', str(theirs.fileno()), spec],
                        stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env, pass_fds=(theirs.fileno(),)))
        except BaseException:
            self.close()
            raise

    def round(self, number):
        """One round; return [(kind, policy, rc, stdout, stderr)]."""
        go_r, go_w = os.pipe()
        ready_r, ready_w = os.pipe()
        files = [(os.path.join(self.tmp, 'round-%d-%d.out' % (number, i)),
                  os.path.join(self.tmp, 'round-%d-%d.err' % (number, i))) for i in range(len(self.writers))]
        try:
            for sock, names in zip(self.socks, files):
                socket.send_fds(sock, [json.dumps(names).encode()], [go_r, ready_w])
            os.close(ready_w)
            ready_w = None
            got = b''
            deadline = time.monotonic() + WRITER_TIMEOUT
            while len(got) < len(self.writers) and time.monotonic() < deadline:
                if select.select([ready_r], [], [], deadline - time.monotonic())[0]:
                    chunk = os.read(ready_r, 16)
                    if not chunk:
                        break
                    got += chunk
            assert len(got) == len(self.writers), 'not every writer got ready'
        finally:
            os.close(go_w)          # every writer starts now
            os.close(go_r)
            os.close(ready_r)
            if ready_w is not None:
                os.close(ready_w)
        codes = {}
        deadline = time.monotonic() + WRITER_TIMEOUT
        while len(codes) < len(self.socks) and time.monotonic() < deadline:
            for sock in select.select([s for s in self.socks if s not in codes], [], [],
                                      max(0, deadline - time.monotonic()))[0]:
                line = sock.recv(64)
                assert line.endswith(b'\n'), 'a writer slot ended in round %d: %r' % (number, line)
                codes[sock] = int(line)
        if len(codes) < len(self.socks):
            pytest.fail('a writer did not finish within %d s' % WRITER_TIMEOUT)
        results = []
        for (kind, policy, _backend), sock, (out, err) in zip(self.writers, self.socks, files):
            with open(out) as o, open(err) as e:
                results.append((kind, policy, codes[sock], o.read(), e.read()))
        return results

    def close(self):
        for sock in self.socks:
            sock.close()            # the slot's cue to exit
        for proc in self.procs:
            try:
                proc.wait(timeout=WRITER_TIMEOUT)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def check_writers(results, number):
    for kind, _policy, rc, out, err in results:
        if kind == 'module':
            data = json.loads(out[out.index('{'):])
            assert rc == 0 and not data.get('failed'), 'round %d: a module run failed: %s' % (number, data.get('msg'))
            assert 'Traceback' not in err
        else:
            assert rc == 0, 'round %d: a resync cycle failed (rc=%d): %s' % (number, rc, err)


def check_round(node, results, policies, number, backend):
    """Exactly one policy, in ``backend`` only."""
    check_writers(results, number)
    state = node.state()
    if backend == 'iptables':
        rules = node.rules()
        jumps = [r for r in rules if r.startswith('-A POSTROUTING ') and r.endswith('-j ' + CHAIN)]
        assert jumps == [JUMP_A], 'round %d ended with %d jumps: %s' % (number, len(jumps), jumps)
        chain = [r for r in ours(rules) if not r.startswith('-A POSTROUTING ')]
        assert any(chain == EXPECT[p] for p in policies), 'round %d: the chain is none of the policies: %s' % (
            number, chain)
        assert state['nft'] is None, 'round %d: our table is still there' % number
    else:
        assert any(state['nft'] == NFT_EXPECT[p] for p in policies), 'round %d: the table is none of the ' \
            'policies: %s' % (number, state['nft'])
        assert state['ipv4'] == [] and state['ipv6'] == [], 'round %d: our chain is still there' % number


MIXES = {
    '2-same': [('module', 'A')] * 2,
    '5-same': [('module', 'A')] * 5,
    '2-different': [('module', 'A'), ('module', 'B')],
    '5-different': [('module', 'A'), ('module', 'B'), ('module', 'A'), ('module', 'B'), ('module', 'A')],
    'module-and-resync': [('module', 'A'), ('resync', 'A')],
    '5-module-and-resync': [('resync', 'A'), ('module', 'A'), ('resync', 'A'), ('module', 'A'), ('resync', 'A')],
}


@pytest.mark.parametrize('mix', sorted(MIXES))
def test_writers_at_the_same_moment_leave_one_policy(pnode, tmp_path, mix):
    writers = [(kind, policy, pnode.policy) for kind, policy in MIXES[mix]]
    policies = sorted(set(p for _kind, p, _b in writers))
    with Writers(pnode, str(tmp_path), writers) as slots:
        for number in range(ROUNDS):
            reset(pnode, number)
            results = slots.round(number)
            check_round(pnode, results, policies, number, pnode.policy)


@pytest.mark.parametrize('flavour', ['iptables-nft', 'iptables-legacy'])
def test_writers_of_both_backends_at_the_same_moment_leave_the_policy_in_one(make_node, tmp_path, flavour):
    """A module run moving the node to nftables meets one moving it back to
    iptables (and a resync of each): whichever comes last, the node ends
    every round with the policy in exactly one backend."""
    node = make_node(flavour)
    writers = [('module', 'A', 'iptables'), ('module', 'A', 'nftables'), ('resync', 'A', 'nftables'),
               ('resync', 'A', 'iptables')]
    with Writers(node, str(tmp_path), writers) as slots:
        for number in range(ROUNDS):
            reset(node, number, kind='iptables' if number % 2 else 'nftables')
            results = slots.round(number)
            check_writers(results, number)
            state = node.state()
            in_ipt = state['ipv4'] == policy_view.ipt_expect(['169.254.0.0/16'] + POLICY_A['nonmasquerade_cidrs'])
            in_nft = state['nft'] == NFT_EXPECT['A']
            assert in_ipt != in_nft, 'round %d: the policy is in %s' % (
                number, 'both backends' if in_ipt else 'neither')
            if in_nft:
                assert state['ipv4'] == [] and state['ipv6'] == [], (number, state)
            else:
                assert state['nft'] is None and state['ipv6'] == [], (number, state)


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
        spec = writer_spec(str(tmp_path), nft_node, 0, 'module', 'A', 'iptables')
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
                         input='*nat\n%sCOMMIT\n' % DRIFTS['iptables'][2][1])
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


LOCK_REMOVED_ROUNDS = 4


def test_writers_while_the_lock_file_is_removed_again_and_again_leave_one_jump(nft_node, tmp_path):
    """The lock file removed while writers hold it and wait for it (issue 18,
    item 3): a writer that then makes and locks a new file must still wait for
    the one holding the removed file.  Every writer of a round sees a /run of
    the test's own (private_run.py), whose lock file a thread removes every
    millisecond while the round runs; each round starts with nothing of ours,
    so writers that overlap would each append a jump."""
    run = tmp_path / 'run'
    run.mkdir()
    lock = str(run / 'ipmasq-agent.lock')
    prefix = ['/usr/bin/python3', os.path.join(HERE, 'private_run.py'), str(run), '--']
    writers = [('module', 'A', 'iptables')] * 3
    removed = []
    with Writers(nft_node, str(tmp_path), writers, prefix=prefix) as slots:
        for number in range(LOCK_REMOVED_ROUNDS):
            lock_removed_round(nft_node, slots, lock, number, removed)
    assert len(removed) >= LOCK_REMOVED_ROUNDS, 'the lock file was hardly ever removed: the test proved nothing'


def lock_removed_round(nft_node, slots, lock, number, removed):
    """One round of the test above, while a thread removes the lock file every millisecond."""
    reset(nft_node, 0)
    stop = threading.Event()

    def remove():
        deadline = time.monotonic() + WRITER_TIMEOUT
        while not stop.is_set() and time.monotonic() < deadline:
            try:
                os.unlink(lock)
                removed.append(number)
            except OSError:
                pass
            time.sleep(0.001)
    remover = threading.Thread(target=remove)
    remover.start()
    try:
        results = slots.round(number)
    finally:
        stop.set()
        remover.join()
    check_round(nft_node, results, ['A'], number, 'iptables')
