# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Who wrote a nat rule: the owners the audit knows, the clues that tell
them apart (chain, table, comment, interface, default subnet) and what to do
about each.

The registered daemons' owners come from the daemon registry
(``_daemons/registry.py``: each descriptor's ``owner``), whose names the
clean-up that removes their rules reads too; the others (ours, kube-proxy,
the CNI plugins, netavark, libvirt) are described here.  ``CATALOGUE``,
``OWNERS``, ``HINTS`` and ``SERVICE_OWNERS`` are derived from the registry
as it is when they are read (a test may register a daemon).

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine import attribution
from ansible_collections.ipmasq.agent.plugins.module_utils._core.engine.walk import Clues
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import OUR_COMMENT_PREFIX
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import registry
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.cni_names import CHAIN_PREFIX as CNI_CHAIN_PREFIX
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.owner import Owner

OURS = Owner(
    'ip-masq-agent',
    chains=('IP-MASQ',),
    tables=('ip-masq-agent',),
    comments=(OUR_COMMENT_PREFIX,),
    hint=('a second ip-masq-agent chain (left by an earlier run under another chain name?): '
          'the next run of ipmasq.agent.masq_chain removes %(chain)s, as every chain of ours under '
          'another name'),
)
KUBE_PROXY = Owner(
    'kube-proxy',
    chains=('KUBE-',),
    tables=('kube-proxy',),
    comments=('kubernetes ', 'kube '),
    service=True,           # its 0x4000 mark
    hint=('a kube-proxy rule that is not limited to marked service traffic: check kube-proxy\'s '
          '--masquerade-all and --cluster-cidr settings'),
)
CNI = Owner(
    'cni',
    chains=(CNI_CHAIN_PREFIX,),
    tables=('cni',),
    # "cni ...", the bridge plugin's 'name: "x" id: "y"' and portmap's ', net: x, if: y, id: z'
    comment_patterns=(r'(?i)^cni ', r'^name: ".*" id: ".*"$', r', net: .*, if: .*, id: '),
    ifaces=('^cni',),
    service=True,           # portmap's 0x2000 hostport mark
    hint=('a CNI network with "ipMasq": true: set "ipMasq": false in its file under /etc/cni/net.d '
          '(new containers get no rule; remove the rules of running ones)'),
)
NETAVARK = Owner(
    'netavark',
    chains=('NETAVARK',),
    tables=('netavark',),
    comment_words=('netavark',),
    ifaces=('^podman',),
    service=True,           # its 0x2000 hostport mark
    hint=('podman (netavark) masquerades this network: %(allow_owner)s if its containers '
          'may be masqueraded, or run them on a network without outbound NAT'),
)
LIBVIRT = Owner(
    'libvirt',
    chains=('LIBVIRT',),
    tables=('libvirt',),
    ifaces=('^virbr',),
    subnets=('192.168.122.0/24',),      # its default network
    hint=('a libvirt NAT network: use <forward mode="route"/> or mode="open" in its XML '
          '(virsh net-edit), or %(allow_owner)s'),
)

UNKNOWN = attribution.UNKNOWN
UNKNOWN_HINT = ('find the tool that writes this rule and switch its masquerading off, or %(allow_rule)s')
# How a hint says "allow it", in the words of who applies the policy (the
# audit's ``advice``): the module's option ``allow``, or the role's variable.
ALLOW_WORDS = {
    'module': {'allow_rule': 'allow it (allow: [{chain: %(chain)s}] or a regex on the rule)',
               'allow_owner': 'allow owner %(owner)s'},
    'role': {'allow_rule': 'allow it (ip_masq_audit_allow: [{chain: %(chain)s}] or a regex on the rule)',
             'allow_owner': 'allow owner %(owner)s (ip_masq_audit_allow: [%(owner)s])'},
}
# The owners that are not registered daemons, as the reports list them after
# ours and the daemons' (by name); and in the order a table name is tried
# against them, after the daemons'.
OTHERS = (KUBE_PROXY, CNI, NETAVARK, LIBVIRT)
_TRIED = (NETAVARK, KUBE_PROXY, LIBVIRT, CNI, OURS)


class _Catalogue:
    """What the audit derives from the registered daemons' owners."""

    def __init__(self, daemons):
        self.daemons = daemons
        mine = tuple(d.owner for d in daemons if d.owner is not None)
        # Every owner; a table name is tried against them in this order, the
        # daemons' in the registry's (the first fragment found wins: a table
        # named "docker-cni" is Docker's). The other clues of two owners never
        # match the same name.
        self.catalogue = mine + _TRIED
        # The owner names, as ``allow`` and the reports use them (the daemons' by name).
        self.owners = ((OURS.name,) + tuple(sorted(o.name for o in mine)) + tuple(o.name for o in OTHERS)
                       + (UNKNOWN,))
        # Owners whose mark- or DNAT-gated masquerade only rewrites service or
        # port-forwarded connections (kube-proxy's 0x4000, CNI portmap's and
        # netavark's 0x2000 hostport marks).
        self.service_owners = frozenset(o.name for o in self.catalogue if o.service)
        self.hints = dict((o.name, o.hint) for o in self.catalogue)
        self.hints[UNKNOWN] = UNKNOWN_HINT
        # The clues' rules are the core's (the resync's watcher reads them too).
        self.attribution = attribution.Attribution(attribution.rows(self.catalogue), OURS.name)


_CACHE = []


def _current():
    """The catalogue of the registry as it is now (built once per registry)."""
    if not _CACHE or _CACHE[0].daemons is not registry.DAEMONS:
        _CACHE[:] = [_Catalogue(registry.DAEMONS)]
    return _CACHE[0]


_DERIVED = {'CATALOGUE': 'catalogue', 'OWNERS': 'owners', 'SERVICE_OWNERS': 'service_owners', 'HINTS': 'hints'}


def __getattr__(name):
    """``CATALOGUE``, ``OWNERS``, ``SERVICE_OWNERS``, ``HINTS``: derived from the registry as it is now."""
    if name in _DERIVED:
        return getattr(_current(), _DERIVED[name])
    raise AttributeError('module %r has no attribute %r' % (__name__, name))


def hint(owner, chain, advice='module'):
    """What to do about a rule of ``owner`` in ``chain`` that is not
    allowed; ``advice`` ``module`` or ``role`` names the allow list of who
    applies the policy."""
    values = {'chain': chain, 'owner': owner}
    words = ALLOW_WORDS['role' if advice in ('role', 'check') else 'module']
    values.update((key, text % values) for key, text in words.items())
    return _current().hints[owner] % values


def attribute(path, cond, our_chain, nft_table=None):
    """Who wrote a rule: by nft table name, then chain names (innermost
    first), comments, interfaces, and well-known default subnets
    (``_core/engine/attribution.py``)."""
    return _current().attribution.attribute(path, cond, our_chain, nft_table)


def decide(sources, our_chain):
    """Who wrote each source (``walk.source``) after every backend has read:
    its ``owner``, the clues its reader saw (``walk.Clues``), becomes the
    owner's name."""
    for src in sources:
        clues = src['owner']
        if isinstance(clues, Clues):
            src['owner'] = OURS.name if clues.ours else attribute(src['path'], clues.cond, our_chain, clues.nft_table)
    return sources
