"""Real packets for the extension options of masq_chain 1.1.0, on both
policy backends: exception_cidrs, masquerade_cidrs, snat_to (and
snat_to_require_local), source_cidrs and out_interfaces.

The topology of topology.py, with a few additions (all in namespaces made and
removed here, no route out of them, addresses from the topology's own ranges
and the documentation ranges)::

      pod   10.244.1.2 ---+                  +--- external      203.0.113.10   no route back
      pod2  10.244.2.2 ---+---  node  -------+--- cluster-local 10.10.0.10 and 10.20.0.10
                              (forwarding)   +--- link-local    169.254.10.10
                                             +--- other         198.51.100.10  route back via the node

* the node holds a second address on its external link, 203.0.113.7 (a
  secondary address: masquerade still picks 203.0.113.1), for snat_to;
  the external host has a static neighbour entry for 203.0.113.99 (an
  address the node does not hold) pointing at the node, as for a VIP;
* cluster-local has a second address, 10.20.0.10 (the node 10.20.0.1 on
  that link): inside 10.0.0.0/8 like 10.10.0.10, for exception_cidrs;
* "other" is a second documentation-range receiver on its own node
  interface (to-other) with a route back to the pod network (and to
  203.0.113.0/24, so that it can answer an SNAT to 203.0.113.7): it answers
  whether masqueraded or not, so what it saw shows the difference;
* pod2 is a second pod in 10.244.2.0/24 (its own node interface), outside
  source_cidrs=[10.244.1.0/24].

One topology per backend; the policies are applied in sequence on it, each
after the one that shows what the receivers see without the option (no
rules, the defaults, or the same policy without exception_cidrs). Every
expected source is written by hand below. Needs root; nothing happens in the
root network namespace (test_packets.py's session fixture checks that).
"""
import os

import pytest

from ipmasq_lab import netlab, policy_view, topology
# autouse: the root namespace stays as it was.
from test_packets import root_namespace_untouched  # noqa: F401 pylint: disable=unused-import
from ipmasq_lab.topology import NO_REPLY, NODE_EXT4, NODE_LL4, POD4, Receiver, Topology

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason='needs root (network namespaces)')

PLAYBOOK = os.path.join(topology.INTEGRATION, 'playbooks', 'masq_chain_ext.yml')

POD2 = '10.244.2.2'
NODE_POD2 = '10.244.2.1'
CL2 = '10.20.0.10'
NODE_CL2 = '10.20.0.1'
OTHER = '198.51.100.10'
NODE_OTHER = '198.51.100.1'
SNAT_ADDR = '203.0.113.7'       # second address of the node, on to-ext
VIP = '203.0.113.99'            # not on the node; the external host's neighbour entry points at the node

RECEIVERS = ('external', 'cluster-local', 'cluster-local2', 'link-local', 'other')

# The iptables tools of the node and the policy backend (module option
# backend). iptables-legacy writes the same chain text as iptables-nft and
# passes too (add ('legacy', 'iptables') here); left out to save its ~19 s.
BACKENDS = {
    'iptables-nft': ('nft', 'iptables'),
    'nftables': ('nft', 'nftables'),
}


class ExtTopology(Topology):
    """topology.Topology plus pod2, "other", 10.20.0.10 and 203.0.113.7 (see the module docstring)."""

    source = 'pod'

    @property
    def pod(self):
        return self.ns[self.source]

    def build(self):
        super().build()
        node, cl, ext = self.ns['node'], self.ns['cluster'], self.ns['external']
        for role in ('pod2', 'other'):
            self.ns[role] = netlab.Netns(role)
        pod2, other = self.ns['pod2'], self.ns['other']

        netlab.addr(cl, 'eth0', CL2 + '/24')
        netlab.addr(node, 'to-cluster', NODE_CL2 + '/24')
        netlab.addr(node, 'to-ext', SNAT_ADDR + '/24')      # secondary: masquerade keeps .1

        netlab.link(node, 'to-other', other, 'eth0')
        netlab.addr(other, 'eth0', OTHER + '/24')
        netlab.addr(node, 'to-other', NODE_OTHER + '/24')
        other.exec(['ip', 'route', 'add', topology.POD_NET4, 'via', NODE_OTHER])
        other.exec(['ip', 'route', 'add', '203.0.113.0/24', 'via', NODE_OTHER])

        netlab.link(node, 'to-pod2', pod2, 'eth0')
        netlab.addr(pod2, 'eth0', POD2 + '/24')
        netlab.addr(node, 'to-pod2', NODE_POD2 + '/24')
        pod2.exec(['ip', 'route', 'add', 'default', 'via', NODE_POD2])

        mac = node.exec(['cat', '/sys/class/net/to-ext/address']).stdout.strip()
        ext.exec(['ip', 'neigh', 'replace', VIP, 'lladdr', mac, 'dev', 'eth0', 'nud', 'permanent'])

        self.receivers = self.receivers + [Receiver('cluster-local2', 'cluster', 4, CL2, NODE_CL2),
                                           Receiver('other', 'other', 4, OTHER, NODE_OTHER)]
        self._check_no_route_back()
        # No route out: nothing but the pods' default routes via the node.
        for role, ns in self.ns.items():
            default = ns.exec(['ip', 'route', 'show', 'default']).stdout.strip()
            assert bool(default) == role.startswith('pod'), (role, default)

    def probe_from(self, source):
        """probe() with the connections opened in ``source`` (pod or pod2)."""
        self.source = source
        try:
            return self.probe(RECEIVERS, timeout=1.0)
        finally:
            self.source = 'pod'


def run(topo, policy, **args):
    """One module run in the node (ansible-playbook); its result (failures kept)."""
    args.setdefault('backend', policy)
    rc, tasks = topo.playbook(PLAYBOOK, {'masq_args': args}, timeout=120)
    (result,) = [res for name, res in tasks if name == 'Apply']
    assert rc == 0, (rc, result)
    return result


def apply(topo, policy, **args):
    result = run(topo, policy, **args)
    assert not result.get('failed'), (args, result.get('msg'))
    if args.get('state', 'present') == 'present':
        assert result['selected_backend'] == policy, result
        if policy == 'iptables':
            assert result['backend'] == topo.backend.expect, result
    return result


def snapshot(topo):
    return topo.nat_save(4), topo.nat_save(6), policy_view.nft_ruleset(topo.node)


def sees(base, **changes):
    """A copy of ``base`` with some receivers changed (names with _ for -)."""
    out = dict(base)
    for name, value in changes.items():
        name = name.replace('_', '-')
        assert name in out, name
        out[name] = value
    return out


# What each receiver sees, by hand. From pod (10.244.1.2), no rules at all:
# only the external host cannot answer (no route back).
NONE = {'external': NO_REPLY, 'cluster-local': POD4, 'cluster-local2': POD4,
        'link-local': POD4, 'other': POD4}
NONE2 = {'external': NO_REPLY, 'cluster-local': POD2, 'cluster-local2': POD2,
         'link-local': POD2, 'other': POD2}
# The defaults (10/8, 172.16/12, 192.168/16 and link-local kept): external and
# other are masqueraded, each to the node's address of its own link.
DEFAULTS = sees(NONE, external=NODE_EXT4, other=NODE_OTHER)
DEFAULTS2 = sees(NONE2, external=NODE_EXT4, other=NODE_OTHER)


def check(topo, label, want, baseline, source='pod'):
    """Probe from ``source``; what it sees must be ``want`` and (so that the
    option is what made the difference) ``want`` must differ from the
    ``baseline`` measured earlier on the same topology."""
    assert want != baseline, label
    got = topo.probe_from(source)
    assert got == want, (label, source, got)
    return got


@pytest.mark.parametrize('kind', sorted(BACKENDS))
def test_extension_options_on_real_packets(kind):
    tools, policy = BACKENDS[kind]
    with ExtTopology.with_tools(tools, ipv6=False) as topo:
        # Baselines: no rules, then the defaults.
        assert topo.probe_from('pod') == NONE
        assert topo.probe_from('pod2') == NONE2
        apply(topo, policy)
        assert topo.probe_from('pod') == DEFAULTS
        assert topo.probe_from('pod2') == DEFAULTS2

        # masquerade-only: only 203.0.113.0/24 and 10.20.0.0/24 are
        # rewritten; other (198.51.100.10, not listed) now sees the pod,
        # 10.10.0.10 too, 10.20.0.10 sees the node.
        apply(topo, policy, masquerade_cidrs=['203.0.113.0/24', '10.20.0.0/24'])
        check(topo, 'masquerade_cidrs', sees(NONE, external=NODE_EXT4, cluster_local2=NODE_CL2), DEFAULTS)

        # out_interfaces: the defaults, but only for traffic leaving by
        # to-ext: other (leaving by to-other) keeps the pod's source.
        apply(topo, policy, out_interfaces=['to-ext'])
        check(topo, 'out_interfaces', sees(NONE, external=NODE_EXT4), DEFAULTS)

        # source_cidrs: the defaults for 10.244.1.0/24 only; pod2
        # (10.244.2.2) keeps its source: other sees it, external cannot answer.
        apply(topo, policy, source_cidrs=['10.244.1.0/24'])
        check(topo, 'source_cidrs, listed source', DEFAULTS, NONE)
        check(topo, 'source_cidrs, other source', NONE2, DEFAULTS2, source='pod2')

        # snat_to the node's second address: every masqueraded connection
        # carries 203.0.113.7, whatever link it leaves by (other answers it
        # through its route to 203.0.113.0/24 via the node).
        apply(topo, policy, snat_to=[SNAT_ADDR])
        want_snat = sees(NONE, external=SNAT_ADDR, other=SNAT_ADDR)
        check(topo, 'snat_to', want_snat, DEFAULTS)

        # snat_to an address the node does not hold: a clear error, nothing changed.
        before = snapshot(topo)
        result = run(topo, policy, snat_to=[VIP])
        assert result.get('failed') and result.get('changed') is not True, result
        msg = result.get('msg', '')
        assert 'snat_to' in msg and VIP in msg and 'not assigned' in msg and 'Nothing was changed' in msg, msg
        assert snapshot(topo) == before
        assert topo.probe_from('pod') == want_snat

        # ... unless snat_to_require_local is off (the external host's
        # neighbour entry sends the replies to the node, as for a VIP).
        apply(topo, policy, snat_to=[VIP], snat_to_require_local=False)
        check(topo, 'snat_to, not local', sees(NONE, external=VIP, other=VIP), want_snat)

        # exception_cidrs: 10.0.0.0/8 kept, then 10.20.0.0/24 (and the
        # link-local host's /24) masqueraded all the same; 10.10.0.10, in the
        # same kept /8 but outside the exception, still sees the pod.
        apply(topo, policy, nonmasquerade_cidrs=['10.0.0.0/8'])
        kept = topo.probe_from('pod')
        assert kept == DEFAULTS
        apply(topo, policy, nonmasquerade_cidrs=['10.0.0.0/8'],
              exception_cidrs=['10.20.0.0/24', '169.254.10.0/24'])
        check(topo, 'exception_cidrs', sees(DEFAULTS, cluster_local2=NODE_CL2, link_local=NODE_LL4), kept)

        apply(topo, policy, state='absent')
        assert topo.probe_from('pod') == NONE
