"""Fixtures for tests that run against real iptables inside throwaway
network namespaces.  Nothing here touches the root network namespace."""
import os
import shutil
import stat
import sys
import tempfile

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import netlab  # noqa: E402  (path set just above)

PLAYBOOK = os.path.join(os.path.dirname(os.path.abspath(__file__)), 'playbooks', 'masq_chain.yml')
FOUR_STEPS = ['check1', 'apply1', 'check2', 'apply2']


def pytest_sessionstart(session):
    if os.geteuid() != 0:
        pytest.exit('integration tests need root (network namespaces)', returncode=1)
    netlab.sweep_stale()


class Node:
    """A namespace standing for a node, with the backend its iptables uses."""

    def __init__(self, ns, backend):
        self.ns = ns
        self.backend = backend

    def save(self, family=4):
        return self.backend.save(self.ns, family)

    def rules(self, family=4):
        return netlab.nat_rules(self.save(family))

    def ipt(self, *args, family=4, check=True):
        return self.backend.iptables(self.ns, ['-t', 'nat'] + list(args), family=family, check=check)

    def listing(self, chain='IP-MASQ-AGENT', family=4):
        return self.ipt('-L', chain, family=family).stdout

    def module(self, steps=None, env_extra=None, path_prefix=None, **masq_args):
        """Run the module through ansible-playbook; return {step: result}."""
        extra = {'masq_args': masq_args, 'steps': steps or ['apply1']}
        env = dict(env_extra or {})
        if path_prefix:
            env['PATH'] = path_prefix + os.pathsep + self.backend.env()['PATH']
        rc, tasks = netlab.playbook(self.ns, PLAYBOOK, extra_vars=extra, backend=self.backend,
                                    env_extra=env)
        results = {name.replace('Step ', ''): res for name, res in tasks if not res.get('skipped')}
        return results

    def four_steps(self, **masq_args):
        """check / apply / check / apply; assert the changed pattern and that
        check mode left the rules alone."""
        before = self.save(4), self.save(6)
        res = self.module(steps=['check1'], **masq_args)
        assert not res['check1'].get('failed'), res['check1'].get('msg')
        assert res['check1']['changed'] is True
        assert (self.save(4), self.save(6)) == before, 'check mode changed the rules'
        res.update(self.module(steps=['apply1', 'check2', 'apply2'], **masq_args))
        for step, want in zip(FOUR_STEPS, (True, True, False, False)):
            assert not res[step].get('failed'), (step, res[step].get('msg'))
            assert res[step]['changed'] is want, (step, res[step].get('actions'))
        assert res['apply1']['backend'] == self.backend.expect
        return res


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
        shutil.rmtree(self.root, ignore_errors=True)


@pytest.fixture
def tree():
    t = Tree()
    yield t
    t.remove()
