# Copyright (c) 2026, ipmasq.agent contributors
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
# SPDX-License-Identifier: GPL-3.0-or-later
"""The ipmasq.agent.snat_report filter: the fleet-wide SNAT report of playbooks/audit.yml."""

from __future__ import annotations

DOCUMENTATION = r"""
name: snat_report
short_description: Sum up what playbooks/audit.yml found on each host, per host and per group, with what to do
version_added: 1.0.0
description:
  - Takes, per host, what C(playbooks/audit.yml) read there (the O(_input) format below) and returns the
    fleet report that the playbook writes as JSON and Markdown. Runs on the controller; reads nothing itself.
  - A host is I(off-policy) when our chain is missing or has drifted (the C(ipmasq.agent.masq_chain) module
    in check mode would change it), when another SNAT rule would act on pod traffic (an offender of
    C(ipmasq.agent.snat_sources)), or when it could not be read. A resync timer that is not active where the
    resync is on is a I(warning).
  - Every finding says what to do.
positional: _input, groups
options:
  _input:
    description:
      - A dict of host name to what was found there, with the keys C(groups) (the host's groups, used when
        O(host_groups) does not name the host), C(error) (a message when the host could not be read),
        C(unreachable) (a message when the host stopped answering during the audit), C(chain) (the result of
        C(ipmasq.agent.masq_chain) in check mode), C(snat) (the result of C(ipmasq.agent.snat_sources)),
        C(kernel) (the kernel release), C(managed) (false where C(ip_masq_state) is V(absent); only our policy
        left behind is checked there), C(resync_enabled) (bool) and C(resync) (one of V(active), V(inactive),
        V(activating), V(failed), V(not installed), V(not checked), V(off), V(unknown)).
      - Or, in place of C(managed), C(resync_enabled) and C(resync), the task results as a playbook registers them
        (C(playbooks/audit.yml) does), and the filter judges them. C(settings) (the role's typed settings, the
        C(settings) of the C(ipmasq.agent.ip_masq) action; C(ip_masq_state), C(ip_masq_resync_enabled) and
        C(ip_masq_resync_systemctl) are read, each boolean as the role reads one, so V(t) is true), C(timer) (the
        result of C(systemctl is-active ip-masq-agent.timer), or of the resync's service with
        C(ip_masq_resync_mode) V(watch) or V(auto), skipped where the resync is off or
        C(ip_masq_resync_systemctl) is false) and C(kernel) as the C(ansible.builtin.slurp) result of
        C(/proc/sys/kernel/osrelease). A key given as above wins. A result that says C(unreachable) makes the host
        unreachable (the first of C(chain), C(snat), C(kernel), C(timer) names why); a host lost at C(snat) (the first
        task that reaches it) is reported with nothing else read.
    type: dict
    required: true
  groups:
    description: The groups to sum up; a host counts in each of these it belongs to. Empty means every group of every host.
    type: list
    elements: str
    default: []
  host_groups:
    description:
      - A dict of host name to the groups the inventory puts it in (C(hostvars[host].group_names)). It wins over
        the C(groups) of O(_input), so that a host that never reported (unreachable, or failed early) still counts
        in its groups.
    type: dict
    version_added: 1.1.0
  unreachable:
    description:
      - A dict of host name to the result of the task that found it unreachable (or a message). Such a host has
        the C(policy) V(unreachable); it is added when O(_input) does not name it.
    type: dict
    version_added: 1.1.0
  on_unreachable:
    description:
      - V(fail) makes an unreachable host an V(off-policy) finding (it is listed in C(off_policy_hosts));
        V(ignore) makes it a V(warning), unless no host answered at all (then it is V(off-policy) too). Either way
        it is listed in C(unreachable_hosts) and counted as C(unreachable) and C(unreadable).
    type: str
    choices: [fail, ignore]
    default: fail
    version_added: 1.1.0
  fail_off_policy:
    description:
      - Whether the run fails the off-policy hosts (C(ip_masq_report_fail)); only stated in C(gate).
      - A boolean as the role reads one (V(true)/V(false), V(yes)/V(no), V(t)/V(f), V(1)/V(0)); anything else is an
        error.
    type: bool
    default: false
    version_added: 1.1.0
"""

EXAMPLES = r"""
- name: Build the report from what each host's tasks left in __report_host
  ansible.builtin.set_fact:
    report: >-
      {{ dict(ansible_play_hosts_all | zip(ansible_play_hosts_all | map('extract', hostvars, '__report_host')))
         | ipmasq.agent.snat_report(['cluster_east', 'cluster_west']) }}
  run_once: true
"""

RETURN = r"""
_value:
  description:
    - >-
      The report. C(hosts) maps each host to its C(policy) (V(ok), V(off-policy), V(unreachable)), C(chain)
      (V(in place), V(drifted), V(missing), V(not managed), V(unknown)), C(chain_actions), C(chain_drift) (per
      V(ipv4), V(ipv6) and V(nftables), the C(drift) of C(ipmasq.agent.masq_chain), which names the rules a run
      would put back (C(missing)) or take out (C(extra))), C(policy_backend) (where the settings put the policy:
      V(iptables) or V(nftables)), C(policy_in) (where ours acts on traffic now: V(iptables-nft),
      V(iptables-legacy), V(nftables); two of them is an V(off-policy) finding), C(ours_backends) and C(only_ours)
      (from C(ipmasq.agent.snat_sources)), C(backend) (the iptables tools' backend, V(nf_tables) or V(legacy);
      null where iptables was not read), C(iptables) and C(nft) (versions), C(kernel), C(resync), C(unreachable)
      (the message, or null), C(snat_sources) (every SNAT rule found, with C(owner), C(family), C(backend),
      C(chain), C(rule), C(reachable), C(allowed), C(ours)) and C(findings) (each with C(severity) V(off-policy) or
      V(warning), C(what) and C(do)).
    - >-
      C(groups) maps each group to its counts (C(hosts), C(off_policy), C(chain_missing), C(chain_drifted),
      C(foreign_snat) (hosts with an offender), C(offenders) (rules), C(resync_not_active), C(unreadable),
      C(unreachable), C(in_both_backends)), and C(totals) holds the same for the whole fleet.
    - >-
      C(off_policy_hosts) lists the hosts with an V(off-policy) finding (the ones the gate fails; unreachable
      hosts only with O(on_unreachable=fail), or when no host answered), C(unreachable_hosts) the hosts that could
      not be reached, and C(gate) says what fails the run (C(off_policy) V(fail) or V(report), C(unreachable)
      V(fail) or V(ignore)).
    - >-
      When no host answered (every host could not be reached or could not be read; also an empty O(_input)),
      C(gate) has C(no_host_answered) V(true), and every unreachable host is an V(off-policy) finding, whatever
      O(on_unreachable) says: a report with no host's state must fail a gate. The key is absent otherwise.
  type: dict
"""

import base64
import binascii

from ansible.errors import AnsibleFilterError
from ansible.module_utils.parsing.convert_bool import boolean

# The words of a drift are the resync journal's, each backend's own (drift_report), in the core.
from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import DEFAULT_CHAIN

NAME = 'ipmasq.agent.snat_report'
SOURCE_KEYS = ('owner', 'family', 'backend', 'table', 'chain', 'rule', 'reachable', 'allowed', 'allowed_by', 'ours')
COUNTS = ('hosts', 'off_policy', 'chain_missing', 'chain_drifted', 'foreign_snat', 'offenders',
          'resync_not_active', 'unreadable', 'unreachable', 'in_both_backends')
ON_UNREACHABLE = ('fail', 'ignore')
# What ``systemctl is-active`` may say that the report repeats as it is.
TIMER_STATES = ('active', 'inactive', 'failed', 'activating')


def _bool(value, what, host=None):
    """A boolean as the role reads one (its argument spec: convert_bool), or an error naming ``what`` (and ``host``)."""
    try:
        return boolean(value, strict=True)
    except TypeError:
        raise AnsibleFilterError('%s: %s%s must be true or false, not %r.'
                                 % (NAME, 'host %s: ' % host if host else '', what, value)) from None


def _resync_state(name, settings, timer):
    """The resync timer's state in the report's words: off, not checked
    (systemctl is not asked: ip_masq_resync_systemctl false), what
    ``systemctl is-active`` said, not installed, or unknown."""
    if not (settings.get('ip_masq_state', 'present') == 'present'
            and _bool(settings.get('ip_masq_resync_enabled', False), 'ip_masq_resync_enabled', name)):
        return 'off'
    if not _bool(settings.get('ip_masq_resync_systemctl', True), 'ip_masq_resync_systemctl', name):
        return 'not checked'
    timer = timer if isinstance(timer, dict) else {}
    said = str(timer.get('stdout') or '').strip()
    if said in TIMER_STATES:
        return said
    return 'not installed' if timer.get('rc', 0) == 4 else 'unknown'


def _kernel(value):
    """The kernel release: given as text, or as the ``slurp`` result of /proc/sys/kernel/osrelease."""
    if not isinstance(value, dict):
        return value
    if value.get('skipped'):
        return None
    try:
        return base64.b64decode(value.get('content') or '').decode('utf-8', 'replace').strip()
    except (binascii.Error, ValueError, TypeError):
        return ''


def _from_results(name, found):
    """``found`` with the keys the host's task results imply filled in:
    from ``settings`` (the role's typed settings, the ``settings`` of the
    ``ipmasq.agent.ip_masq`` action) ``managed``, ``resync_enabled`` and,
    with ``timer`` (the ``systemctl is-active ip-masq-agent.timer`` result),
    ``resync``; ``kernel`` from its ``slurp`` result.  A key given wins."""
    out = dict(found)
    settings = found.get('settings')
    if settings is not None:
        if not isinstance(settings, dict):
            raise AnsibleFilterError('%s: host %s: settings must be the dict of the role\'s settings, not %r.'
                                     % (NAME, name, settings))
        resync = _resync_state(name, settings, found.get('timer'))
        out.setdefault('managed', settings.get('ip_masq_state', 'present') == 'present')
        out.setdefault('resync_enabled', resync != 'off')
        out.setdefault('resync', resync)
    if 'kernel' in found:
        out['kernel'] = _kernel(found['kernel'])
    return out


def _writer(chain):
    """The backend class of the registry whose result ``chain`` is (the
    selected one, else the one that holds the policy; None: none says so)."""
    writers = backends.writers()
    for cls in writers:
        if cls.name == chain.get('selected_backend'):
            return cls
    for cls in writers:
        if cls.holds_policy(chain):
            return cls
    return None


def _chain_state(chain):
    if not isinstance(chain, dict) or 'changed' not in chain:
        return 'unknown'
    if not chain.get('changed'):
        return 'in place'
    cls = _writer(chain)
    return cls.drift_report(chain)[0] if cls is not None else 'drifted'


def _chain_drift(chain):
    """Which rules each rewrite puts back or takes out (masq_chain's ``drift``), by family or table."""
    out = {}
    for cls in backends.REGISTRY:
        for key in cls.result_keys:
            drift = (chain.get(key) or {}).get('drift') if isinstance(chain.get(key), dict) else None
            if drift:
                out[key] = drift
    return out


def _drift_words(chain):
    """The rules the run put back or took out, in words: each backend's own (``drift_report``)."""
    return [word for cls in backends.writers() for word in cls.drift_report(chain)[1]]


def _unreachable_message(found, chain, snat, unreachable):
    if unreachable is not None:
        if isinstance(unreachable, dict):
            return unreachable.get('msg') or 'unreachable'
        return str(unreachable) or 'unreachable'
    for result in (found, chain, snat, found.get('kernel'), found.get('timer')):
        if not isinstance(result, dict):
            continue
        value = result.get('unreachable')
        if value:
            return result.get('msg') or (value if isinstance(value, str) else 'unreachable')
    return None


def _in_both(name, chain_name, policy_in, ours_backends, policy_backend):
    """Ours in two backends, or in two tables of one that packets all pass:
    the finding, in the words each backend declares (``fleet_report_words``)."""
    where = ', '.join(policy_in)
    belongs = (' The settings put it in %s.' % policy_backend) if policy_backend else ''
    writers = backends.writers()
    homes = [cls for cls in writers if cls.name in ours_backends]
    if len(homes) > 1:
        both = ' and '.join(cls.name for cls in homes)
    else:
        both = (homes[0].fleet_report_words(chain_name).get('split') if homes else None) or ' and '.join(policy_in)
    by_hand = [words['by_hand'] for words in (cls.fleet_report_words(chain_name) for cls in writers) if words.get('by_hand')]
    return {'severity': 'off-policy',
            'what': 'our policy is in both %s (%s): the node runs two policies' % (both, where),
            'do': ('Keep one: run ansible-playbook -i INVENTORY ipmasq.agent.site --limit %s with ip_masq_backend set to the backend it belongs in '
                   '(%s); the run removes ours from the other one.%s%s'
                   % (name, ' or '.join(cls.name for cls in writers), belongs,
                      (' Or remove the other by hand: %s.' % ', or '.join(by_hand)) if by_hand else ''))}


def _host(name, found, groups=None, unreachable=None, on_unreachable='fail', no_answer=False):
    if not isinstance(found, dict):
        found = {}
    lost = _unreachable_message(found, found.get('chain') or {}, found.get('snat') or {}, unreachable)
    if (found.get('snat') or {}).get('unreachable'):
        # Lost at the first task that reaches it (the listing): nothing else was read there.
        found = {'groups': found.get('groups'), 'snat': found['snat']}
    found = _from_results(name, found)
    chain = found.get('chain') or {}
    snat = found.get('snat') or {}
    sources = [{key: src.get(key) for key in SOURCE_KEYS} for src in snat.get('sources') or []]
    out = {
        'groups': list(found.get('groups') or []) if groups is None else list(groups),
        'chain': _chain_state(chain),
        'chain_actions': list(chain.get('actions') or []) if chain.get('changed') else [],
        'chain_drift': _chain_drift(chain) if chain.get('changed') else {},
        'policy_backend': chain.get('selected_backend'),
        # Where ours acts on traffic, in the audit's words (each backend's place: iptables-nft, iptables-legacy,
        # nftables ...): snat_sources' ours_in.
        'policy_in': list(snat.get('ours_in') or []),
        'ours_backends': list(snat.get('ours_backends') or []),
        'only_ours': snat.get('only_ours'),
        'backend': chain.get('backend'),
        'iptables': chain.get('iptables_version'),
        'nft': chain.get('nft_version'),
        'kernel': found.get('kernel'),
        'resync': found.get('resync', 'unknown'),
        'snat_sources': sources,
        'unreachable': None,
        'findings': [],
    }
    findings = out['findings']
    chain_name = snat.get('chain') or chain.get('chain') or DEFAULT_CHAIN
    # Two backends, or both iptables flavours' nat tables (packets pass each): two policies.
    in_both = len(out['ours_backends']) > 1 or len(out['policy_in']) > 1
    if lost is not None:
        out['unreachable'] = lost
        fails = on_unreachable == 'fail' or no_answer
        findings.append({'severity': 'off-policy' if fails else 'warning',
                         'what': 'could not be reached: %s' % lost,
                         'do': ('Make the host reachable over SSH (ssh root@%s), then run the report again. '
                                'ip_masq_report_unreachable=%s: an unreachable host %s.'
                                % (name, on_unreachable,
                                   'is reported only, but no host answered, so it fails the gate '
                                   '(ansible-playbook exits 4)' if no_answer and on_unreachable == 'ignore'
                                   else 'fails the gate (ansible-playbook exits 4)' if fails
                                   else 'is reported only, and does not change the exit status'))})
        out['policy'] = 'unreachable'
        out['counts'] = dict.fromkeys(COUNTS, 0)
        out['counts'].update(hosts=1, unreachable=1, unreadable=1, off_policy=int(fails))
        return out
    if found.get('managed') is False:
        out.update(chain='not managed')
        if out['policy_in']:
            findings.append({'severity': 'off-policy',
                             'what': ('ip_masq_state is absent, but our policy still acts on traffic (%s)'
                                      % ', '.join(out['policy_in'])),
                             'do': ('Run ansible-playbook -i INVENTORY ipmasq.agent.site --limit %s: ip_masq_state absent removes ours from every backend.'
                                    % name)})
        if in_both:
            findings.append(_in_both(name, chain_name, out['policy_in'], out['ours_backends'], None))
        out['policy'] = 'off-policy' if findings else 'ok'
        out['counts'] = dict.fromkeys(COUNTS, 0)
        out['counts'].update(hosts=1, off_policy=int(bool(findings)), in_both_backends=int(in_both))
        return out
    errors = [e for e in ([found.get('error')] + [chain.get('msg') if chain.get('failed') else None]
                          + [snat.get('msg') if snat.get('failed') else None]) if e]
    if errors or not chain or not snat:
        findings.append({'severity': 'off-policy',
                         'what': 'could not be read: %s' % ('; '.join(errors) or 'no result (a task failed, or the host went away)'),
                         'do': 'Make the host reachable over SSH with Python 3 and iptables, then run the report again.'})
    drift_words = _drift_words(chain) if chain.get('changed') else []
    if out['chain'] == 'missing':
        findings.append({'severity': 'off-policy', 'what': 'our chain is missing (%s)' % '; '.join(out['chain_actions']),
                         'do': 'Apply it: ansible-playbook -i INVENTORY ipmasq.agent.site --limit %s' % name})
    elif out['chain'] == 'drifted':
        findings.append({'severity': 'off-policy',
                         'what': 'our chain has drifted; a run would: %s%s' % (
                             '; '.join(out['chain_actions']),
                             ''.join('. %s' % w for w in drift_words)),
                         'do': ('Run ansible-playbook -i INVENTORY ipmasq.agent.site --limit %s (or let the resync repair it). If it comes back, '
                                'find what rewrites the nat table: journalctl -u ip-masq-agent.service lists each '
                                'repair.' % name)})
    if in_both:
        findings.append(_in_both(name, chain_name, out['policy_in'], out['ours_backends'], out['policy_backend']))
    for offender in snat.get('offenders') or []:
        findings.append({'severity': 'off-policy',
                         'what': '%s SNAT rule in %s %s (%s): %s' % (
                             offender.get('owner'), offender.get('family'), offender.get('table'),
                             ' -> '.join(offender.get('path') or [offender.get('chain') or '?']), offender.get('rule')),
                         'do': offender.get('hint') or 'Remove it, or list it in ip_masq_audit_allow if it is meant to be there.'})
    if found.get('resync_enabled') and out['resync'] not in ('active', 'not checked'):
        findings.append({'severity': 'warning',
                         'what': 'the resync timer is %s' % out['resync'],
                         'do': ('Run ansible-playbook -i INVENTORY ipmasq.agent.site --limit %s, or systemctl enable --now ip-masq-agent.timer '
                                'ip-masq-agent.path' % name) if out['resync'] != 'unknown'
                         else 'Check systemd on the host (systemctl is-active ip-masq-agent.timer).'})
    out['policy'] = 'off-policy' if any(f['severity'] == 'off-policy' for f in findings) else 'ok'
    out['counts'] = {
        'hosts': 1,
        'off_policy': int(out['policy'] == 'off-policy'),
        'chain_missing': int(out['chain'] == 'missing'),
        'chain_drifted': int(out['chain'] == 'drifted'),
        'foreign_snat': int(bool(snat.get('offenders'))),
        'offenders': len(snat.get('offenders') or []),
        'resync_not_active': int(any(f['severity'] == 'warning' for f in findings)),
        'unreadable': int(bool(errors) or not chain or not snat),
        'unreachable': 0,
        'in_both_backends': int(in_both),
    }
    return out


def _check_mapping(value, what, item_ok):
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and item_ok(v) for k, v in value.items()):
        raise AnsibleFilterError('%s: %s, not %r.' % (NAME, what, value))
    return value


def snat_report(found, groups=(), *, host_groups=None, unreachable=None, on_unreachable='fail', fail_off_policy=False):
    """The fleet report from {host: what audit.yml found there}."""
    if not isinstance(found, dict):
        raise AnsibleFilterError('%s: the input must be a dict of host name to findings, not %s.'
                                 % (NAME, type(found).__name__))
    if isinstance(groups, str) or not all(isinstance(g, str) for g in groups):
        raise AnsibleFilterError('%s: groups must be a list of group names, not %r.' % (NAME, groups))
    host_groups = _check_mapping(
        host_groups, 'host_groups must be a dict of host name to the list of its inventory groups',
        lambda v: not isinstance(v, str) and isinstance(v, (list, tuple)) and all(isinstance(g, str) for g in v))
    unreachable = _check_mapping(unreachable, 'unreachable must be a dict of host name to the unreachable result or '
                                 'message', lambda v: isinstance(v, (dict, str)))
    if on_unreachable not in ON_UNREACHABLE:
        raise AnsibleFilterError("%s: on_unreachable must be 'fail' or 'ignore', not %r." % (NAME, on_unreachable))
    fail_off_policy = _bool(fail_off_policy, 'fail_off_policy')
    names = sorted(set(found) | set(unreachable))
    hosts = {name: _host(name, found.get(name), host_groups.get(name), unreachable.get(name), on_unreachable)
             for name in names}
    # No host answered (each unreachable, or not read): the report says nothing of the fleet, and the gate fails,
    # ip_masq_report_unreachable=ignore or not; every unreachable host is then an off-policy finding.
    no_answer = all(host['counts']['unreadable'] for host in hosts.values())
    if no_answer:
        hosts = {name: _host(name, found.get(name), host_groups.get(name), unreachable.get(name), on_unreachable,
                             no_answer=True) for name in names}
    wanted = list(groups) or sorted({g for h in hosts.values() for g in h['groups']})
    sums = {g: dict.fromkeys(COUNTS, 0) for g in wanted}
    totals = dict.fromkeys(COUNTS, 0)
    for host in hosts.values():
        counts = host.pop('counts')
        for key in COUNTS:
            totals[key] += counts[key]
            for group in host['groups']:
                if group in sums:
                    sums[group][key] += counts[key]
    gate = {'off_policy': 'fail' if fail_off_policy else 'report', 'unreachable': on_unreachable}
    if no_answer:
        gate['no_host_answered'] = True
    return {
        'hosts': hosts,
        'groups': sums,
        'totals': totals,
        'off_policy_hosts': [name for name, host in hosts.items()
                             if any(f['severity'] == 'off-policy' for f in host['findings'])],
        'unreachable_hosts': [name for name, host in hosts.items() if host['policy'] == 'unreachable'],
        'gate': gate,
    }


class FilterModule:
    """ipmasq.agent.snat_report"""

    def filters(self):
        return {'snat_report': snat_report}
