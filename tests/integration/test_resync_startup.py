"""What a resync cycle loads (its start-up cost, issue 34's performance goal:
the no-drift cycle within 2x of its floor).  Every cycle is a fresh python3
that pays for each module it imports, and on this kind of machine each
module costs some ten system calls besides its code.  A cycle on a node
whose policy is in the iptables chain asks the kernel over nfnetlink
whether an nftables table of ours exists; where none does, nft is never
run, so nftables' rules, its JSON reader, its tools and its planner are not
loaded; nor are the drift's words, the msg's words or the kernel's xtables
reader, which only a repair, a module run or a node without legacy's tools
needs.  Where the policy is in the nftables table nft's are, and the cycle
works as before.  Real processes started as the unit starts them, in a
namespace of the test's own, against real iptables and nft."""
import json
import os

import pytest

from ansible_collections.ipmasq.agent.plugins.module_utils._resync_code import resync_root
from test_resync import ENTRY, PYTHON, SEED_001, Agent

CORE = 'ansible_collections.ipmasq.agent.plugins.module_utils._core.'
# The unit's entry, then the core modules the process loaded, as JSON on stdout.
LOADED = ENTRY.replace('raise SystemExit(main())',
                       'code = main(); import sys, json; '
                       'print(json.dumps(sorted(m for m in sys.modules if m.startswith(%r)))); '
                       'raise SystemExit(code)' % CORE)
NFT_INTERNALS = ('nftables_backend.nft_json', 'nftables_backend.rules', 'nftables_backend.table',
                 'nftables_backend.tools')
# Nor what only a repair, a module's msg or a node without legacy's tools needs: the drift's
# comparison and words, the msg's words, the kernel's xtables reader.
NOT_IN_SYNC = ('engine.drift', 'engine.result_words', 'iptables_backend.xtables_kernel')


def loaded(agent, backend):
    """One cycle as the unit runs it; ``(exit code, the core's modules it loaded, stderr)``."""
    env = {'PATH': os.pathsep.join([agent.shim, agent.node.backend.path_dir, '/usr/sbin', '/usr/bin', '/sbin', '/bin']),
           'PYTHONPATH': resync_root(agent.lib)}
    argv = [PYTHON, '-S', '-B', '-c', LOADED, '--config', agent.config, '--state-file', agent.state,
            '--backend', backend, '--log-format', 'plain']
    proc = agent.node.ns.exec(argv, check=False, env=env, timeout=120)
    modules = json.loads(proc.stdout.splitlines()[-1]) if proc.stdout.strip() else None
    return proc.returncode, [m[len(CORE):] for m in modules or ()], proc.stderr


@pytest.mark.parametrize('backend', ['auto', 'iptables'])
def test_a_no_drift_cycle_on_an_iptables_node_loads_no_nftables_internals(make_node, tmp_path, backend):
    node = make_node('iptables-nft')
    agent = Agent(node, tmp_path)
    agent.write(SEED_001)
    assert loaded(agent, backend)[0] == 0            # the first cycle applies
    writes = agent.restores()
    code, modules, err = loaded(agent, backend)
    assert code == 0 and err == '', err
    assert agent.restores() == writes                 # no drift: nothing written
    assert 'nftables_backend.backend' in modules      # nftables still looked (over nfnetlink)
    assert [m for m in NFT_INTERNALS + NOT_IN_SYNC if m in modules] == [], modules
    assert not [c for c in agent.calls() if c.startswith('nft')], agent.calls()


def test_a_cycle_on_an_nftables_node_loads_them_and_stays_in_sync(make_node, tmp_path):
    node = make_node('nftables')
    agent = Agent(node, tmp_path)
    agent.write(SEED_001)
    assert loaded(agent, 'nftables')[0] == 0
    writes = agent.restores()
    code, modules, err = loaded(agent, 'nftables')
    assert code == 0 and err == '', err
    assert agent.restores() == writes
    assert [m for m in NFT_INTERNALS if m in modules] == list(NFT_INTERNALS)


def opened_below(agent, trace):
    """The files and folders of the installed code a no-drift cycle, as the
    unit runs it, looked up, opened or listed (``strace`` of the cycle's
    python3), and its exit code."""
    code = os.path.join(resync_root(agent.lib), 'ansible_collections')
    env = {'PATH': os.pathsep.join([agent.shim, agent.node.backend.path_dir, '/usr/sbin', '/usr/bin', '/sbin', '/bin']),
           'PYTHONPATH': resync_root(agent.lib)}
    argv = ['strace', '-qq', '-e', 'trace=open,openat,stat,lstat,newfstatat,statx,access', '-o', str(trace),
            PYTHON, '-S', '-B', '-c', ENTRY, '--config', agent.config, '--state-file', agent.state,
            '--backend', 'iptables', '--log-format', 'plain']
    proc = agent.node.ns.exec(argv, check=False, env=env, timeout=120)
    with open(str(trace)) as handle:
        paths = [line.split('"')[1] for line in handle if '"' in line]
    return proc.returncode, sorted(set(p[len(code) + 1:] for p in paths if p.startswith(code + '/')))


def test_a_cycle_reads_the_core_from_one_file(make_node, tmp_path):
    """The unit's entry loads the core's modules from the version's one
    compiled file (``_core/agent/boot.py``): not one ``.py`` or ``.pyc`` of
    the core looked up or opened, nor a folder listed; only ``resync.py``
    is opened, for the shared lock that keeps its root (hold_root)."""
    node = make_node('iptables-nft')
    agent = Agent(node, tmp_path)
    agent.write(SEED_001)
    assert loaded(agent, 'iptables')[0] == 0
    code, touched = opened_below(agent, tmp_path / 'trace')
    assert code == 0
    assert touched == ['ipmasq/agent/plugins/module_utils/_core/agent/resync.py'], touched
