"""The node-side resync (module_utils/_core/agent/resync.py) as systemd runs it: a real
process started with ``python3 -S -B -c`` from the core package installed as
the role installs it (the resync_code module's installer), against real
iptables (nf_tables and legacy) and real nftables inside a network namespace.
Shims on PATH log every iptables-save/-restore and nft call (and then run the
real tool), so "writes nothing" is counted, not assumed.

The tests that take ``pagent`` run once per policy backend (conftest.POLICIES,
``--backend`` given to the resync): the same checks, each backend read back
in its own terms (policy_view)."""
import os
import stat

import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._resync_code import resync_root
from ansible_collections.ipmasq.agent.plugins.plugin_utils._units import ENTRY  # as the unit starts it
from ipmasq_lab import netlab, policy_view
from ipmasq_lab.policy_view import CHAIN, FOREIGN, JUMP, chain_lines, ours
from test_resync_units import install_core

ROOT = netlab.ROOT
PYTHON = '/usr/bin/python3'
TOOLS = ('iptables-save', 'iptables-restore', 'ip6tables-save', 'ip6tables-restore')
LINK_LOCAL = '169.254.0.0/16'
DEFAULTS = [LINK_LOCAL, '10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']

SEED_000 = '{"NonMasqueradeCIDRs":["172.16.0.0/16","10.168.0.0/16"],"MasqLinkLocal":true,"ResyncInterval":"1m0s"}'
SEED_001 = 'nonMasqueradeCIDRs:\n  - 10.0.0.0/8\nresyncInterval: 60s\nmasqLinkLocal: true\n'
# nft as the shim runs it: logs "nft list" or "nft write" (a transaction that
# adds or deletes), then runs the real nft with the same input.
NFT_SHIM = (
    '#!/usr/bin/python3\n'
    'import os, sys\n'
    'data = sys.stdin.read()\n'
    'kind = "write" if (\'"add"\' in data or \'"delete"\' in data) else "list"\n'
    'with open(%r, "a") as log:\n'
    '    log.write("nft %%s\\n" %% kind)\n'
    'if %r and kind == "write":\n'
    '    sys.stderr.write("nft: transaction refused by the test\\n")\n'
    '    sys.exit(1)\n'
    'r, w = os.pipe()\n'
    'os.write(w, data.encode()); os.close(w)\n'
    'os.dup2(r, 0)\n'
    'os.execv("/usr/sbin/nft", ["/usr/sbin/nft"] + sys.argv[1:])\n')


class Agent:
    """The resync entry point installed as the role installs it, run in a
    node's namespace with ``--backend`` the node's policy backend."""

    def __init__(self, node, base, fail_restore=False):
        self.node = node
        self.base = str(base)
        self.lib = os.path.join(self.base, 'lib')
        install_core(self.lib)
        self.config = os.path.join(self.base, 'etc', 'ip-masq-agent', 'config')
        os.makedirs(os.path.dirname(self.config))
        self.state = os.path.join(self.base, 'state', 'last-good-config')
        self.calls_log = os.path.join(self.base, 'calls.log')
        self.shim = os.path.join(self.base, 'shim')
        os.makedirs(self.shim)
        for tool in TOOLS:
            real = node.backend.tool(tool)
            body = '#!/bin/sh\necho "%s $*" >> %s\n' % (tool, self.calls_log)
            if fail_restore and tool.endswith('-restore'):
                body += 'echo "%s: line 2 failed" >&2\nexit 1\n' % tool
            else:
                body += 'exec %s "$@"\n' % real
            self._shim(tool, body)
        self._shim('nft', NFT_SHIM % (self.calls_log, fail_restore))

    def _shim(self, tool, body):
        path = os.path.join(self.shim, tool)
        with open(path, 'w') as handle:
            handle.write(body)
        os.chmod(path, stat.S_IRWXU)

    def write(self, text):
        with open(self.config, 'w') as handle:
            handle.write(text)

    def run(self, *flags, log_format='journal', check_rc=None, backend=None, timeout=120, max_memory=None):
        """One cycle, bounded by ``timeout`` seconds (and ``max_memory`` bytes of address space)."""
        env = {
            'PATH': os.pathsep.join([self.shim, self.node.backend.path_dir, '/usr/sbin', '/usr/bin', '/sbin', '/bin']),
            'PYTHONPATH': resync_root(self.lib),
        }
        argv = [PYTHON, '-S', '-B', '-c', ENTRY, '--config', self.config, '--state-file', self.state]
        argv += ['--backend', backend or self.node.policy]
        if log_format:
            argv += ['--log-format', log_format]
        if max_memory:
            argv = ['prlimit', '--as=%d' % max_memory, '--'] + argv
        proc = self.node.ns.exec(argv + list(flags), check=False, env=env, timeout=timeout)
        if check_rc is not None:
            assert proc.returncode == check_rc, (proc.returncode, proc.stdout, proc.stderr)
        return proc

    def calls(self):
        if not os.path.exists(self.calls_log):
            return []
        with open(self.calls_log) as handle:
            return handle.read().splitlines()

    def restores(self):
        """The writes so far: iptables restores and nft transactions."""
        return len([c for c in self.calls() if '-restore' in c.split()[0] or c == 'nft write'])

    def state_text(self):
        with open(self.state) as handle:
            return handle.read()

    def state_stat(self):
        st = os.stat(self.state)
        return st.st_ino, st.st_mtime_ns, st.st_size


@pytest.fixture
def agent(node, tmp_path):
    return Agent(node, tmp_path)


@pytest.fixture
def pagent(pnode, tmp_path):
    return Agent(pnode, tmp_path)


def lines(proc, prefix):
    return [line for line in proc.stderr.splitlines() if line.startswith(prefix)]


def want(cidrs, chain=CHAIN):
    """Our rules in iptables-save order: declaration, jump, chain rules."""
    rules = chain_lines(cidrs, chain=chain)
    return [rules[0], JUMP % (chain, chain)] + rules[1:]


# --------------------------------------------------------------------------
# apply, then nothing
# --------------------------------------------------------------------------

def test_first_cycle_applies_and_the_second_writes_nothing(pagent, pnode):
    agent, node = pagent, pnode
    node.add_foreign()
    foreign = node.foreign()
    agent.write(SEED_001)

    first = agent.run(check_rc=0)
    assert node.state() == node.expect(['10.0.0.0/8'], masq_link_local=True)
    assert node.foreign() == foreign
    assert first.stdout == ''
    assert lines(first, '<5>configuration from %s: {"nonMasqueradeCIDRs":["10.0.0.0/8"],"masqLinkLocal":true' % agent.config)
    if node.policy == 'iptables':
        assert lines(first, '<5>applied: ') == [
            '<5>applied: IPv4: create chain %s' % CHAIN,
            '<5>applied: IPv4: append the POSTROUTING jump to %s' % CHAIN]
    else:
        assert lines(first, '<5>applied: ') == [
            '<5>applied: nftables: create table inet ip-masq-agent (nonmasq-ipv4: 1 element(s))']
    assert agent.restores() == 1
    assert agent.state_text() == SEED_001
    assert stat.S_IMODE(os.stat(agent.state).st_mode) == 0o600

    saved = node.snapshot()
    state = agent.state_stat()
    calls = len(agent.calls())
    second = agent.run(check_rc=0)
    assert (second.stdout, second.stderr) == ('', '')
    assert agent.restores() == 1, agent.calls()
    # One read per family (iptables), or one listing (nftables: iptables is asked of the kernel): nothing else.
    reads = sorted(c.split()[0] for c in agent.calls()[calls:])
    assert reads == (['ip6tables-save', 'iptables-save'] if node.policy == 'iptables' else ['nft'])
    assert node.snapshot() == saved
    assert agent.state_stat() == state

    verbose = agent.run('-v', check_rc=0)
    if node.policy == 'iptables':
        assert lines(verbose, '<6>in sync: chain %s' % CHAIN)
    else:
        assert lines(verbose, '<6>in sync: table inet ip-masq-agent (nft ')
    assert agent.restores() == 1


def test_seed_000_json_config(agent, node):
    agent.write(SEED_000)
    agent.run(check_rc=0)
    assert ours(node.rules()) == want(['172.16.0.0/16', '10.168.0.0/16'])


def test_plain_log_format_off_the_journal(agent, node):
    agent.write(SEED_001)
    proc = agent.run(log_format=None, check_rc=0)
    assert 'ip-masq-agent: notice: applied: IPv4: create chain %s' % CHAIN in proc.stderr.splitlines()
    assert '<5>' not in proc.stderr


# --------------------------------------------------------------------------
# drift
# --------------------------------------------------------------------------

def _jump_args():
    return ['-m', 'comment', '--comment', 'ip-masq-agent: ensure nat POSTROUTING directs all non-LOCAL destination '
            'traffic to our custom %s chain' % CHAIN, '-m', 'addrtype', '!', '--dst-type', 'LOCAL', '-j', CHAIN]


DRIFTS = {
    'rule deleted': ([['-D', CHAIN, '1']], ['rewrite chain %s (1 rules -> 2 rules)' % CHAIN]),
    'chain flushed': ([['-F', CHAIN]], ['rewrite chain %s (0 rules -> 2 rules)' % CHAIN]),
    'foreign rule inside': ([['-I', CHAIN, '1', '-d', '198.51.100.0/24', '-j', 'RETURN']],
                            ['rewrite chain %s (3 rules -> 2 rules)' % CHAIN]),
    'jump duplicated': ([['-A', 'POSTROUTING'] + _jump_args()],
                        ['remove 1 duplicate POSTROUTING jump(s) to %s' % CHAIN]),
    'jump deleted': ([['-D', 'POSTROUTING'] + _jump_args()], ['append the POSTROUTING jump to %s' % CHAIN]),
    'chain deleted': ([['-D', 'POSTROUTING'] + _jump_args(), ['-F', CHAIN], ['-X', CHAIN]],
                      ['create chain %s' % CHAIN, 'append the POSTROUTING jump to %s' % CHAIN]),
}


NFT_DRIFTS = {
    'set element deleted': 'rewrite table inet ip-masq-agent (set nonmasq-ipv4: 0 element(s), 1 wanted)',
    'set element added': 'rewrite table inet ip-masq-agent (set nonmasq-ipv4: 2 element(s), 1 wanted)',
    'chain flushed': 'rewrite table inet ip-masq-agent (chain postrouting: 0 rule(s), 3 wanted)',
    'foreign rule in the chain': 'rewrite table inet ip-masq-agent (chain postrouting: 4 rule(s), 3 wanted)',
    'table deleted': 'create table inet ip-masq-agent (nonmasq-ipv4: 1 element(s))',
    'table dormant': 'rewrite table inet ip-masq-agent (',
}
# What the repair's log line names after its counts (which rule was missing or extra).
DRIFT_WORDS = {
    ('iptables', 'rule deleted'): ': missing `-A %s -d 10.0.0.0/8 ' % CHAIN,
    ('iptables', 'chain flushed'): ': missing `-A %s -d 10.0.0.0/8 ' % CHAIN,
    ('iptables', 'foreign rule inside'): ': extra `-A %s -d 198.51.100.0/24 -j RETURN`' % CHAIN,
    ('nftables', 'set element deleted'): ': set nonmasq-ipv4: missing `10.0.0.0/8`',
    ('nftables', 'set element added'): ': set nonmasq-ipv4: extra `',
    ('nftables', 'chain flushed'): ': chain postrouting: missing `',
    ('nftables', 'foreign rule in the chain'): ': chain postrouting: extra `',
}
DRIFT_CASES = ([(kind, name) for kind in ('iptables-nft', 'iptables-legacy') for name in sorted(DRIFTS)]
               + [('nftables', name) for name in sorted(NFT_DRIFTS)])


def _nft_drift(node, name):
    if name == 'set element deleted':
        node.nft('delete', 'element', 'inet', 'ip-masq-agent', 'nonmasq-ipv4', '{', '10.0.0.0/8', '}')
    else:
        node.drift(name)


@pytest.mark.parametrize('kind,drift', DRIFT_CASES, ids=['%s:%s' % c for c in DRIFT_CASES])
def test_drift_is_repaired_and_logged(make_node, tmp_path, kind, drift):
    node = make_node(kind)
    agent = Agent(node, tmp_path)
    node.add_foreign()
    agent.write(SEED_001)
    agent.run(check_rc=0)
    good = node.snapshot()
    state = agent.state_stat()
    if node.policy == 'iptables':
        commands, actions = DRIFTS[drift]
        for args in commands:
            node.ipt(*args)
        actions = ['<4>repaired drift: IPv4: %s' % a for a in actions]
    else:
        _nft_drift(node, drift)
        actions = ['<4>repaired drift: nftables: %s' % NFT_DRIFTS[drift]]
    assert node.snapshot() != good

    proc = agent.run(check_rc=0)
    assert node.snapshot() == good
    repaired = lines(proc, '<4>')
    assert len(repaired) == len(actions) and all(r.startswith(a) for r, a in zip(repaired, actions)), repaired
    if (node.policy, drift) in DRIFT_WORDS:
        assert DRIFT_WORDS[(node.policy, drift)] in repaired[0], repaired
    assert not lines(proc, '<5>'), 'the config did not change'
    assert agent.restores() == 2
    assert agent.state_stat() == state

    again = agent.run(check_rc=0)
    assert again.stderr == '' and agent.restores() == 2


def test_check_mode_reports_and_writes_nothing(pagent, pnode):
    agent, node = pagent, pnode
    agent.write(SEED_001)
    agent.run(check_rc=0)
    if node.policy == 'iptables':
        node.ipt('-F', CHAIN)
        would = 'IPv4: rewrite chain %s (0 rules -> 2 rules)' % CHAIN
    else:
        node.nft('flush', 'chain', 'inet', 'ip-masq-agent', 'postrouting')
        would = 'nftables: rewrite table inet ip-masq-agent (chain postrouting: 0 rule(s), 3 wanted)'
    drifted = node.snapshot()
    proc = agent.run('--check', check_rc=0)
    assert lines(proc, '<5>would repair: ') == ['<5>would repair: ' + would]
    assert node.snapshot() == drifted and agent.restores() == 1
    # A new config in check mode: reported, but neither applied nor saved.
    agent.write('nonMasqueradeCIDRs: [192.168.0.0/16]\n')
    proc = agent.run('--check', check_rc=0)
    assert lines(proc, '<5>configuration from')
    assert node.snapshot() == drifted and agent.state_text() == SEED_001 and agent.restores() == 1


# --------------------------------------------------------------------------
# config changes
# --------------------------------------------------------------------------

def test_an_edited_config_is_applied_and_saved(agent, node):
    agent.write(SEED_000)
    agent.run(check_rc=0)
    edited = ('# edited\nNonMasqueradeCIDRs:\n  - 10.0.0.0/8\n  - 192.168.0.0/16\nMASQLINKLOCAL: no\n'
              'enable-ipv6: true\n')
    agent.write(edited)
    proc = agent.run(check_rc=0)
    assert ours(node.rules()) == want([LINK_LOCAL, '10.0.0.0/8', '192.168.0.0/16'])
    assert lines(proc, '<5>configuration from')
    assert lines(proc, '<5>applied: ') == ['<5>applied: IPv4: rewrite chain %s (3 rules -> 4 rules)' % CHAIN]
    warnings = lines(proc, '<4>')
    assert len(warnings) == 1 and 'unknown key "enable-ipv6" (line 6) is ignored' in warnings[0]
    assert agent.state_text() == edited
    # The warning is about the file: said once, when the file changed.
    assert agent.run(check_rc=0).stderr == ''


def test_a_comment_only_edit_changes_no_rule(agent, node):
    agent.write(SEED_001)
    agent.run(check_rc=0)
    agent.write('# reviewed\n' + SEED_001)
    proc = agent.run(check_rc=0)
    assert lines(proc, '<5>configuration from') and not lines(proc, '<5>applied')
    assert agent.restores() == 1 and agent.state_text() == '# reviewed\n' + SEED_001


def test_missing_config_means_the_defaults(agent, node):
    proc = agent.run(check_rc=0)
    assert ours(node.rules()) == want(DEFAULTS)
    assert lines(proc, '<5>no config file at %s: the upstream defaults apply' % agent.config)
    assert agent.state_text() == ''
    assert agent.run(check_rc=0).stderr == ''

    agent.write(SEED_001)
    agent.run(check_rc=0)
    assert ours(node.rules()) == want(['10.0.0.0/8'])
    os.unlink(agent.config)
    proc = agent.run(check_rc=0)
    assert ours(node.rules()) == want(DEFAULTS)
    assert lines(proc, '<5>no config file at')


# --------------------------------------------------------------------------
# invalid config: the last good one stays enforced
# --------------------------------------------------------------------------

INVALID = {
    'bad yaml': ('nonMasqueradeCIDRs:\n  - 10.0.0.0/8\n\t- 172.16.0.0/12\n', 'line 3: a tab in the indentation'),
    'host bits': ('nonMasqueradeCIDRs: [10.0.0.1/8]\n', "'10.0.0.1/8' is not aligned to a CIDR block"),
    'wrong type': ('masqLinkLocal: "true"\n', 'masqLinkLocal (line 1) must be true or false'),
    'bad duration': ('resyncInterval: 1d\n', 'unknown unit "d"'),
    'ipv6 without the flag': ('nonMasqueradeCIDRs: ["fd00::/8"]\n', 'IPv6 is not enabled'),
    'broken json': ('{"nonMasqueradeCIDRs": [10.0.0.0/8]}', 'invalid JSON'),
}


@pytest.mark.parametrize('case', sorted(INVALID))
def test_invalid_config_keeps_the_last_good_rules_even_after_drift(pagent, pnode, case):
    agent, node = pagent, pnode
    agent.write(SEED_001)
    agent.run(check_rc=0)
    good = node.snapshot()
    state = agent.state_stat()

    text, reason = INVALID[case]
    agent.write(text)
    proc = agent.run(check_rc=2)
    errors = lines(proc, '<3>')
    assert len(errors) == 1, proc.stderr
    assert errors[0].startswith('<3>%s refused: ' % agent.config) and reason in errors[0]
    assert 'Enforcing the last good configuration instead (%s' % agent.state in errors[0]
    assert node.snapshot() == good and agent.restores() == 1
    assert agent.state_stat() == state

    if node.policy == 'iptables':
        node.ipt('-F', CHAIN)
        node.ipt('-A', 'POSTROUTING', *_jump_args())
        repaired = ['IPv4: rewrite chain %s (0 rules -> 2 rules)' % CHAIN,
                    'IPv4: remove 1 duplicate POSTROUTING jump(s) to %s' % CHAIN]
    else:
        node.nft('flush', 'chain', 'inet', 'ip-masq-agent', 'postrouting')
        repaired = ['nftables: rewrite table inet ip-masq-agent (chain postrouting: 0 rule(s), 3 wanted)']
    proc = agent.run(check_rc=2)
    assert node.snapshot() == good
    got = lines(proc, '<4>')
    assert len(got) == len(repaired), got
    assert all(g.startswith('<4>repaired drift (last good configuration): ' + r) for g, r in zip(got, repaired)), got
    assert ': missing `' in got[0], 'the repair names the rules it put back: %s' % got[0]
    assert agent.state_text() == SEED_001

    agent.write(SEED_000)
    agent.run(check_rc=0)
    assert node.state() == node.expect(['172.16.0.0/16', '10.168.0.0/16'], masq_link_local=True,
                                       nft_cidrs4=['10.168.0.0/16', '172.16.0.0/16'])


# Files that exhausted the stack (a RecursionError traceback, exit 1) or the
# memory (an alias bomb as a key: MemoryError after 2 GB) of a cycle, which then
# enforced nothing (issue 18 items 7 and 8): 15 to 125 KB, and 523 bytes.
def _bomb(key):
    lines = ['a0: &a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += ['a%d: &a%d [%s]' % (n, n, ','.join(['*a%d' % (n - 1)] * 9)) for n in range(1, 10)]
    return '\n'.join(lines) + ('\nb: {*a9: 1}\n' if key else '\nnonMasqueradeCIDRs: *a9\n')


HOSTILE = {
    'yaml flow': ('nonMasqueradeCIDRs: ' + '[' * 20000 + ']' * 20000 + '\n', 'line 1: lists and mappings nested '
                  'more than 32 deep'),
    'yaml block': (''.join(' ' * n + 'a:\n' for n in range(480)), 'line 33: lists and mappings nested more than 32'),
    'json': ('{"nonMasqueradeCIDRs": ' + '[' * 60000 + ']' * 60000 + '}', 'JSON arrays and objects nested more than 32'),
    'alias bomb as a key': (_bomb(True), 'aliases that expand to more than 100000 values'),
    'alias bomb as a value': (_bomb(False), 'aliases that expand to more than 100000 values'),
}


def test_deep_nesting_and_alias_bombs_are_refused_and_the_last_good_config_enforced(make_node, tmp_path):
    """Each file is refused (exit 2, one error naming why, no traceback) within
    seconds and 1 GiB, and the cycle repairs drift with the last good configuration."""
    node = make_node('iptables-nft')
    agent = Agent(node, tmp_path)
    agent.write(SEED_001)
    agent.run(check_rc=0)
    good = node.snapshot()
    state = agent.state_stat()
    assert len(_bomb(True)) < 600
    for case, (text, reason) in sorted(HOSTILE.items()):
        assert len(text) <= 125 * 1024, case
        agent.write(text)
        node.ipt('-F', CHAIN)       # drift, which the last good configuration repairs
        proc = agent.run(timeout=60, max_memory=1 << 30)
        assert proc.returncode == 2, (case, proc.returncode, proc.stderr[-3000:])
        assert not any(word in proc.stderr for word in ('Traceback', 'RecursionError', 'MemoryError')), case
        errors = lines(proc, '<3>')
        assert len(errors) == 1 and errors[0].startswith('<3>%s refused: ' % agent.config), (case, proc.stderr)
        assert reason in errors[0] and 'Enforcing the last good configuration instead' in errors[0], (case, errors)
        assert lines(proc, '<4>repaired drift (last good configuration): '), (case, proc.stderr)
        assert node.snapshot() == good, case
        assert agent.state_stat() == state and agent.state_text() == SEED_001, case


def test_invalid_config_without_a_last_good_one_changes_nothing(pagent, pnode):
    agent, node = pagent, pnode
    node.add_foreign()
    before = node.snapshot()
    agent.write('nonMasqueradeCIDRs: [10.0.0.1/8]\n')
    proc = agent.run(check_rc=2)
    assert 'There is no last good configuration (%s) to enforce instead' % agent.state in proc.stderr
    assert node.snapshot() == before and agent.restores() == 0
    assert not os.path.exists(agent.state)


@pytest.mark.parametrize('kind', ['iptables-nft', 'iptables-legacy', 'nftables'])
def test_a_failed_write_is_an_error_and_saves_no_state(make_node, tmp_path, kind):
    node = make_node(kind)
    agent = Agent(node, tmp_path, fail_restore=True)
    agent.write(SEED_001)
    proc = agent.run(check_rc=1)
    if node.policy == 'iptables':
        assert 'iptables-restore --wait=30 --noflush failed (rc=1)' in proc.stderr
        assert 'line 2 failed' in proc.stderr
    else:
        assert 'nft -j -f - (the transaction) failed (rc=1)' in proc.stderr
        assert 'transaction refused by the test' in proc.stderr
    assert node.state() == {'ipv4': [], 'ipv6': [], 'nft': None} and not os.path.exists(agent.state)


@pytest.mark.parametrize('flavour', ['iptables-nft', 'iptables-legacy'])
def test_the_backend_flag_moves_the_policy(make_node, tmp_path, flavour):
    """--backend as the role passes it: a cycle with the other backend moves
    the policy in that cycle, and logs each step; the next writes nothing."""
    node = make_node(flavour)
    agent = Agent(node, tmp_path)
    agent.write(SEED_001)
    agent.run(backend='iptables', check_rc=0)
    ipt_state = node.expect(['10.0.0.0/8'], masq_link_local=True)
    assert node.state() == ipt_state
    proc = agent.run(backend='nftables', check_rc=0)
    nft_only = {'ipv4': [], 'ipv6': [], 'nft': policy_view.nft_expect(['10.0.0.0/8'], masq_link_local=True)}
    assert node.state() == nft_only
    assert lines(proc, '<4>') == [
        '<4>repaired drift: nftables: create table inet ip-masq-agent (nonmasq-ipv4: 1 element(s))',
        '<4>repaired drift: IPv4: remove 1 POSTROUTING jump(s) to %s' % CHAIN,
        '<4>repaired drift: IPv4: delete chain %s' % CHAIN]
    assert agent.run(backend='nftables', check_rc=0).stderr == ''
    agent.run(backend='auto', check_rc=0)
    assert node.state()['nft'] is not None, 'auto keeps the node on nftables'
    agent.run(backend='iptables', check_rc=0)
    assert node.state() == ipt_state


# --------------------------------------------------------------------------
# flags
# --------------------------------------------------------------------------

def test_ipv6_with_enable_ipv6_and_its_removal(nft_node, tmp_path):
    agent = Agent(nft_node, tmp_path)
    agent.write('nonMasqueradeCIDRs: [10.0.0.0/8, "fd00:10::/48"]\nmasqLinkLocalIPv6: false\n')
    proc = agent.run('--enable-ipv6', check_rc=0)
    assert ours(nft_node.rules(6)) == want(['fe80::/10', 'fd00:10::/48'])
    assert ours(nft_node.rules(4)) == want([LINK_LOCAL, '10.0.0.0/8'])
    assert '<5>applied: IPv6: create chain %s' % CHAIN in proc.stderr.splitlines()
    assert agent.run('--enable-ipv6=true', check_rc=0).stderr == ''

    # IPv6 switched off: the file must lose its IPv6 entry, and our IPv6 chain goes.
    agent.write('nonMasqueradeCIDRs: [10.0.0.0/8]\n')
    proc = agent.run('--enable-ipv6=false', check_rc=0)
    assert ours(nft_node.rules(6)) == []
    assert ours(nft_node.rules(4)) == want([LINK_LOCAL, '10.0.0.0/8'])


def test_the_agent_writes_the_rules_the_module_writes(nft_node, tmp_path):
    """Same inputs, same rules: the agent and ipmasq.agent.masq_chain share the core."""
    flags = ['--masq-chain', 'MY-SNAT', '--jump-position=first', '--random-fully',
             '--to-ports', '1024-29999,32768-65535', '--nomasq-all-reserved-ranges']
    agent = Agent(nft_node, tmp_path)
    for args in FOREIGN:
        nft_node.ipt(*args)
    agent.write('nonMasqueradeCIDRs: [10.0.0.0/8]\nmasqLinkLocal: true\n')
    agent.run(*flags, check_rc=0)
    by_agent = nft_node.rules()
    assert [r for r in by_agent if r.startswith('-A POSTROUTING ')][0] == JUMP % ('MY-SNAT', 'MY-SNAT')
    assert len([r for r in by_agent if r.startswith('-A MY-SNAT ')]) == 1 + 8 + 3 * 2 + 1   # 10/8, reserved ranges, 2 port ranges x 3 protocols, final
    with netlab.Netns('node2') as ns2:
        other = type(nft_node)(ns2, nft_node.backend)
        for args in FOREIGN:
            other.ipt(*args)
        res = other.module(nonmasquerade_cidrs=['10.0.0.0/8'], masq_link_local=True, chain='MY-SNAT',
                           jump_position='first', random_fully=True, to_ports=['1024-29999', '32768-65535'],
                           nomasq_all_reserved_ranges=True)
        assert not res['apply1'].get('failed'), res['apply1'].get('msg')
        assert other.rules() == by_agent


@pytest.mark.parametrize('flags,fragment', [
    (['--masq-chain', 'MY CHAIN'], "'MY CHAIN' is not a valid chain name"),
    (['--masq-chain', 'POSTROUTING'], 'built-in chain'),
    (['--to-ports', '1024-99999'], 'not a range inside 1-65535'),
    (['--enable-ipv6=maybe'], "invalid boolean value 'maybe' for --enable-ipv6"),
    (['--jump-position', 'last'], '--jump-position must be one of append, first'),
    (['--resync-interval', '1d'], 'unknown unit "d"'),
    (['--config'], '--config needs a value'),
    (['--bogus'], 'unknown option --bogus'),
])
def test_bad_flags_are_a_usage_error_and_change_nothing(agent, node, flags, fragment):
    agent.write(SEED_001)
    proc = agent.run(*flags, check_rc=64)
    assert fragment in proc.stderr
    assert ours(node.rules()) == [] and agent.calls() == [] and not os.path.exists(agent.state)


def test_resync_interval_mismatch_is_reported_once(agent, node):
    agent.write(SEED_001)
    proc = agent.run('--resync-interval', '30s', check_rc=0)
    assert lines(proc, '<4>%s: resyncInterval is 1m0s but this service runs every 30s' % agent.config)
    assert agent.run('--resync-interval', '30s', check_rc=0).stderr == ''
    agent.write(SEED_001.replace('60s', '30s'))
    assert not lines(agent.run('--resync-interval', '30s', check_rc=0), '<4>')
