# -*- coding: utf-8 -*-
# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
#
# NOTE: private to the ipmasq.agent collection; not a public API.
"""Old kubelets' own masquerade rule: ``--non-masquerade-cidr=0.0.0.0/0`` for
kubelets older than 1.24 (seed 004), set where the flag or the kubelet's
extra-args variable lives, or in a drop-in of ours.

Standard library only: this file runs on managed nodes.
"""

import os
import re

from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.base import bounded, managed_unit, restore, setup
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.files import commit
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.goflags import append_word, find_flag_all, fix_flags, set_arg
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.systemd import RUNTIME_DIRS, command_lines, joined_value, load_unit, referenced_vars
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons.words import systemd_quote

DROPIN_NAME = '90-ipmasq-agent.conf'
NONMASQ_FLAG = 'non-masquerade-cidr'
NONMASQ_VALUE = '0.0.0.0/0'
_KUBE_VERSION = re.compile(r'v?(\d+)\.(\d+)(?:\.(\d+))?')


# The module's own options (its argument spec beside base.COMMON_SPEC): the
# module and ip_masq_node's daemons part build the same parameters from them.
KUBELET_OPTIONS = dict(
    mode=dict(type='str', choices=['set', 'report'], default='set'),
    unit_name=dict(type='str', default='kubelet.service'),
    extra_args_var=dict(type='str', default='KUBELET_EXTRA_ARGS'),
    kubelet_bin=dict(type='path'),
)


def kubelet_version(run, find, argv0):
    rc, out, err = run(bounded(find, [argv0, '--version']))
    if rc != 0:
        return None, (err or out).strip()
    m = _KUBE_VERSION.search(out)
    if not m:
        return None, out.strip()
    return (int(m.group(1)), int(m.group(2))), out.strip()


def kubelet_sync(params, run, find, writer, check_mode=False):
    """``--non-masquerade-cidr=0.0.0.0/0`` for kubelets older than 1.24."""
    p = params
    files, unit_dirs, env_files, backups, result = setup(p, 'kubelet')
    result['mode'] = p['mode']
    result['version'] = None
    result['flag_sources'] = []
    result['would_change'] = False
    unit = managed_unit(files, p, unit_dirs, result, 'kubelet')
    if unit is None:
        return result

    if p['state'] == 'absent':
        return restore(files, backups, result, check_mode, writer, p['backup'])

    messages = []
    commands, extra, defs = command_lines(files, unit, env_files, messages)
    for m in sorted(set(messages)):
        result.msg(m)
    binary = p.get('kubelet_bin')
    if not binary:
        argv0 = commands[-1].argv0 if commands else None
        if argv0 and argv0.startswith('/') and os.path.exists(files.real(argv0)):
            binary = files.real(argv0)
        elif files.root == '/':
            binary = find('kubelet')
    if binary and os.path.exists(binary):
        version, text = kubelet_version(run, find, binary)
    else:
        version, text = None, 'no kubelet binary found%s' % (' at %s' % binary if binary else '')
    result['version'] = text if version else None
    if version is None:
        result.warn('Could not tell the kubelet version (%s); --non-masquerade-cidr left alone.' % text)
        return result
    occs = find_flag_all(commands, extra, NONMASQ_FLAG, takes_value=True)
    result['flag_sources'] = [o.as_dict() for o in occs]
    if version >= (1, 24):
        if occs:
            result.warn('kubelet %d.%d no longer knows --%s (removed in 1.24) and refuses to start with it: %s.'
                        % (version[0], version[1], NONMASQ_FLAG, ', '.join(o.arg.describe() for o in occs)))
        else:
            result.msg('kubelet %d.%d adds no masquerade rule of its own (--%s was removed in 1.24); nothing to do.'
                       % (version[0], version[1], NONMASQ_FLAG))
        return result
    current = occs[-1].value if occs else None
    result['current'] = current
    if current == NONMASQ_VALUE and all(o.value == NONMASQ_VALUE for o in occs):
        result.msg('kubelet already runs with --%s=%s.' % (NONMASQ_FLAG, NONMASQ_VALUE))
        return result
    result['would_change'] = True
    if p['mode'] == 'report':
        result.warn('kubelet %d.%d runs with %s: it adds a MASQUERADE rule of its own. Set --%s=%s '
                    '(mode=set does it).' % (version[0], version[1],
                                             '--%s=%s' % (NONMASQ_FLAG, current) if current else
                                             'no --%s (default 10.0.0.0/8)' % NONMASQ_FLAG,
                                             NONMASQ_FLAG, NONMASQ_VALUE))
        return result

    def load():
        u = load_unit(files, p['unit_name'], unit_dirs)
        c, e, _d = command_lines(files, u, env_files)
        return u, c, e

    def to_any(occ):
        set_arg(files, occ, NONMASQ_VALUE)
        return '%s set to --%s=%s' % (occ.text(), NONMASQ_FLAG, NONMASQ_VALUE)

    if occs:
        fix_flags(files, load, NONMASQ_FLAG, lambda o: o.value == NONMASQ_VALUE, to_any, result,
                  takes_value=True)
    else:
        _kubelet_add(files, unit, defs, unit_dirs, p, result)
    _unit, commands, extra = load()
    after = find_flag_all(commands, extra, NONMASQ_FLAG, takes_value=True)
    if not after or after[-1].value != NONMASQ_VALUE or after[-1].arg.runtime():
        raise MasqError('--%s=%s would not take effect with the planned edit (another drop-in overrides it?). '
                        'Nothing was changed.' % (NONMASQ_FLAG, NONMASQ_VALUE))
    commit(files, backups, result, check_mode, writer, p['backup'])
    result['restart_required'] = bool(result['edited'])
    return result


def _kubelet_add(files, unit, defs, unit_dirs, p, result):
    word = '--%s=%s' % (NONMASQ_FLAG, NONMASQ_VALUE)
    var = p['extra_args_var']
    dropin = os.path.join(unit_dirs[0], p['unit_name'] + '.d', DROPIN_NAME)
    header = ('# Written by ipmasq.agent (kubelet_nonmasq): kubelet older than 1.24 adds no masquerade rule\n'
              '# of its own with --%s=%s. state=absent removes this file.\n[Service]\n'
              % (NONMASQ_FLAG, NONMASQ_VALUE))
    if var in referenced_vars(unit):
        d = defs.get(var)
        if d is not None and not d.path.startswith(RUNTIME_DIRS) and d.path != dropin:
            append_word(files, d, word)
            result.msg('%s: added %s to %s.' % (d.path, word, var))
            return
        files.write(dropin, header + 'Environment=%s\n' % systemd_quote('%s=%s' % (var, word)))
        result.msg('%s: %s=%s (the unit passes $%s and nothing defines it).' % (dropin, var, word, var))
        return
    if not unit.exec_starts:
        raise MasqError('%s has no ExecStart=; cannot add %s. Nothing was changed.' % (p['unit_name'], word))
    directive, _words = unit.exec_starts[-1]
    command = joined_value(unit.texts[directive.path], directive)
    files.write(dropin, header + 'ExecStart=\nExecStart=%s %s\n' % (command, word))
    result.msg('%s: ExecStart repeated with %s (the unit has no $%s).' % (dropin, word, var))
