# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The CNI networks (the bridge and ptp plugins of
github.com/containernetworking/plugins, in containerd's, CRI-O's and
nerdctl's network files), as the registry (``registry.py``) knows them:
:data:`DAEMON`.  The names and comments the plugins give the rules of
``"ipMasq": true``, which the editor (``cni.py``) selects by, are in
``cni_names.py``.  The editor is imported only when a run needs it.

No owner of its own: the SNAT audit's owner ``cni`` (``_audit/owners.py``)
tells the rules of every CNI plugin (portmap's, the networks of other
directories), not only those of the networks this daemon edits.

Standard library only: this file runs on managed nodes.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.cni_names import CHAIN_PREFIX, CNI_CACHE_DIR, CNI_CONF_DIR, NFT_TABLE
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.daemon import Daemon


def editor():
    """The CNI networks' editor: ``(options, sync)``."""
    # Start-up cost: the editor (and the backends it removes rules with) loads only when a run edits the networks.
    from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.cni import CNI_OPTIONS, cni_sync  # pylint: disable=import-outside-toplevel
    return CNI_OPTIONS, cni_sync


DAEMON = Daemon(
    'cni',
    editor=editor,
    service=None,           # the plugins read the network files on every ADD and DEL: nothing restarts
    module='cni_ip_masq',
    description=('V(auto) sets C("ipMasq": false) in the bridge and ptp plugins (and the delegate of flannel\'s) of '
                 'the CNI networks in O(ip_masq_cni_conf_dirs) and removes the masquerade rules of their running '
                 'containers; a network that masquerades IPv6 is left on unless O(ip_masq_enable_ipv6) is true; '
                 'V(manage) the '
                 'same, and fails where none of those directories exists; V(report) only reports what it would '
                 'change; V(skip) leaves the CNI networks alone.'),
    doc=('``"ipMasq": true`` of the bridge and ptp plugins (and the delegate of flannel\'s plugin) in the CNI network '
         'files (containerd\'s, CRI-O\'s, nerdctl\'s ``%s``), and at once the masquerade rules of their running containers (the jumps to their '
         '``%s<hash>`` chains, or their rules in ``%s %s``); no restart'
         % (CNI_CONF_DIR, CHAIN_PREFIX, NFT_TABLE[0], NFT_TABLE[1])),
    variables={'ip_masq_cni_conf_dirs': ('conf_dirs', dict(
        description=('The directories of the CNI network files (the container runtime\'s CNI C(conf_dir)), absolute '
                     'paths. V([]) is no directory - the CNI part then reads, edits and restores nothing, and '
                     'O(ip_masq_cni=manage) is refused.'),
        type='list', elements='path', default=[CNI_CONF_DIR])),
        'ip_masq_cni_cache_dir': ('cache_dir', dict(
            description=('libcni\'s cache directory (the container runtime\'s, with C(results/) below it), an absolute '
                         'path: the CNI part reads there which containers of a network still run, before it removes '
                         'the chains of those that are gone. It only reads there.'),
            type='path', default=CNI_CACHE_DIR))},
    policy=('ipv6',),
    read={'remove_stale_rules': True},
    edit={'remove_stale_rules': True},
)
