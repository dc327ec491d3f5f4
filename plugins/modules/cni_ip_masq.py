#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r'''
---
module: cni_ip_masq
short_description: Stop CNI networks (bridge and ptp plugins) from masquerading pod traffic
version_added: 2.0.0
description:
  - >-
    Sets C("ipMasq": true) to C(false) in the C(bridge) and C(ptp) plugins of every CNI network file in
    O(conf_dirs) - the default networks of containerd, CRI-O and nerdctl - keeping every other byte of the file.
    The files are those libcni loads (C(*.conf), C(*.conflist), C(*.json), dot-files too; C(.conflist) a list, the
    others one plugin), and keys are matched as Go's encoding/json reads them (any case and Unicode case folding,
    escapes decoded, every duplicate). Other plugins (C(portmap), C(firewall), ...) and other keys are left alone.
  - >-
    flannel's CNI plugin (C("type": "flannel")) sets its delegate's C(ipMasq) to the opposite of flanneld's
    C(FLANNEL_IPMASQ) when the delegate has no such key, so with flanneld's masquerading off every new pod would be
    masqueraded by the bridge; each delegate gets C("ipMasq": false) (a plugin without a delegate gets
    C("delegate": {"ipMasq": false})). A delegate of another type (C(macvlan), ...) is left alone.
  - The plugins read the file on every ADD and DEL, so nothing needs a restart; new containers get no masquerade
    rule.
  - >-
    With O(remove_stale_rules=true), the masquerade rules the plugins already wrote for the running containers of
    those networks are removed, IPv4 and IPv6, one C(iptables-restore --noflush) transaction per family - each
    C(POSTROUTING) jump commented C(name: "<network>" id: "<container>") to the container's C(CNI-<hash>) chain,
    and the rules of that chain. The emptied chain stays while its container runs, so that a DEL run with the old
    configuration (a runtime's cached copy) still succeeds and deletes it; with the file edited, nothing uses it.
    The emptied chains are recorded in O(backup_dir) (C(cni-emptied-chains.json)), and a later run deletes those
    still there, empty and unreferenced, once their containers are gone (see O(cache_dir)). A jump to the chain
    from elsewhere, or a rule in it that does not carry the plugin's comment, is an error and nothing is changed.
  - >-
    With the plugins' nftables flavour (C("ipMasqBackend": "nftables"), plugins 1.5 and later), the networks' rules
    in the chain C(masq_checks) of the table C(inet cni_plugins_masquerade) are deleted by handle in one atomic
    C(nft -j -f -) transaction; the table and its C(postrouting) chain, which every network shares, stay.
  - Rules of networks that are not in O(conf_dirs), and portmap's C(CNI-HOSTPORT-*) and C(CNI-DN-*) rules, are
    never touched.
  - Before the first edit of a file its original is kept in O(backup_dir); O(state=absent) puts it back.
extends_documentation_fragment:
  - ipmasq.agent.daemon_files.backups
  - ipmasq.agent.attributes.daemon
author:
  - ipmasq.agent maintainers (@ipmasq)
attributes:
  platform:
    description: Linux with iptables (either backend); C(nft) for the plugins' nftables flavour.
options:
  state:
    description:
      - V(present) switches the networks' masquerading off.
      - V(absent) puts back every file this module edited, from the originals in O(backup_dir). A file changed by
        someone else since is left alone with a warning. It does not re-create rules; the plugins write them for
        containers added afterwards.
    type: str
    choices: [present, absent]
    default: present
  conf_dirs:
    description:
      - The directories of the CNI network files (the runtime's C(conf_dir)). Missing ones are skipped.
      - V([]) is no directory - nothing is read, edited or restored (RV(installed) is false).
    type: list
    elements: path
    default: [/etc/cni/net.d]
  remove_stale_rules:
    description: Remove the masquerade rules the plugins wrote for running containers of the networks in O(conf_dirs).
    type: bool
    default: true
  ipv6:
    description:
      - Whether the node's masquerading policy covers IPv6 (P(ipmasq.agent.masq_chain#module)'s O(ipv6), the role's
        C(ip_masq_enable_ipv6)).
      - When false, a network that masquerades IPv6 (from its IPAM configuration; for flannel's plugin, from
        flanneld's subnet file), or whose address families cannot be told, is left on with a warning that names its
        file, and none of its rules is removed; a network's C(ipMasq) is one switch for both families.
    type: bool
    default: false
    version_added: 2.0.0
  cache_dir:
    description:
      - libcni's cache directory, where the container runtimes (containerd, CRI-O, podman, nerdctl) record their
        containers (C(results/<network>-<container id>-<ifname>)). A C(CNI-<hash>) chain this module emptied is
        deleted by a later run once neither this cache nor host-local's leases (the network's C(dataDir),
        C(/var/lib/cni/networks) by default) list its container; where neither exists, it stays. Only read.
    type: path
    default: /var/lib/cni
  root:
    description:
      - Look every file up below this directory (an image, a test tree). C(iptables-save) and C(nft) still run on
        the node.
    type: path
    default: /
notes:
  - Every file a run changes is changed together or not at all; a failure leaves every file as it was and names
    the file that could not be written. Files are replaced through C(AnsibleModule.atomic_move), which keeps their
    SELinux context, owner and mode. A file that is immutable or append-only (C(chattr +i), C(chattr +a)) is
    refused before anything is copied or staged.
  - A network file that is not valid JSON is an error, and nothing is changed; so is a key that only Go 1.21 and
    later read as one of the keys this module reads (spelled with C(İ) U+0130 or C(ı) U+0131), since what the runtime
    makes of it depends on the Go it was built with.
  - A C(CNI-*) chain commented for a network that is not in O(conf_dirs) (a Kubernetes CNI of its own, another
    runtime's directory) stays; the SNAT audit (M(ipmasq.agent.snat_sources)) reports it.
seealso:
  - module: ipmasq.agent.docker_ip_masq
  - module: ipmasq.agent.flannel_ip_masq
  - module: ipmasq.agent.masq_chain
'''

EXAMPLES = r'''
- name: The CNI networks do not masquerade; the running containers' rules go too
  ipmasq.agent.cni_ip_masq:

- name: CRI-O with its networks in another directory
  ipmasq.agent.cni_ip_masq:
    conf_dirs: [/etc/cni/net.d, /etc/crio/net.d]

- name: Put the network files back
  ipmasq.agent.cni_ip_masq:
    state: absent
'''

RETURN = r'''
msg:
  description: What the run changed (the files edited, the nat rules removed), or C(no change); in check mode
    C(would edit ...).
  returned: always
  type: str
  sample: 'cni: 1 file edited (/etc/cni/net.d/10-containerd-net.conflist), 6 nat rules removed'
installed:
  description: Whether one of O(conf_dirs) exists. When false nothing was done.
  returned: always
  type: bool
  sample: true
state:
  description: The state asked for.
  returned: always
  type: str
  sample: present
restart_required:
  description: Always false; the plugins read the files on every ADD and DEL.
  returned: always
  type: bool
  sample: false
networks:
  description: Every network file read, with its network name, its plugins' types, the plugins whose
    C(ipMasq) was (or would be) set to false, and the address families its masquerading plugins masquerade
    (null when they cannot be told).
  returned: when installed and state is present
  type: list
  elements: dict
  sample: [{path: /etc/cni/net.d/10-containerd-net.conflist, name: containerd-net, plugins: [bridge, portmap],
            ip_masq: [bridge], families: [4]}]
edited:
  description: Files changed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [/etc/cni/net.d/10-containerd-net.conflist]
backups:
  description: Timestamped copies made next to the edited files.
  returned: always
  type: list
  elements: str
stale_rules:
  description: The networks' masquerade rules found, per family (iptables) or table (nftables).
  returned: when installed and state is present
  type: list
  elements: str
removed_rules:
  description: Rules deleted (or that would be).
  returned: always
  type: list
  elements: str
  sample:
    - 'IPv4: -A POSTROUTING -s 10.88.0.2/32 -m comment --comment "name: \"containerd-net\" id: \"c0ffee\"" -j CNI-5645cc7df492102ce9419d96'
messages:
  description: What was found and done, in sentences.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.base import work
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.cni import MODULE_SPEC, cni_sync
from ansible_collections.ipmasq.agent.plugins.module_utils._module import run_module


def main():
    module = AnsibleModule(argument_spec=MODULE_SPEC, supports_check_mode=True)
    run_module(module, work(cni_sync))


if __name__ == '__main__':
    main()
