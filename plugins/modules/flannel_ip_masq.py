#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r'''
---
module: flannel_ip_masq
short_description: Stop flanneld (run by systemd) from masquerading pod traffic
version_added: 1.0.0
description:
  - Removes C(--ip-masq) (also written C(-ip-masq), C(--ip-masq=true), C(-ip-masq=1) and so on) from flanneld's
    command line wherever it is written - the unit's C(ExecStart=), a drop-in in C(flanneld.service.d/), or a
    variable the unit reads from an C(EnvironmentFile=) such as C(FLANNEL_OPTIONS) in C(/etc/sysconfig/flanneld)
    - keeping every other byte of the file. C(--ip-masq=false) is left where it is.
  - Sets C(FLANNELD_IP_MASQ) to C(false) where it is defined, when no flag is on the command line (flanneld
    reads it from the environment then).
  - Sets C(ipmasq=false) at the top of flannel's C(mk-docker-opts.sh) where present (see O(mk_docker_opts)), so
    Docker gets no C(--ip-masq) flag from flannel, which would clash with C("ip-masq") in C(daemon.json).
  - With O(remove_stale_rules=true), once flanneld runs without C(--ip-masq) (C(/run/flannel/subnet.env) says
    C(FLANNEL_IPMASQ=false), or flanneld is not running), deletes what flannel leaves behind - the chain
    C(FLANNEL-POSTRTG), its jump from C(POSTROUTING), and C(POSTROUTING) rules commented C(flanneld masq) - in
    IPv4 and IPv6, one C(iptables-restore --noflush) transaction per family. Other chains and rules are not
    touched; a jump to C(FLANNEL-POSTRTG) that is not flannel's is an error and nothing is changed.
  - >-
    In flannel's nftables mode (C(EnableNFTables) in its C(net-conf.json)), O(remove_stale_rules=true) deletes, under
    the same conditions, the chain C(postrtg) of flannel's tables C(ip flannel-ipv4) and C(ip6 flannel-ipv6) (a nat
    postrouting base chain holding flannel's masquerade rules and the returns before them, and nothing else), both
    families in one atomic C(nft -j -f -) transaction (since 1.1.0). The tables and their C(forward) chains stay:
    flanneld writes C(forward) without C(--ip-masq) too and deletes the tables itself when it stops; without
    C(--ip-masq) it never creates C(postrtg), and with it it re-creates the chain whether or not it is there.
  - Before the first edit of a file its original is kept in O(backup_dir); O(state=absent) puts it back. flanneld
    needs a restart to apply any change (RV(restart_required)); the module never restarts it.
  - Does nothing (RV(installed=false)) unless flanneld has a systemd unit on the node. flannel run by the
    kube-flannel DaemonSet is configured in its manifest instead.
extends_documentation_fragment:
  - ipmasq.agent.daemon_files
  - ipmasq.agent.daemon_files.backups
  - ipmasq.agent.attributes.daemon
author:
  - ipmasq.agent maintainers (@ipmasq)
attributes:
  platform:
    description: Linux with systemd and iptables (either backend); C(nft) for flannel's nftables mode.
options:
  state:
    description:
      - V(present) switches flannel's masquerading off.
      - V(absent) puts back every file this module edited, from the originals in O(backup_dir). It does not
        re-create flannel's rules; flanneld does that itself when it restarts with C(--ip-masq).
    type: str
    choices: [present, absent]
    default: present
  unit_name:
    description: flanneld's systemd unit.
    type: str
    default: flanneld.service
  env_files:
    description:
      - Extra environment files whose every assignment is searched for C(--ip-masq), for options that reach
        flanneld through a wrapper script that sources them. Files named by the unit's C(EnvironmentFile=) (such as
        C(/etc/sysconfig/flanneld)) are always read (only the variables C(ExecStart=) uses).
    type: list
    elements: path
    default: []
  mk_docker_opts:
    description:
      - Copies of flannel's C(mk-docker-opts.sh) whose top-level C(ipmasq=true) is set to C(false). Missing ones
        are skipped.
    type: list
    elements: path
    default: [/usr/libexec/flannel/mk-docker-opts.sh, /opt/bin/mk-docker-opts.sh, /usr/local/bin/mk-docker-opts.sh, /usr/bin/mk-docker-opts.sh]
  subnet_env:
    description:
      - The file the running flanneld writes C(FLANNEL_IPMASQ=) to; while it says C(true) the rules are left alone,
        because the running flanneld would re-create them.
    type: path
    default: /run/flannel/subnet.env
  remove_stale_rules:
    description:
      - Delete C(FLANNEL-POSTRTG), its jump and C(POSTROUTING) rules commented C(flanneld masq) once flanneld no
        longer masquerades. Turning C(--ip-masq) off does not remove them.
      - In nftables mode, the chain C(postrtg) of the tables C(ip flannel-ipv4) and C(ip6 flannel-ipv6) (since 1.1.0).
    type: bool
    default: true
notes:
  - Run it twice around a restart of flanneld - once to edit the options, then, after the restart, with
    O(remove_stale_rules=true) to delete the rules. The P(ipmasq.agent.ip_masq#role) role does this.
  - >-
    A C(return) or C(accept) in another nft table (ours included) does not stop flannel's C(postrtg) chain, at the
    same hook, from masquerading. flannel's masquerading must be off and its chain gone, as this module makes it.
seealso:
  - module: ipmasq.agent.docker_ip_masq
  - module: ipmasq.agent.masq_chain
'''

EXAMPLES = r'''
- name: flanneld does not masquerade (rules are removed after the restart)
  ipmasq.agent.flannel_ip_masq:
    remove_stale_rules: false
  notify: Restart flanneld

- name: Restart flanneld now
  ansible.builtin.meta: flush_handlers

- name: Remove FLANNEL-POSTRTG and its jump (in nftables mode, the postrtg chain of flannel's tables)
  ipmasq.agent.flannel_ip_masq:

- name: Options in /etc/default/flanneld, sourced by a start script
  ipmasq.agent.flannel_ip_masq:
    env_files: [/etc/default/flanneld]
'''

RETURN = r'''
msg:
  description: What the run changed (the files edited, the nat rules removed, whether a restart is required), or C(no change);
    in check mode C(would edit ...).
  returned: always
  type: str
  sample: 'flannel: 1 file edited (/etc/systemd/system/flanneld.service.d/ip-masq.conf), restart required'
  version_added: 2.0.0
installed:
  description: Whether flanneld has a systemd unit. When false nothing was done.
  returned: always
  type: bool
  sample: true
state:
  description: The state asked for.
  returned: always
  type: str
  sample: present
restart_required:
  description: Whether a file was changed, so flanneld must restart to apply it.
  returned: always
  type: bool
  sample: true
ip_masq:
  description: Whether flanneld would still masquerade after a restart (a C(true) that could not be edited).
  returned: when installed and state is present
  type: bool
  sample: false
flag_sources:
  description: Every C(--ip-masq) left on the command line (C(false) ones), with the file and variable.
  returned: when installed
  type: list
  elements: dict
unit:
  description: The unit file found.
  returned: when installed
  type: str
  sample: /usr/lib/systemd/system/flanneld.service
unit_files:
  description: The unit file and its drop-ins, in the order systemd reads them.
  returned: when installed
  type: list
  elements: str
edited:
  description: Files changed (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [/etc/sysconfig/flanneld, /usr/libexec/flannel/mk-docker-opts.sh]
backups:
  description: Timestamped copies made next to the edited files.
  returned: always
  type: list
  elements: str
stale_rules:
  description:
    - flannel's rules and chains found in the nat table, per family.
    - In nftables mode (since 1.1.0), the chain C(postrtg) of C(ip flannel-ipv4) and C(ip6 flannel-ipv6), with how many
      rules it holds and how many of them masquerade.
  returned: when installed
  type: list
  elements: str
removed_rules:
  description: Rules and chains deleted (or that would be), per family; in nftables mode the C(postrtg) chains (since 1.1.0).
  returned: when installed
  type: list
  elements: str
  sample:
    - 'IPv4: -A POSTROUTING -m comment --comment "flanneld masq" -j FLANNEL-POSTRTG'
    - "IPv4: chain FLANNEL-POSTRTG"
    - "IPv4: ip flannel-ipv4: chain postrtg (6 rules, 2 masquerading)"
messages:
  description: What was found and done, in sentences.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.base import argument_spec, work
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.flannel import FLANNEL_OPTIONS, flannel_sync
from ansible_collections.ipmasq.agent.plugins.module_utils._module import run_module


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(**FLANNEL_OPTIONS),
        supports_check_mode=True,
    )
    run_module(module, work(flannel_sync))


if __name__ == '__main__':
    main()
