"""Fixtures for tests that run against real iptables inside throwaway
network namespaces.  Nothing here touches the root network namespace."""
import os
import shutil
import stat
import subprocess
import tempfile

import pytest

from ipmasq_lab import netlab
from ipmasq_lab import policy_view

PLAYBOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'playbooks', 'masq_chain.yml')
EACH_PLAYBOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'playbooks', 'masq_chain_each.yml')
FOUR_STEPS = ['check1', 'apply1', 'check2', 'apply2']


def pytest_sessionstart(session):
    if os.geteuid() != 0:
        pytest.exit('integration tests need root (network namespaces)', returncode=1)
    netlab.sweep_stale()


class Node:
    """A namespace standing for a node: the iptables tools of one backend
    (``backend``, netlab.Backend) and the policy backend the module is asked
    to use (``policy``: iptables, or nftables).  ``state()`` and
    ``expect()`` give our policy in both backends, read and wanted, in the
    same shape, so one test body checks either."""

    def __init__(self, ns, backend, policy='iptables'):
        self.ns = ns
        self.backend = backend
        self.policy = policy

    def save(self, family=4):
        return self.backend.save(self.ns, family)

    def rules(self, family=4):
        return netlab.nat_rules(self.save(family))

    def ipt(self, *args, family=4, check=True):
        return self.backend.iptables(self.ns, ['-t', 'nat'] + list(args), family=family, check=check)

    def listing(self, chain='IP-MASQ-AGENT', family=4):
        return self.ipt('-L', chain, family=family).stdout

    def nft(self, *args, check=True, input=None):
        return self.ns.exec(['nft'] + list(args), check=check, input=input)

    def module(self, steps=None, env_extra=None, path_prefix=None, hide=(), **masq_args):
        """Run the module through ansible-playbook; return {step: result}.
        An nftables node asks for backend=nftables unless told otherwise.
        ``hide``: tools the run does not find (as if not installed)."""
        if self.policy == 'nftables':
            masq_args.setdefault('backend', 'nftables')
        extra = {'masq_args': masq_args, 'steps': steps or ['apply1']}
        env = dict(env_extra or {})
        if path_prefix:
            env['PATH'] = path_prefix + os.pathsep + self.backend.env()['PATH']
        rc, tasks = netlab.playbook(self.ns, PLAYBOOK, extra_vars=extra, backend=self.backend,
                                    env_extra=env, hide=hide)
        results = {name.replace('Step ', ''): res for name, res in tasks if not res.get('skipped')}
        return results

    def each(self, runs):
        """One module run per dict of options, in one play; their results."""
        if self.policy == 'nftables':
            runs = [dict(r, backend=r.get('backend', 'nftables')) for r in runs]
        _rc, tasks = netlab.playbook(self.ns, EACH_PLAYBOOK, extra_vars={'runs': runs}, backend=self.backend)
        (results,) = [res['results'] for name, res in tasks if name == 'Each run']
        return results

    def four_steps(self, **masq_args):
        """check / apply / check / apply; assert the changed pattern and that
        check mode left the rules alone."""
        before = self.snapshot()
        res = self.module(steps=['check1'], **masq_args)
        assert not res['check1'].get('failed'), res['check1'].get('msg')
        assert res['check1']['changed'] is True
        assert self.snapshot() == before, 'check mode changed the rules'
        res.update(self.module(steps=['apply1', 'check2', 'apply2'], **masq_args))
        for step, want in zip(FOUR_STEPS, (True, True, False, False)):
            assert not res[step].get('failed'), (step, res[step].get('msg'))
            assert res[step]['changed'] is want, (step, res[step].get('actions'))
        if masq_args.get('state', 'present') == 'present':
            assert res['apply1']['selected_backend'] == self.policy
            if self.policy == 'iptables':
                assert res['apply1']['backend'] == self.backend.expect
        return res

    # -- our policy, in both backends --------------------------------------

    def state(self, chain=policy_view.CHAIN):
        """Ours everywhere: the iptables lines per family, and the nft table."""
        return {'ipv4': policy_view.ours(self.rules(4), chain), 'ipv6': policy_view.ours(self.rules(6), chain),
                'nft': policy_view.nft_view(self.ns, chain.lower())}

    def expect(self, cidrs4=tuple(policy_view.DEFAULT_CIDRS), cidrs6=None, masq_link_local=False,
               masq_link_local_ipv6=False, chain=policy_view.CHAIN, nft_cidrs4=None, nft_cidrs6=None):
        """What state() shows when the policy is applied in this node's
        backend (``nft_cidrs*``: the set elements where nft merges the list)."""
        if self.policy == 'nftables':
            return {'ipv4': [], 'ipv6': [], 'nft': policy_view.nft_expect(
                nft_cidrs4 or cidrs4, nft_cidrs6 or cidrs6, masq_link_local, masq_link_local_ipv6,
                table=chain.lower())}
        v4 = ([] if masq_link_local else ['169.254.0.0/16']) + list(cidrs4)
        v6 = None if cidrs6 is None else ([] if masq_link_local_ipv6 else ['fe80::/10']) + list(cidrs6)
        return {'ipv4': policy_view.ipt_expect(v4, chain), 'ipv6': [] if v6 is None else policy_view.ipt_expect(v6, chain),
                'nft': None}

    def snapshot(self):
        """Everything of both iptables families and the whole nft ruleset."""
        return self.save(4), self.save(6), policy_view.nft_ruleset(self.ns)

    def foreign(self, chain=policy_view.CHAIN):
        """Everything that is not ours."""
        return (policy_view.not_ours(self.rules(4), chain), policy_view.not_ours(self.rules(6), chain),
                policy_view.nft_foreign(self.ns, chain.lower()))

    def add_foreign(self, ipv6=False):
        """Other tools' rules: iptables (IPv4, and IPv6 with ``ipv6``) and a table of their own in nft."""
        policy_view.add_foreign(self, 4)
        if ipv6:
            policy_view.add_foreign(self, 6)
        policy_view.add_foreign_nft(self.ns)

    def drift(self, name):
        policy_view.DRIFTS[self.policy][name](self)


@pytest.fixture(scope='session')
def backends():
    made = {name: netlab.Backend(name) for name in ('nft', 'legacy')}
    yield made
    for b in made.values():
        b.remove()


@pytest.fixture(params=['nft', 'legacy'])
def node(request, backends):
    """A node namespace; tests using it run once per iptables backend."""
    with netlab.Netns('node') as ns:
        yield Node(ns, backends[request.param])


@pytest.fixture
def nft_node(backends):
    """A node namespace on the nf_tables backend only."""
    with netlab.Netns('node') as ns:
        yield Node(ns, backends['nft'])


# The policy backends every backend-neutral test runs on: the iptables chain
# (with either iptables backend) and the nftables table.
POLICIES = {
    'iptables-nft': ('nft', 'iptables'),
    'iptables-legacy': ('legacy', 'iptables'),
    'nftables': ('nft', 'nftables'),
}


@pytest.fixture(params=sorted(POLICIES))
def pnode(request, backends):
    """A node namespace whose policy lives in one of POLICIES: the test runs once per entry."""
    tools, policy = POLICIES[request.param]
    with netlab.Netns('node') as ns:
        yield Node(ns, backends[tools], policy)


@pytest.fixture
def make_node(backends):
    """make_node('iptables-legacy') -> a fresh node (removed after the test)."""
    made = []

    def make(kind):
        tools, policy = POLICIES[kind]
        ns = netlab.Netns('node')
        made.append(ns)
        return Node(ns, backends[tools], policy)
    yield make
    for ns in made:
        ns.delete()


class Tree:
    """A temporary root with a node's files."""

    def __init__(self):
        self.root = tempfile.mkdtemp(prefix='imq-root-')

    def path(self, path):
        return os.path.join(self.root, path.lstrip('/'))

    def put(self, path, text, mode=0o644):
        real = self.path(path)
        os.makedirs(os.path.dirname(real), exist_ok=True)
        with open(real, 'w') as f:
            f.write(text)
        os.chmod(real, mode)

    def read(self, path):
        real = self.path(path)
        if not os.path.exists(real):
            return None
        with open(real) as f:
            return f.read()

    def snapshot(self):
        """Every file below the root except our backup store, with content and mode."""
        out = {}
        for dirpath, _dirs, names in os.walk(self.root):
            for name in names:
                real = os.path.join(dirpath, name)
                rel = '/' + os.path.relpath(real, self.root)
                if rel.startswith('/var/lib/ipmasq-agent/') or rel.endswith('~') or rel.startswith('/bin/'):
                    continue
                with open(real, 'rb') as f:
                    out[rel] = (f.read(), stat.S_IMODE(os.stat(real).st_mode))
        return out

    def all_files(self):
        found = []
        for dirpath, _dirs, names in os.walk(self.root):
            found.extend('/' + os.path.relpath(os.path.join(dirpath, n), self.root) for n in names)
        return sorted(found)

    def remove(self):
        # A test of immutable files (chattr +i / +a) may leave one behind when
        # it fails: lift the flags first, or the tree stays in /tmp for good.
        subprocess.run(['chattr', '-R', '-i', '-a', self.root], capture_output=True, check=False)
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def tree():
    t = Tree()
    yield t
    t.remove()
