# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""The tail of every module's ``main()``: one place where the collection's
code meets ``AnsibleModule``.

``run_module(module, work)`` gives ``work(module, run, find)`` Ansible's
command runner (argv lists, ``LC_ALL=C``) and tool finder, turns a
:class:`MasqError` into ``fail_json`` (the only place any module fails),
passes the result's ``warnings`` on and adds its ``diff`` in diff mode.
"""

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError

ENV = {'LC_ALL': 'C', 'LANG': 'C'}


def runner(module):
    """``run(argv, data=None) -> (rc, stdout, stderr)`` through ``module.run_command``."""
    def run(argv, data=None):
        return module.run_command(argv, data=data, binary_data=False, environ_update=ENV)
    return run


def run_module(module, work):
    failure = None
    try:
        result = work(module, runner(module), module.get_bin_path)
    except MasqError as e:
        failure = e
    if failure is not None:
        # Outside the except block: a refusal is a sentence, not a traceback.
        module.fail_json(msg=failure.msg, **failure.details)
    for warning in result.pop('warnings', None) or []:
        module.warn(warning)
    diff = result.pop('diff', None)
    if module._diff and diff is not None:
        result['diff'] = diff
    module.exit_json(**result)
