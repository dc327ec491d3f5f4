# Copyright: contributors to the ipmasq.agent collection
# GNU General Public License v3.0+ (see https://www.gnu.org/licenses/gpl-3.0.txt)
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
      - A dict of host name to what was found there, with the keys C(groups) (the host's groups),
        C(error) (a message when the host could not be read), C(chain) (the result of
        C(ipmasq.agent.masq_chain) in check mode), C(snat) (the result of C(ipmasq.agent.snat_sources)),
        C(kernel) (the kernel release), C(managed) (false where C(ip_masq_state) is V(absent); nothing is checked
        there), C(resync_enabled) (bool) and C(resync) (one of V(active), V(inactive), V(activating), V(failed),
        V(not installed), V(not checked), V(off), V(unknown)).
    type: dict
    required: true
  groups:
    description: The groups to sum up; a host counts in each of these it belongs to. Empty means every group of every host.
    type: list
    elements: str
    default: []
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
    - The report. C(hosts) maps each host to its C(policy) (V(ok), V(off-policy)), C(chain) (V(in place),
      V(drifted), V(missing), V(not managed), V(unknown)), C(chain_actions), C(backend), C(iptables), C(kernel), C(resync),
      C(snat_sources) (every SNAT rule found, with C(owner), C(family), C(chain), C(rule), C(reachable),
      C(allowed)) and C(findings) (each with C(severity) V(off-policy) or V(warning), C(what) and C(do)).
    - C(groups) maps each group to its counts (C(hosts), C(off_policy), C(chain_missing), C(chain_drifted),
      C(foreign_snat) (hosts with an offender), C(offenders) (rules), C(resync_not_active), C(unreadable)), and
      C(totals) holds the same for the whole fleet. C(off_policy_hosts) lists the off-policy hosts.
  type: dict
"""

from ansible.errors import AnsibleFilterError

NAME = 'ipmasq.agent.snat_report'
SOURCE_KEYS = ('owner', 'family', 'backend', 'table', 'chain', 'rule', 'reachable', 'allowed', 'allowed_by')
COUNTS = ('hosts', 'off_policy', 'chain_missing', 'chain_drifted', 'foreign_snat', 'offenders',
          'resync_not_active', 'unreadable')


def _chain_state(chain):
    if not isinstance(chain, dict) or 'changed' not in chain:
        return 'unknown'
    if not chain.get('changed'):
        return 'in place'
    families = [chain.get(f) or {} for f in ('ipv4', 'ipv6')]
    exists = [((f.get('before') or {}).get('chain_exists')) for f in families if f.get('managed')]
    return 'missing' if exists and not any(exists) else 'drifted'


def _host(name, found):
    if not isinstance(found, dict):
        found = {}
    chain = found.get('chain') or {}
    snat = found.get('snat') or {}
    out = {
        'groups': list(found.get('groups') or []),
        'chain': _chain_state(chain),
        'chain_actions': list(chain.get('actions') or []) if chain.get('changed') else [],
        'backend': chain.get('backend'),
        'iptables': chain.get('iptables_version'),
        'kernel': found.get('kernel'),
        'resync': found.get('resync', 'unknown'),
        'snat_sources': [{key: src.get(key) for key in SOURCE_KEYS} for src in snat.get('sources') or []],
        'findings': [],
    }
    findings = out['findings']
    if found.get('managed') is False:
        out.update(chain='not managed', policy='ok', counts=dict.fromkeys(COUNTS, 0), snat_sources=out['snat_sources'])
        out['counts']['hosts'] = 1
        return out
    errors = [e for e in ([found.get('error')] + [chain.get('msg') if chain.get('failed') else None]
                          + [snat.get('msg') if snat.get('failed') else None]) if e]
    if errors or not chain or not snat:
        findings.append({'severity': 'off-policy',
                         'what': 'could not be read: %s' % ('; '.join(errors) or 'no result (unreachable or failed)'),
                         'do': 'Make the host reachable over SSH with Python 3 and iptables, then run the report again.'})
    if out['chain'] == 'missing':
        findings.append({'severity': 'off-policy', 'what': 'our chain is missing (%s)' % '; '.join(out['chain_actions']),
                         'do': 'Apply it: ansible-playbook playbooks/site.yml --limit %s' % name})
    elif out['chain'] == 'drifted':
        findings.append({'severity': 'off-policy',
                         'what': 'our chain has drifted; a run would: %s' % '; '.join(out['chain_actions']),
                         'do': ('Run playbooks/site.yml --limit %s (or let the resync repair it). If it comes back, '
                                'find what rewrites the nat table: journalctl -u ip-masq-agent.service lists each '
                                'repair.' % name)})
    for offender in snat.get('offenders') or []:
        findings.append({'severity': 'off-policy',
                         'what': '%s SNAT rule in %s %s (%s): %s' % (
                             offender.get('owner'), offender.get('family'), offender.get('table'),
                             ' -> '.join(offender.get('path') or [offender.get('chain') or '?']), offender.get('rule')),
                         'do': offender.get('hint') or 'Remove it, or list it in ip_masq_audit_allow if it is meant to be there.'})
    if found.get('resync_enabled') and out['resync'] not in ('active', 'not checked'):
        findings.append({'severity': 'warning',
                         'what': 'the resync timer is %s' % out['resync'],
                         'do': ('Run playbooks/site.yml --limit %s, or systemctl enable --now ip-masq-agent.timer '
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
    }
    return out


def snat_report(found, groups=()):
    """The fleet report from {host: what audit.yml found there}."""
    if not isinstance(found, dict):
        raise AnsibleFilterError('%s: the input must be a dict of host name to findings, not %s.'
                                 % (NAME, type(found).__name__))
    if isinstance(groups, str) or not all(isinstance(g, str) for g in groups):
        raise AnsibleFilterError('%s: groups must be a list of group names, not %r.' % (NAME, groups))
    hosts = {name: _host(name, found[name]) for name in sorted(found)}
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
    return {
        'hosts': hosts,
        'groups': sums,
        'totals': totals,
        'off_policy_hosts': [name for name, host in hosts.items() if host['policy'] == 'off-policy'],
    }


class FilterModule:
    """ipmasq.agent.snat_report"""

    def filters(self):
        return {'snat_report': snat_report}
