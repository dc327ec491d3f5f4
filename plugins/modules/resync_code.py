#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r'''
---
module: resync_code
short_description: Install the code of the node-side resync (the collection's core)
version_added: 1.0.0
description:
  - Installs the collection's node-side core package with its subpackages, the code that the
    C(ip-masq-agent.service) of the P(ipmasq.agent.ip_masq#role) role runs, below O(path) (as
    C(<path>/ansible_collections/ipmasq/agent/plugins/module_utils/_core/)), byte-compiled for O(python).
  - The files are the ones this module itself carries, so the node runs exactly the code of the collection
    version that installed it; no list of files is kept anywhere. Nothing is written when the installed code is
    the same.
  - Each version has a root of its own, C(<path>/v/<id>/) (C(<id>) a hash of the code), written whole and
    byte-compiled beside it and renamed into place in one step; an installed root is never changed. The service
    unit's C(PYTHONPATH) names the root, so the switch to a new version is the unit's rewrite and the
    C(systemctl daemon-reload) that follows it, and a resync that runs meanwhile goes on from the root it started
    from. A failure (a full disk, for example) removes what the run wrote.
  - With O(unit), the roots of earlier versions and the C(_core) tree of 1.0 and 1.1 (below
    C(<path>/ansible_collections/)) are removed once the unit names this version's root, and only when no resync
    runs from them (a resync holds a shared lock on its root's C(resync.py) while it runs; a resync of 1.0 or 1.1
    is found by its environment); one still in use is removed by a later run.
  - Standard library only on the node.
extends_documentation_fragment:
  - ipmasq.agent.attributes
author:
  - ipmasq.agent maintainers (@ipmasq)
attributes:
  check_mode:
    description: Reports which files would be written or removed; writes nothing.
  diff_mode:
    description: Lists the files written and removed.
  platform:
    description: Any POSIX node with Python 3; the code it installs runs on Linux with iptables.
options:
  path:
    description: The directory the package goes below (the role's C(ip_masq_lib_dir)).
    type: path
    required: true
  python:
    description: The Python the service runs, used to byte-compile the code.
    type: path
    default: /usr/bin/python3
  unit:
    description:
      - The service unit that runs the resync (the role's C(ip-masq-agent.service)). When given, and it names this
        version's root in its C(PYTHONPATH), earlier versions are removed (see above). Without it nothing but this
        version's root is written and nothing is removed.
    type: path
    version_added: 2.0.0
  state:
    description:
      - V(absent) removes every version (all roots and the tree of 1.0 and 1.1) and the directories above them
        that held nothing else, up to and including O(path).
    type: str
    choices: [present, absent]
    default: present
seealso:
  - module: ipmasq.agent.masq_chain
'''

EXAMPLES = r'''
- name: Install the resync code
  ipmasq.agent.resync_code:
    path: /usr/local/lib/ipmasq-agent
'''

RETURN = r'''
msg:
  description: How many files of the resync code were written or removed, or C(no change); in check mode C(would write ...).
  returned: always
  type: str
  sample: 'resync code in /usr/local/lib/ipmasq-agent/v/933096410d920122/ansible_collections/ipmasq/agent/plugins/module_utils/_core: 41 files written'
  version_added: 2.0.0
path:
  description: The package directory, in this version's root.
  returned: always
  type: str
  sample: /usr/local/lib/ipmasq-agent/v/933096410d920122/ansible_collections/ipmasq/agent/plugins/module_utils/_core
written:
  description: Files of a newly installed root whose content differs from the version before it (or would); every
    file when there was none, or when the same files were in another place (the flat tree of 1.0 and 1.1); none
    when this version's root is in place. A file of a subpackage is named with its folder, for example C(nft/tools.py).
  returned: always
  type: list
  elements: str
  sample: [model/policy.py, engine/sync.py]
removed:
  description: Files of the version before that the new one no longer has (or would not have); for
    V(state=absent), the package directory when anything was removed.
  returned: always
  type: list
  elements: str
  sample: []
removed_roots:
  description: The earlier versions removed (or that would be), each a root below O(path) or the tree of 1.0 and 1.1.
  returned: always
  type: list
  elements: str
  sample: [/usr/local/lib/ipmasq-agent/v/0c51d0e2a6f1b7e4]
  version_added: 2.0.0
'''

from ansible.module_utils.basic import AnsibleModule

# The resync and everything it imports travel in this module's payload: that
# is the code installed.
from ansible_collections.ipmasq.agent.plugins.module_utils._core.agent import resync  # noqa: F401 pylint: disable=unused-import
from ansible_collections.ipmasq.agent.plugins.module_utils._module import run_module
from ansible_collections.ipmasq.agent.plugins.module_utils._resync_code import (
    install,
    later_sweep,
    package_sources,
    resync_root,
    uninstall,
)
from ansible_collections.ipmasq.agent.plugins.module_utils._resync_roots import outcome


def manage(module, run, _find):
    p = module.params
    root = resync_root(p['path'])
    swept = []
    if p['state'] == 'absent':
        written = []
        removed = [outcome(root, [], [], False)[0]['path']] if uninstall(p['path'], check_mode=module.check_mode) else []
    else:
        written, removed = install(p['path'], package_sources(), run, p['python'], check_mode=module.check_mode)
        # This module writes no unit: the one given is as systemd was told by an earlier run.
        swept = later_sweep(p['path'], root, p['unit'], module.check_mode, False, [])
    result, diff = outcome(root, written, removed, module.check_mode, swept)
    return dict(result, diff=diff)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            python=dict(type='path', default='/usr/bin/python3'),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
            unit=dict(type='path'),
        ),
        supports_check_mode=True,
    )
    run_module(module, manage)


if __name__ == '__main__':
    main()
