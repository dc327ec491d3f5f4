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
  - The code is installed as a unit. C(_core) is a symlink to a version directory beside it
    (C(_core.versions/<id>/)). A change writes the new version directory whole and byte-compiles it, then
    renames a new symlink over C(_core) in one step, so the service sees the old code or the new one, never a
    mix; a resync that runs during the switch goes on with the code it started with (the version before is
    kept for it, older ones are removed). A failure (a full disk, for example) removes what the run wrote and
    leaves the installed code exactly as it was. The flat C(_core) directory that earlier releases installed
    is replaced the same way.
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
  state:
    description:
      - V(absent) removes the package and the directories above it that held nothing else, up to and
        including O(path).
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
  sample: 'resync code in /usr/local/lib/ip-masq-agent/ansible_collections/ipmasq/agent/plugins/module_utils/_core: 41 files written'
  version_added: 2.0.0
path:
  description: The package directory.
  returned: always
  type: str
  sample: /usr/local/lib/ipmasq-agent/ansible_collections/ipmasq/agent/plugins/module_utils/_core
written:
  description: Files whose content changed (or would change); every file when the code was missing or in the
    flat layout of earlier releases. A file of a subpackage is named with its folder, for example C(nft/tools.py).
  returned: always
  type: list
  elements: str
  sample: [policy.py, sync.py]
removed:
  description: Files of the installed version that the new one no longer has (or would not have).
  returned: always
  type: list
  elements: str
  sample: []
'''

from ansible.module_utils.basic import AnsibleModule

# The resync and everything it imports travel in this module's payload: that
# is the code installed.
from ansible_collections.ipmasq.agent.plugins.module_utils._core import resync  # noqa: F401 pylint: disable=unused-import
from ansible_collections.ipmasq.agent.plugins.module_utils._module import run_module
from ansible_collections.ipmasq.agent.plugins.module_utils._resync_code import (
    install,
    outcome,
    package_dir,
    package_sources,
    uninstall,
)


def manage(module, run, _find):
    p = module.params
    if p['state'] == 'absent':
        written, removed = [], [package_dir(p['path'])] if uninstall(p['path'], check_mode=module.check_mode) else []
    else:
        written, removed = install(p['path'], package_sources(), run, p['python'], check_mode=module.check_mode)
    result, diff = outcome(p['path'], written, removed, module.check_mode)
    return dict(result, diff=diff)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type='path', required=True),
            python=dict(type='path', default='/usr/bin/python3'),
            state=dict(type='str', choices=['present', 'absent'], default='present'),
        ),
        supports_check_mode=True,
    )
    run_module(module, manage)


if __name__ == '__main__':
    main()
