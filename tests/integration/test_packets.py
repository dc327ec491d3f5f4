"""Real packets through a node that runs ipmasq.agent.masq_chain.

Every test builds its own namespaces (see topology.py): a pod, a node with
forwarding on, an "external" host at a documentation address with no route
back to the pod network (a reply only comes back if the node masqueraded the
connection), a cluster-local host in 10.0.0.0/8 and a link-local host in
169.254.0.0/16 (both with a route back).  The module runs in the node through
ansible-playbook; the pod then opens TCP connections and each receiver says
which source address it saw.

Each test first probes with no rules (or the previous rules) so that it
proves the module made the difference.  Needs root; nothing happens in the
root network namespace.
"""
import os
import signal

import pytest

from ipmasq_lab import netlab, topology
from ipmasq_lab.topology import NO_REPLY, NODE_CL4, NODE_CL6, NODE_EXT4, NODE_EXT6, NODE_LL4, POD4, POD6, Topology

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='needs root (network namespaces)')

DEFAULT_CIDRS = ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16']
CHAIN = 'IP-MASQ-AGENT'

# IPv4 receivers with no rules at all: the external host cannot answer.
NO_MASQ4 = {'external': NO_REPLY, 'cluster-local': POD4, 'link-local': POD4}
# The upstream defaults.
DEFAULT_MASQ4 = {'external': NODE_EXT4, 'cluster-local': POD4, 'link-local': POD4}
V4 = tuple(NO_MASQ4)
V6 = ('external6', 'cluster-local6')


@pytest.fixture(scope='session', autouse=True)
def root_namespace_untouched():
    """SIGTERM/SIGHUP clean up like Ctrl-C; and the root namespace's nat
    table is the same after the session as before (never any chain of ours)."""
    old = {}
    for sig in (signal.SIGTERM, signal.SIGHUP):
        try:
            old[sig] = signal.signal(sig, topology.interrupt_handler)
        except ValueError:  # not the main thread
            pass
    before = netlab.nat_rules(netlab.run(['iptables-save', '-t', 'nat']).stdout)
    tables_before = netlab.run(['nft', 'list', 'tables']).stdout
    yield
    for sig, handler in old.items():
        signal.signal(sig, handler)
    after = netlab.nat_rules(netlab.run(['iptables-save', '-t', 'nat']).stdout)
    assert not [line for line in after if CHAIN in line], after
    assert after == before
    tables_after = netlab.run(['nft', 'list', 'tables']).stdout
    assert 'ip-masq-agent' not in tables_after and tables_after == tables_before


def _topology(backend_name, ipv6):
    backend = netlab.Backend(backend_name)
    try:
        topo = Topology(ipv6=ipv6, backend=backend)
    except BaseException:
        backend.remove()
        raise
    return topo


@pytest.fixture(params=['nft'])
def topo(request):
    """A fresh IPv4 + IPv6 topology (nft backend unless parametrized), always removed."""
    with _topology(request.param, ipv6=True) as built:
        yield built


def _chain_in(topo, family=4):
    return any(line.startswith(':%s ' % CHAIN) for line in netlab.nat_rules(topo.nat_save(family)))


def _postrouting(topo, family=4):
    return [line for line in netlab.nat_rules(topo.nat_save(family))
            if line.startswith('-A POSTROUTING ')]


@pytest.mark.parametrize('topo', ['nft', 'legacy'], indirect=True)
def test_defaults_masquerade_only_outside_nonmasq_cidrs(topo):
    # Without the module: the external host never answers (no route back).
    assert topo.probe(V4) == NO_MASQ4

    # Check mode writes nothing: still no masquerade.
    rc, results = topo.steps({}, ['check1'])
    check = results['check1']
    assert rc == 0 and check['changed'] is True, check
    assert topo.probe(V4) == NO_MASQ4

    result = topo.masq()
    assert result['changed'] is True
    assert result['backend'] == topo.backend.expect  # the backend we meant
    assert _chain_in(topo)
    assert topo.probe(V4) == DEFAULT_MASQ4

    result = topo.masq(state='absent')
    assert result['changed'] is True
    assert not _chain_in(topo)
    assert not [line for line in _postrouting(topo) if CHAIN in line]
    assert topo.probe(V4) == NO_MASQ4


def test_masq_link_local_follows_option(topo):
    assert topo.probe(V4) == NO_MASQ4

    topo.masq(masq_link_local=True)
    assert topo.probe(V4) == {'external': NODE_EXT4, 'cluster-local': POD4, 'link-local': NODE_LL4}

    # Back to the default: the chain is rewritten, link-local is exempt again.
    result = topo.masq()
    assert result['changed'] is True
    assert topo.probe(V4) == DEFAULT_MASQ4


def test_nonmasquerade_cidrs_replace_the_default_list(topo):
    # Only 192.168.0.0/16 exempt: the cluster-local host (10.10.0.10) is masqueraded too.
    topo.masq(nonmasquerade_cidrs=['192.168.0.0/16'])
    assert topo.probe(V4) == {'external': NODE_EXT4, 'cluster-local': '10.10.0.1', 'link-local': POD4}


def test_nomasq_all_reserved_ranges_exempts_documentation_addresses(topo):
    # 203.0.113.0/24 is one of the reserved ranges: the external host is then
    # exempt, so (having no route back) it cannot answer.
    topo.masq()
    assert topo.probe(V4) == DEFAULT_MASQ4
    topo.masq(nomasq_all_reserved_ranges=True)
    assert topo.probe(V4) == NO_MASQ4


def test_ipv6(topo):
    assert topo.probe(V6) == {'external6': NO_REPLY, 'cluster-local6': POD6}

    result = topo.masq(ipv6=True, nonmasquerade_cidrs=DEFAULT_CIDRS + ['fd00:10::/64'])
    assert result['ipv6']['managed'] is True and result['ipv6']['changed'] is True
    assert topo.probe() == dict(DEFAULT_MASQ4, external6=NODE_EXT6, **{'cluster-local6': POD6})

    # Without fd00:10::/64 in the list the cluster-local host is masqueraded too.
    topo.masq(ipv6=True)
    assert topo.probe(V6) == {'external6': NODE_EXT6, 'cluster-local6': NODE_CL6}

    # ipv6: false removes the IPv6 side and keeps IPv4.
    result = topo.masq(ipv6=False)
    assert not _chain_in(topo, 6)
    assert topo.probe() == dict(DEFAULT_MASQ4, external6=NO_REPLY, **{'cluster-local6': POD6})

    topo.masq(state='absent')
    assert topo.probe() == dict(NO_MASQ4, external6=NO_REPLY, **{'cluster-local6': POD6})


def test_jump_position_first_beats_an_earlier_foreign_rule(topo):
    foreign = [
        # Ends nat POSTROUTING for traffic to 203.0.113.0/24 before any later jump.
        ['-t', 'nat', '-A', 'POSTROUTING', '-d', '203.0.113.0/24',
         '-m', 'comment', '--comment', 'foreign: accept', '-j', 'ACCEPT'],
        # Docker-like, does not match the pod.
        ['-t', 'nat', '-A', 'POSTROUTING', '-s', '172.17.0.0/16', '!', '-o', 'docker0',
         '-m', 'comment', '--comment', 'foreign: docker-like', '-j', 'MASQUERADE'],
    ]
    for args in foreign:
        topo.iptables(args)
    foreign_lines = _postrouting(topo)
    assert len(foreign_lines) == 2

    # append (the default, as upstream): the jump comes after the foreign ACCEPT.
    topo.masq()
    rules = _postrouting(topo)
    assert rules[:2] == foreign_lines and CHAIN in rules[2]
    assert topo.probe(V4) == NO_MASQ4

    # first: the jump moves to position 1 and wins; the foreign rules stay.
    result = topo.masq(jump_position='first')
    assert result['changed'] is True
    rules = _postrouting(topo)
    assert CHAIN in rules[0] and rules[1:] == foreign_lines
    assert topo.probe(V4) == DEFAULT_MASQ4

    # absent removes only our jump and chain.
    topo.masq(state='absent')
    assert _postrouting(topo) == foreign_lines
    assert topo.probe(V4) == NO_MASQ4


@pytest.mark.parametrize('tools,backend', [('nft', 'iptables'), ('legacy', 'iptables'), ('nft', 'nftables')])
def test_a_renamed_chain_decides_alone(tools, backend):
    """Issue 26: after a run with another chain name, the old chain (or
    table) no longer decides: a CIDR newly added to the list keeps its
    source address, IPv4 and IPv6; and the same when renamed back."""
    narrow = dict(backend=backend, ipv6=True, nonmasquerade_cidrs=['192.168.0.0/16'])
    wide = dict(backend=backend, ipv6=True, nonmasquerade_cidrs=['192.168.0.0/16', '10.0.0.0/8', 'fd00::/8'])
    masqueraded = dict(DEFAULT_MASQ4, **{'cluster-local': NODE_CL4, 'external6': NODE_EXT6, 'cluster-local6': NODE_CL6})
    kept = dict(DEFAULT_MASQ4, **{'external6': NODE_EXT6, 'cluster-local6': POD6})
    with _topology(tools, ipv6=True) as topo:
        topo.masq(**narrow)
        assert topo.probe() == masqueraded
        topo.masq(chain='MY-MASQ', **wide)
        assert topo.probe() == kept
        topo.masq(**narrow)
        assert topo.probe() == masqueraded
        topo.masq(chain='MY-MASQ', state='absent')
        assert topo.probe() == dict(NO_MASQ4, **{'external6': NO_REPLY, 'cluster-local6': POD6})


@pytest.mark.parametrize('tools', ['nft', 'legacy'])
def test_a_rename_with_a_switch_to_nftables_leaves_the_table_alone(tools):
    """Issue 32 item 12: the chain in iptables (either flavour), then one run
    with another chain name and backend=nftables: the old chain is gone from
    both iptables flavours, a CIDR newly on the list keeps its source address
    (the old chain would masquerade it), and the table is what masquerades:
    with it deleted by hand, nothing does."""
    narrow = dict(ipv6=True, nonmasquerade_cidrs=['192.168.0.0/16'])
    wide = dict(ipv6=True, nonmasquerade_cidrs=['192.168.0.0/16', '10.0.0.0/8', 'fd00::/8'])
    masqueraded = dict(DEFAULT_MASQ4, **{'cluster-local': NODE_CL4, 'external6': NODE_EXT6, 'cluster-local6': NODE_CL6})
    kept = dict(DEFAULT_MASQ4, **{'external6': NODE_EXT6, 'cluster-local6': POD6})
    with _topology(tools, ipv6=True) as topo:
        topo.masq(backend='iptables', **narrow)
        assert topo.probe() == masqueraded
        result = topo.masq(backend='nftables', chain='MY-MASQ', **wide)
        assert result['selected_backend'] == 'nftables'
        for save in ('iptables-nft-save', 'ip6tables-nft-save', 'iptables-legacy-save', 'ip6tables-legacy-save'):
            text = topo.node.exec([save, '-t', 'nat']).stdout
            assert 'ip-masq-agent' not in text and CHAIN not in text, (save, text)
        tables = topo.node.exec(['nft', 'list', 'tables']).stdout.splitlines()
        assert 'table inet my-masq' in tables and 'table inet ip-masq-agent' not in tables, tables
        assert topo.probe() == kept
        topo.node.exec(['nft', 'delete', 'table', 'inet', 'my-masq'])
        assert topo.probe() == dict(NO_MASQ4, **{'external6': NO_REPLY, 'cluster-local6': POD6})


def test_to_ports_picks_the_source_port(topo):
    topo.masq(to_ports=['40000-40009'])
    assert topo.probe(['external']) == {'external': NODE_EXT4}
    assert 40000 <= topo.last_probe['ports']['external'] <= 40009


# --------------------------------------------------------------------------
# Packet equivalence: the iptables chain and the nftables table give every
# receiver the same source address
# --------------------------------------------------------------------------

NO_MASQ6 = {'external6': NO_REPLY, 'cluster-local6': POD6}
EQUIVALENCE = {
    # config: (module options, what each receiver sees)
    'defaults': ({}, dict(DEFAULT_MASQ4, **NO_MASQ6)),
    'seed 000, link-local masqueraded': (
        dict(nonmasquerade_cidrs=['172.16.0.0/16', '10.168.0.0/16'], masq_link_local=True),
        dict({'external': NODE_EXT4, 'cluster-local': NODE_CL4, 'link-local': NODE_LL4}, **NO_MASQ6)),
    'default list, link-local masqueraded': (
        dict(masq_link_local=True),
        dict({'external': NODE_EXT4, 'cluster-local': POD4, 'link-local': NODE_LL4}, **NO_MASQ6)),
    'IPv6, fd00::/8 kept': (
        dict(ipv6=True, nonmasquerade_cidrs=DEFAULT_CIDRS + ['fd00::/8']),
        dict(DEFAULT_MASQ4, external6=NODE_EXT6, **{'cluster-local6': POD6})),
    'IPv6, only IPv4 kept': (
        dict(ipv6=True, masq_link_local=True),
        dict({'external': NODE_EXT4, 'cluster-local': POD4, 'link-local': NODE_LL4},
             external6=NODE_EXT6, **{'cluster-local6': NODE_CL6})),
    'to_ports, two ranges': (
        dict(to_ports=['40000-40004', '40010-40014'], random_fully=True),
        dict(DEFAULT_MASQ4, **NO_MASQ6)),
}
PORTS = set(range(40000, 40005)) | set(range(40010, 40015))


@pytest.mark.parametrize('config', sorted(EQUIVALENCE))
def test_both_backends_give_every_receiver_the_same_source(config):
    """One topology, one configuration, then each backend in turn (the
    second run switches: it removes the first one's rules): every receiver
    sees the same source address (and, with to_ports, a port in the ranges)."""
    args, want = EQUIVALENCE[config]
    seen = {}
    with _topology('nft', ipv6=True) as topo:
        assert topo.probe() == dict(NO_MASQ4, **NO_MASQ6)
        for backend in ('iptables', 'nftables', 'iptables'):
            result = topo.masq(backend=backend, **args)
            assert result['selected_backend'] == backend
            seen[backend] = topo.probe()
            assert seen[backend] == want, (backend, seen[backend])
            if 'to_ports' in args:
                ports = [topo.last_probe['ports'][name] for name, addr in want.items() if addr == NODE_EXT4]
                assert ports and set(ports) <= PORTS, (backend, ports)
        topo.masq(state='absent')
        assert topo.probe() == dict(NO_MASQ4, **NO_MASQ6)
    assert seen['iptables'] == seen['nftables']
