#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later

DOCUMENTATION = r'''
---
module: node_files
short_description: Write, remove or look at several files on a node in one round trip
version_added: 1.0.0
description:
  - Manages a list of files in one module run, so that a role whose files did not change costs
    one round trip to the node instead of two per file (C(ansible.builtin.template) and
    C(ansible.builtin.copy) each run C(stat), then C(file), on every file they find unchanged).
  - Each entry of O(files) is written with O(files[].content) when the file differs (or, without
    O(files[].content), made to exist with its content left alone), and gets its mode, owner and
    group when given (in the entry, or for every entry in O(mode), O(owner) and O(group)).
  - Each path of O(absent) is removed, whether a file, a link or a whole directory tree.
  - The paths of O(query) are only looked at, before anything is written (RV(existing), RV(queried)).
  - Every entry is read and checked before anything is written, so a bad entry (relative path,
    unknown owner, a directory where a file should be) fails the task and changes nothing.
  - A file is written to a temporary file in its directory and renamed over the old one, so a
    reader never sees half a file. A symbolic link at the path is replaced by the file, as
    C(ansible.builtin.copy) does. Missing parent directories are created with O(directory_mode).
  - Needs only Python's standard library on the node.
extends_documentation_fragment:
  - ipmasq.agent.attributes
author:
  - ipmasq.agent maintainers (@ipmasq)
attributes:
  check_mode:
    description: Reads every file and reports what would change; writes and removes nothing.
  diff_mode:
    description: One diff per file that changes (its content before and after; for a removed directory, its name).
options:
  files:
    description:
      - The files to write, in the order given. A path may appear once in O(files), O(absent) and O(query) together.
    type: list
    elements: dict
    default: []
    suboptions:
      path:
        description: Absolute path of the file.
        type: path
        required: true
      content:
        description:
          - The whole content of the file, written as UTF-8 exactly as given (no newline is added).
          - Omitted, an existing file keeps its content and a missing one is created empty.
        type: str
      mode:
        description: Permissions as an octal string, for example V("0644"). Overrides O(mode).
        type: str
      owner:
        description: User name that owns the file. Overrides O(owner).
        type: str
      group:
        description: Group name of the file. Overrides O(group).
        type: str
  absent:
    description:
      - Paths to remove, after the files are written. A directory is removed with everything in it.
    type: list
    elements: path
    default: []
  query:
    description:
      - Paths that are only looked at. Nothing is changed there.
    type: list
    elements: path
    default: []
  mode:
    description:
      - Permissions of every file of O(files) that does not set its own, as an octal string such as V("0644").
      - Unset, a new file gets V(0644) less the umask and an existing file keeps its mode.
    type: str
  owner:
    description: Owner of every file of O(files) that does not set its own. Unset, an existing file keeps its owner.
    type: str
  group:
    description: Group of every file of O(files) that does not set its own. Unset, an existing file keeps its group.
    type: str
  directory_mode:
    description: Permissions of the parent directories this module creates (owner and group are those of the file).
    type: str
    default: "0755"
  require:
    description:
      - Paths that must exist on the node. When one is missing the task fails with O(require_msg) before anything
        is written, so a node that cannot take the files is told up front and nothing changes (the role checks
        that the node runs systemd this way, in the round trip that writes its files).
    type: list
    elements: path
    default: []
  require_msg:
    description: The sentence the failure for a missing O(require) path starts with.
    type: str
    default: A path this task needs is missing on the node.
notes:
  - Only the missing parents of the files of O(files) are created; nothing outside the paths listed is removed.
  - The files of O(files) are written together or not at all - every new content is staged beside its file
    before the first file is replaced, and if replacing a later one fails, the files already replaced are put
    back. Then the modes, owners and groups are set and the paths of O(absent) removed (each moved aside first,
    deleted once every change is made); when one of these fails, everything this run changed is put back too.
  - A path that is immutable or append-only (C(chattr +i), C(chattr +a)), or whose directory is, is refused before
    anything is written.
  - When a file already replaced cannot be put back, the task fails with C(changed=true), names each such file in
    the message and in C(changed_paths), keeps a copy of its earlier content beside it (C(PATH.<time>.before),
    mode 0600) and gives the command that restores it (C(restore)).
seealso:
  - module: ansible.builtin.copy
  - module: ansible.builtin.file
'''

EXAMPLES = r'''
- name: Write a config file and a unit, and look whether an old unit is still installed
  ipmasq.agent.node_files:
    owner: root
    group: root
    mode: "0644"
    files:
      - path: /etc/ip-masq-agent/config
        content: "{{ lookup('ansible.builtin.template', 'config.yaml.j2') }}"
      - path: /etc/systemd/system/ip-masq-agent.timer
        content: "{{ lookup('ansible.builtin.template', 'ip-masq-agent.timer.j2') }}"
      - path: /run/xtables.lock
        mode: "0600"
    absent:
      - /etc/systemd/system/old-agent.service
    query:
      - /usr/sbin/iptables-restore
  register: files

- name: Restart the timer when its unit changed
  ansible.builtin.systemd_service:
    name: ip-masq-agent.timer
    state: restarted
    daemon_reload: true
  when: "'/etc/systemd/system/ip-masq-agent.timer' in files.changed_paths"
'''

RETURN = r'''
msg:
  description: The files written or removed (the first three paths), or C(no change) with the number of files managed; in check
    mode C(would write ...).
  returned: always
  type: str
  sample: '2 files written (/etc/ip-masq-agent/config, /etc/systemd/system/ip-masq-agent.service)'
  version_added: 2.0.0
files:
  description: One entry per path of O(files), then of O(absent), in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The path.
      type: str
    state:
      description: V(present) (a path of O(files)) or V(absent).
      type: str
    existed:
      description: Whether something was at the path before the run.
      type: bool
    exists:
      description: Whether something is at the path after the run (in check mode, would be).
      type: bool
    type:
      description: What was at the path before the run, V(file), V(directory), V(link), V(other), or null.
      type: str
    changed:
      description: Whether this file changed (in check mode, would change).
      type: bool
    actions:
      description: What was done (or would be), for example V(write content), V(mode 0600 -> 0644), V(remove).
      type: list
      elements: str
changed_paths:
  description: The paths that changed (in check mode, would change).
  returned: always
  type: list
  elements: str
existing:
  description:
    - The paths of O(files) (they exist after the run, or would in check mode), then the paths of O(query) where
      something was found.
  returned: always
  type: list
  elements: str
removed_temp_files:
  description:
    - Temporary files that an earlier run, stopped between writing and renaming them, left beside the files of
      O(files), removed by this run (in check mode, that it would remove). Only the exact name this module
      gives them (C(.NAME.<12 hex digits>.ipmasq-tmp) beside C(NAME)) and only when older than 10 minutes, so
      a run going on at the same time keeps its own. Removing them does not count as a change.
  returned: always
  type: list
  elements: str
  version_added: 1.1.0
queried:
  description: One entry per path of O(query), in the order given.
  returned: always
  type: list
  elements: dict
  contains:
    path:
      description: The path.
      type: str
    type:
      description: What is at the path, V(file), V(directory), V(link), V(other), or null when nothing is.
      type: str
'''

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.ipmasq.agent.plugins.module_utils._files import node_files
from ansible_collections.ipmasq.agent.plugins.module_utils._module import run_module

# What tests call in-process (the writes with a fault set in atomic_move).
plan = node_files.plan
apply = node_files.apply


def manage(module, run, find):
    return node_files.manage(module.params, module.check_mode, module._diff, run, find, module)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            files=dict(type='list', elements='dict', default=[], options=dict(
                path=dict(type='path', required=True),
                content=dict(type='str'),
                mode=dict(type='str'),
                owner=dict(type='str'),
                group=dict(type='str'),
            )),
            absent=dict(type='list', elements='path', default=[]),
            query=dict(type='list', elements='path', default=[]),
            mode=dict(type='str'),
            owner=dict(type='str'),
            group=dict(type='str'),
            directory_mode=dict(type='str', default='0755'),
            require=dict(type='list', elements='path', default=[]),
            require_msg=dict(type='str', default='A path this task needs is missing on the node.'),
        ),
        supports_check_mode=True,
    )
    run_module(module, manage)


if __name__ == '__main__':
    main()
