#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r'''
---
module: kubelet_nonmasq
short_description: Give kubelets older than 1.24 --non-masquerade-cidr=0.0.0.0/0
version_added: 1.0.0
description:
  - A kubelet older than 1.24 adds a C(MASQUERADE) rule of its own for traffic leaving its
    C(--non-masquerade-cidr) (default C(10.0.0.0/8)). With C(--non-masquerade-cidr=0.0.0.0/0) it adds none,
    which is what the ip-masq-agent documentation asks for. Kubelet 1.24 and later no longer has the flag; then
    nothing is done.
  - The version comes from C(kubelet --version) (O(kubelet_bin), else the binary of the unit's C(ExecStart=),
    else C(kubelet) on C(PATH)). When it cannot be told, nothing is changed and a warning says why.
  - Where the flag is set - an existing C(--non-masquerade-cidr) is set to C(0.0.0.0/0) where it is written (unit,
    drop-in, or environment file such as C(/var/lib/kubelet/kubeadm-flags.env)).
  - Else, when C(ExecStart=) passes C($KUBELET_EXTRA_ARGS) (O(extra_args_var)) and a file defines it (kubeadm's
    C(/etc/default/kubelet) or C(/etc/sysconfig/kubelet)), the flag is appended to that value.
  - Else a drop-in of our own, C(<unit>.d/90-ipmasq-agent.conf) in the first of O(unit_dirs), sets
    C(KUBELET_EXTRA_ARGS) (when C(ExecStart=) passes it and nothing defines it) or repeats C(ExecStart=) with the
    flag added.
  - The result is checked by reading the unit again before anything is written; if the flag would not take effect
    (a later drop-in overrides ours), it is an error and nothing is changed.
  - Before the first edit of a file its original is kept in O(backup_dir); O(state=absent) puts it back (and
    deletes our drop-in). kubelet needs a restart to apply a change (RV(restart_required)).
extends_documentation_fragment:
  - ipmasq.agent.daemon_files
  - ipmasq.agent.daemon_files.backups
  - ipmasq.agent.attributes.daemon
author:
  - ipmasq.agent maintainers (@ipmasq)
attributes:
  check_mode:
    description: Reads everything and reports what would change; writes nothing. C(kubelet --version) still runs.
  diff_mode:
    description: Shows every file edited or created, before and after.
options:
  mode:
    description:
      - V(set) makes the change. V(report) changes nothing and says (RV(would_change), a warning) what V(set)
        would do.
    type: str
    choices: [set, report]
    default: set
  state:
    description:
      - V(present) sets the flag (or reports, see O(mode)). V(absent) puts back every file this module edited and
        deletes the drop-in it created.
    type: str
    choices: [present, absent]
    default: present
  unit_name:
    description: kubelet's systemd unit.
    type: str
    default: kubelet.service
  env_files:
    description:
      - Extra environment files whose every assignment is searched for an existing C(--non-masquerade-cidr)
        (options passed through a wrapper script). Files named by the unit's C(EnvironmentFile=) are always read.
    type: list
    elements: path
    default: []
  extra_args_var:
    description: The variable for extra kubelet arguments that C(ExecStart=) passes (kubeadm's name by default).
    type: str
    default: KUBELET_EXTRA_ARGS
  kubelet_bin:
    description: The kubelet binary asked for its version. Default is the unit's C(ExecStart=) binary, else C(kubelet) on C(PATH).
    type: path
seealso:
  - module: ipmasq.agent.masq_chain
  - name: IP Masquerade Agent user guide
    description: Asks for C(--non-masquerade-cidr=0.0.0.0/0) on kubelets that have the flag.
    link: https://kubernetes.io/docs/tasks/administer-cluster/ip-masq-agent/
'''

EXAMPLES = r'''
- name: Old kubelets add no masquerade rule of their own
  ipmasq.agent.kubelet_nonmasq:
  notify: Restart kubelet

- name: Only say what would be changed
  ipmasq.agent.kubelet_nonmasq:
    mode: report
'''

RETURN = r'''
msg:
  description: What the run changed (the files edited, whether a restart is required), or C(no change); in check mode
    C(would edit ...).
  returned: always
  type: str
  sample: 'kubelet: no change'
  version_added: 2.0.0
installed:
  description: Whether kubelet has a systemd unit. When false nothing was done.
  returned: always
  type: bool
  sample: true
state:
  description: The state asked for.
  returned: always
  type: str
  sample: present
mode:
  description: The mode asked for.
  returned: always
  type: str
  sample: set
version:
  description: What C(kubelet --version) printed, or null when it could not be run or read.
  returned: when installed and state is present
  type: str
  sample: Kubernetes v1.23.17
current:
  description: The C(--non-masquerade-cidr) value before the run (null when the flag was not set).
  returned: when the kubelet is older than 1.24
  type: str
  sample: 10.0.0.0/8
would_change:
  description: Whether V(set) changes (or changed) something; with O(mode=report) the finding.
  returned: when installed
  type: bool
  sample: false
restart_required:
  description: Whether a file was changed, so kubelet must restart to apply it.
  returned: always
  type: bool
  sample: true
flag_sources:
  description: Every C(--non-masquerade-cidr) on the command line before the run, with its file and variable.
  returned: when installed
  type: list
  elements: dict
unit:
  description: The unit file found.
  returned: when installed
  type: str
  sample: /lib/systemd/system/kubelet.service
unit_files:
  description: The unit file and its drop-ins, in the order systemd reads them.
  returned: when installed
  type: list
  elements: str
edited:
  description: Files changed or created (or that would be, in check mode).
  returned: always
  type: list
  elements: str
  sample: [/etc/default/kubelet]
backups:
  description: Timestamped copies made next to the edited files.
  returned: always
  type: list
  elements: str
messages:
  description: What was found and done, in sentences.
  returned: always
  type: list
  elements: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.base import argument_spec, work
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.kubelet import KUBELET_OPTIONS, kubelet_sync
from ansible_collections.ipmasq.agent.plugins.module_utils._module import run_module


def main():
    module = AnsibleModule(
        argument_spec=argument_spec(**KUBELET_OPTIONS),
        supports_check_mode=True,
    )
    run_module(module, work(kubelet_sync))


if __name__ == '__main__':
    main()
