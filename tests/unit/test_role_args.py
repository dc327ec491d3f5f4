"""role_args: the ip_masq role's variables validated once, on the controller
(plugins/plugin_utils/_role_args.py), in place of roles/ip_masq/tasks/validate.yml.

The cases are test_role_validate.py's own (its BAD_ENTRIES, COMBINATIONS and
controls, read from that file), so the integration test's messages hold here
without a playbook run; EXACT holds the whole messages validate.yml gave at
commit 35f13d0 (whitespace folded: the Jinja template's spacing was no part of
them), captured by running it over these hosts.
"""
import importlib.util
import os
import sys

import pytest
import yaml

from ansible_collections.ipmasq.agent.plugins.filter.nonmasq_guard import nonmasq_guard
from ansible_collections.ipmasq.agent.plugins.filter.snat_to import snat_to
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.errors import MasqError
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.policy import Policy, is_interface_name
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_args import RoleArgsError, role_args
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_vars import read

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, 'roles', 'ip_masq', 'defaults', 'main.yml'), encoding='utf-8') as _f:
    DEFAULTS = yaml.safe_load(_f)


def _role_validate_cases():
    """tests/integration/test_role_validate.py, imported for its case tables only."""
    here = os.path.join(ROOT, 'tests', 'integration')
    sys.path.insert(0, here)
    try:
        spec = importlib.util.spec_from_file_location('_role_validate_cases', os.path.join(here, 'test_role_validate.py'))
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    finally:
        sys.path.remove(here)
    return module


CASES = _role_validate_cases()
CONTROLS = dict(CASES.CONTROLS, **{
    'good': {'ip_masq_out_interfaces': ['eth0', 'bond0.100', 'br-1a2b_c', 'x' * 15]},
})


def run(host, **values):
    return role_args(read(dict(DEFAULTS, **values), host))


def refusal(host, values):
    with pytest.raises(RoleArgsError) as info:
        role_args(read(dict(DEFAULTS, **values), host))
    return info.value.message


def folded(text):
    return ' '.join(text.split())


@pytest.mark.parametrize('host', sorted(CASES.BAD_ENTRIES))
def test_bad_entries_of_the_extensions_fail_naming_variable_and_value(host):
    values, fragments = CASES.BAD_ENTRIES[host]
    msg = refusal(host, values)
    for fragment in fragments:
        assert fragment in msg, (fragment, msg)
    assert 'bare_address' not in msg and 'duplicates=' not in msg, msg
    if host == 'if':
        assert '"eth0"' not in msg


@pytest.mark.parametrize('host', sorted(CASES.COMBINATIONS))
def test_combinations_that_make_no_sense_fail_naming_both_variables(host):
    values, names, fragment = CASES.COMBINATIONS[host]
    msg = refusal(host, values)
    for variable in names:
        assert variable in msg, (variable, msg)
    assert 'of %s' % host in msg and fragment in msg, msg
    if host == 'masq-list':
        assert 'ip_masq_nomasq_all_reserved_ranges' not in msg


def test_every_case_of_the_integration_test_is_here():
    """15 combinations (10, and the 5 extensions beside rule_format upstream) and 10 bad entries."""
    assert len(CASES.COMBINATIONS) == 15 and len(CASES.BAD_ENTRIES) == 10


@pytest.mark.parametrize('host', sorted(CONTROLS))
def test_the_controls_pass(host):
    assert run(host, **CONTROLS[host])['state'] == 'present'


# validate.yml's whole message (commit 35f13d0), whitespace folded.
EXACT = {
    'masq-all3': (
        {'ip_masq_masquerade_cidrs': ['192.0.2.0/24'],
         'ip_masq_nonmasquerade_cidrs': ['10.0.0.0/8'],
         'ip_masq_nomasq_all_reserved_ranges': True,
         'ip_masq_exception_cidrs': ['10.1.0.0/16']},
        'ip_masq_masquerade_cidrs of masq-all3 cannot be combined with ip_masq_nonmasquerade_cidrs: with '
        'ip_masq_masquerade_cidrs, every destination it does not list already keeps its source (leave '
        'ip_masq_nonmasquerade_cidrs at its default, or remove ip_masq_masquerade_cidrs). ip_masq_masquerade_cidrs of '
        'masq-all3 cannot be combined with ip_masq_nomasq_all_reserved_ranges: with ip_masq_masquerade_cidrs, every '
        'destination it does not list already keeps its source (set ip_masq_nomasq_all_reserved_ranges: false, or '
        'remove ip_masq_masquerade_cidrs). ip_masq_masquerade_cidrs of masq-all3 cannot be combined with '
        'ip_masq_exception_cidrs: list the exceptions in ip_masq_masquerade_cidrs instead.'),
    'exc-mixed': (
        {'ip_masq_enable_ipv6': True,
         'ip_masq_nonmasquerade_cidrs': ['10.0.0.0/9', 'fd00::/16'],
         'ip_masq_exception_cidrs': ['fd01::/16', '10.0.0.0/8', '10.0.0.0/16', 'fd00::/8', '8.8.8.0/24']},
        'ip_masq_exception_cidrs of exc-mixed: 10.0.0.0/8, fd00::/8, fd01::/16, 8.8.8.0/24 are not inside '
        'ip_masq_nonmasquerade_cidrs (nor link-local while it is kept, nor the reserved ranges of '
        'ip_masq_nomasq_all_reserved_ranges): such traffic gets a new source address anyway. An exception names a part '
        'of a kept range to masquerade; remove it, or add the range it belongs to to ip_masq_nonmasquerade_cidrs.'),
    'masq-ll-two': (
        {'ip_masq_enable_ipv6': True, 'ip_masq_masquerade_cidrs': ['fe80::/64', '192.0.2.0/24', '169.254.1.0/24']},
        'ip_masq_masquerade_cidrs of masq-ll-two: fe80::/64, 169.254.1.0/24 lie inside link-local, which keeps its '
        'source while ip_masq_masq_link_local (IPv6: ip_masq_masq_link_local_ipv6) is false, so it would never be '
        'masqueraded. Set ip_masq_masq_link_local: true (link-local is then masqueraded only where listed), or remove '
        'it.'),
    'many-up': (
        {'ip_masq_rule_format': 'upstream',
         'ip_masq_exception_cidrs': ['10.1.0.0/16'],
         'ip_masq_out_interfaces': ['eth0'],
         'ip_masq_snat_to': ['203.0.113.7'],
         'ip_masq_source_cidrs': ['10.244.0.0/16'],
         'ip_masq_masquerade_cidrs': ['192.0.2.0/24']},
        'ip_masq_exception_cidrs, ip_masq_masquerade_cidrs, ip_masq_snat_to, ip_masq_source_cidrs, '
        'ip_masq_out_interfaces of many-up: extensions of ipmasq.agent, which the upstream agent does not have, but '
        'ip_masq_rule_format is upstream (the rules exactly as the upstream agent writes them). Set '
        'ip_masq_rule_format: docs, or remove them. ip_masq_masquerade_cidrs of many-up cannot be combined with '
        'ip_masq_exception_cidrs: list the exceptions in ip_masq_masquerade_cidrs instead.'),
    # One line per path, naming its variable (issue 32): no longer validate.yml's one line for all of them.
    'bad-paths': (
        {'ip_masq_lib_dir': 'relative/lib', 'ip_masq_unit_dir': '/etc/sys temd', 'ip_masq_metrics_dir': '/var/x y'},
        'ip_masq_lib_dir of bad-paths: "relative/lib" is not an absolute path (one that starts with /). '
        'ip_masq_unit_dir of bad-paths: "/etc/sys temd" is written into the resync\'s systemd '
        'units: only letters, digits and _ . + @ - / (no spaces, quotes or other characters systemd would need '
        'quoted). ip_masq_metrics_dir of bad-paths: "/var/x y" is written into the resync\'s systemd units: only '
        'letters, digits and _ . + @ - / (no spaces, quotes or other characters systemd would need quoted).'),
    'if': (
        {'ip_masq_out_interfaces': ['eth0', 'a-name-too-long0', '-eth1', 'eth*', 'eth 2', '..']},
        'ip_masq_out_interfaces of if: "a-name-too-long0", "-eth1", "eth*", "eth 2", ".." are not interface names (1 '
        'to 15 letters, digits and _ . -, not starting with -; no wildcards such as eth+ or eth*).'),
    'src-no-v4': (
        {'ip_masq_enable_ipv6': True, 'ip_masq_nonmasquerade_cidrs': ['10.0.0.0/8', 'fd00::/8'], 'ip_masq_source_cidrs': ['fd00:10::/64']},
        'ip_masq_source_cidrs of src-no-v4 lists no IPv4 source while ip_masq_enable_ipv6 is true: IPv4 traffic would '
        'never get a new source address. Add the IPv4 pod CIDR, or set ip_masq_enable_ipv6: false.'),
    'limit-str': (
        {'ip_masq_nonmasquerade_cidrs': ['10.0.0.0/8', '10.1.0.0/16', '10.2.0.0/16'], 'ip_masq_cidr_limit': '2'},
        'ip_masq_nonmasquerade_cidrs of limit-str: 3 CIDRs is over ip_masq_cidr_limit 2 (see the '
        'ipmasq.agent.cidr_aggregate filter, or raise the limit).'),
    'interval-0s': (
        {'ip_masq_resync_interval': '0s'},
        'ip_masq_resync_interval of interval-0s: 0s is not a positive Go duration such as 60s, 1m0s or 1h30m.'),
    'interval-1d': (
        {'ip_masq_resync_interval': '1d'},
        # Names the role variable and the host (it named the filter, at 4af2eab).
        'ip_masq_resync_interval of interval-1d: "1d" is not a Go duration: unknown unit "d" (the units are ns, us, '
        'ms, s, m and h; '
        'there is no day unit, write 24h) (examples: "60s", "1m30s", "500ms", "1h").'),
    'bare-dup': (
        {'ip_masq_nonmasquerade_cidrs': ['10.244.0.0/16', '10.30.0.7', '10.244.0.0/16']},
        'ip_masq_nonmasquerade_cidrs of bare-dup: 2 problems in 3 entries: [1] '
        "'10.30.0.7': a bare address, not a CIDR: write 10.30.0.7/32 for the single host; [2] '10.244.0.0/16': "
        "duplicate of [0] '10.244.0.0/16'; remove it"),
    'catch-all': (
        {'ip_masq_nonmasquerade_cidrs': ['0.0.0.0/1', '128.0.0.0/1']},
        'ip_masq_nonmasquerade_cidrs of catch-all: 1 problem in 2 entries: [0] '
        "'0.0.0.0/1' and [1] '128.0.0.0/1' together cover all of IPv4 (0.0.0.0/0). A non-masquerade list that covers "
        'all of IPv4 means every destination matches a RETURN rule before the final MASQUERADE: nothing is ever '
        'masqueraded, and pods lose all access to networks that do not route the pod addresses back (the internet, '
        'cloud services). To keep outside access, list only the pod and node networks (for example 10.244.0.0/16 and '
        '192.168.1.0/24); to have no SNAT at all, use state: absent instead (ip_masq_state: absent with the ip_masq '
        'role); if every destination really must be exempt, pass allow_catch_all=true (ip_masq_allow_catch_all: true '
        'with the role)'),
    'snat-bad-many': (
        {'ip_masq_snat_to': ['203.0.113.7', '203.0.113.8', '2001:db8::7', '192.0.2.0/24']},
        "ip_masq_snat_to of snat-bad-many: 3 problems in 4 entries: [1] '203.0.113.8': a second "
        "IPv4 entry after [0] '203.0.113.7': give at most one address or range per family; [2] '2001:db8::7': IPv6, "
        "but IPv6 is not enabled (ipv6=false; with the ip_masq role, ip_masq_enable_ipv6: false); [3] '192.0.2.0/24': "
        'a prefix length has no place here: write one address or a range such as 192.0.2.1-192.0.2.254'),
    'v6-off-list': (
        {'ip_masq_nonmasquerade_cidrs': ['10.0.0.0/8', 'fd00::/8']},
        'ip_masq_nonmasquerade_cidrs of v6-off-list: IPv6 CIDRs fd00::/8 are listed but ip_masq_enable_ipv6 is false '
        '(set it to true, or remove them).'),
    'exc-v6-off': (
        {'ip_masq_exception_cidrs': ['fd00::/8', '10.1.0.0/16']},
        'ip_masq_exception_cidrs of exc-v6-off: IPv6 CIDRs fd00::/8 are listed but ip_masq_enable_ipv6 is false (set '
        'it to true, or remove them).'),
    'masq-limit': (
        {'ip_masq_masquerade_cidrs': ['192.0.2.0/25', '192.0.2.128/25'], 'ip_masq_cidr_limit': 1},
        'ip_masq_masquerade_cidrs of masq-limit: 2 CIDRs is over ip_masq_cidr_limit 1 (see the '
        'ipmasq.agent.cidr_aggregate filter, or raise the limit).'),
}


@pytest.mark.parametrize('host', sorted(EXACT))
def test_the_message_is_validate_yml_s(host):
    values, message = EXACT[host]
    assert folded(refusal(host, values)) == message


def test_problems_are_one_per_line():
    msg = refusal('masq-all3', EXACT['masq-all3'][0])
    assert len(msg.splitlines()) == 3 and all(line.startswith('ip_masq_masquerade_cidrs of masq-all3') for line in msg.splitlines())


@pytest.mark.parametrize('values,facts', [
    # validate.yml's set_fact, as captured at commit 35f13d0.
    ({}, {'__ip_masq_cidrs': ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'], '__ip_masq_exceptions': [],
          '__ip_masq_masquerade': [], '__ip_masq_sources': [], '__ip_masq_snat_to': [], '__ip_masq_default_list': False}),
    (CONTROLS['ok-v6'], {'__ip_masq_cidrs': ['10.0.0.0/8', 'fd00::/8'], '__ip_masq_exceptions': ['fd00:20::/32', 'fe80::1/128'],
                         '__ip_masq_masquerade': [], '__ip_masq_sources': ['10.244.0.0/16', 'fd00:10::/64'],
                         '__ip_masq_snat_to': ['2001:db8::7'], '__ip_masq_default_list': False}),
    ({'ip_masq_nonmasquerade_cidrs': ['10.244.0.0/16', '10.30.0.0/16', '10.244.0.0/16'], 'ip_masq_rule_format': 'upstream'},
     {'__ip_masq_cidrs': ['10.244.0.0/16', '10.30.0.0/16', '10.244.0.0/16'], '__ip_masq_exceptions': [],
      '__ip_masq_masquerade': [], '__ip_masq_sources': [], '__ip_masq_snat_to': [], '__ip_masq_default_list': False}),
    ({'ip_masq_rule_format': 'upstream'},
     {'__ip_masq_cidrs': ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'], '__ip_masq_exceptions': [],
      '__ip_masq_masquerade': [], '__ip_masq_sources': [], '__ip_masq_snat_to': [], '__ip_masq_default_list': True}),
    ({'ip_masq_masquerade_cidrs': ['192.0.2.0/24', '198.51.100.0/24']},
     {'__ip_masq_cidrs': ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'], '__ip_masq_exceptions': [],
      '__ip_masq_masquerade': ['192.0.2.0/24', '198.51.100.0/24'], '__ip_masq_sources': [], '__ip_masq_snat_to': [],
      '__ip_masq_default_list': True}),
    ({'ip_masq_nonmasquerade_cidrs': ['10.244.0.0/16', '10.30.0.0/16'], 'ip_masq_exception_cidrs': ['10.244.7.0/24'],
      'ip_masq_source_cidrs': [' 10.244.0.0/16'], 'ip_masq_out_interfaces': ['eth0', 'true'],
      'ip_masq_snat_to': [' 203.0.113.9 - 203.0.113.11']},
     {'__ip_masq_cidrs': ['10.244.0.0/16', '10.30.0.0/16'], '__ip_masq_exceptions': ['10.244.7.0/24'],
      '__ip_masq_masquerade': [], '__ip_masq_sources': ['10.244.0.0/16'], '__ip_masq_snat_to': ['203.0.113.9-203.0.113.11'],
      '__ip_masq_default_list': False}),
])
def test_the_normalised_lists_are_validate_yml_s(values, facts):
    assert run('h', **values)['facts'] == facts


@pytest.mark.parametrize('values', [
    {'ip_masq_nonmasquerade_cidrs': ['FD00:0::/8', '10.0.0.0/8'], 'ip_masq_enable_ipv6': True,
     'ip_masq_exception_cidrs': ['fd00:0:0::/16'], 'ip_masq_snat_to': ['2001:DB8::7 - 2001:db8::9', '203.0.113.7-203.0.113.7']},
    {'ip_masq_nonmasquerade_cidrs': ['0.0.0.0/0', '::/0'], 'ip_masq_allow_catch_all': True, 'ip_masq_enable_ipv6': True},
])
def test_the_lists_are_what_the_filters_return(values):
    v = dict(DEFAULTS, **values)
    facts = run('h', **values)['facts']
    assert facts['__ip_masq_cidrs'] == nonmasq_guard(v['ip_masq_nonmasquerade_cidrs'], allow_catch_all=v['ip_masq_allow_catch_all'])
    assert facts['__ip_masq_exceptions'] == nonmasq_guard(v['ip_masq_exception_cidrs'], allow_catch_all=True)
    assert facts['__ip_masq_snat_to'] == snat_to(v['ip_masq_snat_to'], ipv6=v['ip_masq_enable_ipv6'])


def test_masq_chain_gets_what_apply_yml_passed():
    args = run('h')['masq_chain']
    assert args == {
        'nonmasquerade_cidrs': ['10.0.0.0/8', '172.16.0.0/12', '192.168.0.0/16'], 'masq_link_local': False,
        'masq_link_local_ipv6': False, 'nomasq_all_reserved_ranges': False, 'ipv6': False, 'chain': 'IP-MASQ-AGENT',
        'to_ports': [], 'jump_position': 'append', 'cidr_limit': 64, 'rule_format': 'docs', 'backend': 'auto',
        'exception_cidrs': [], 'masquerade_cidrs': [], 'snat_to': [], 'snat_to_require_local': True, 'source_cidrs': [],
        'out_interfaces': [], 'state': 'present'}
    # omit: the default list with upstream or masquerade_cidrs, random_fully null.
    assert 'nonmasquerade_cidrs' not in run('h', ip_masq_rule_format='upstream')['masq_chain']
    assert 'nonmasquerade_cidrs' not in run('h', ip_masq_masquerade_cidrs=['192.0.2.0/24'])['masq_chain']
    assert 'random_fully' not in args
    args = run('h', ip_masq_random_fully=True, ip_masq_to_ports=['1024-29999'], ip_masq_snat_to=[' 203.0.113.7 '],
               ip_masq_out_interfaces=['eth0'])['masq_chain']
    assert args['random_fully'] is True and args['to_ports'] == ['1024-29999'] and args['snat_to'] == ['203.0.113.7']
    assert args['out_interfaces'] == ['eth0']


def test_state_absent_checks_the_chain_only():
    absent = run('h', ip_masq_state='absent', ip_masq_nonmasquerade_cidrs=['banana'])
    assert {key: absent[key] for key in ('state', 'masq_chain', 'facts', 'timer')} == {
        'state': 'absent', 'masq_chain': {'chain': 'IP-MASQ-AGENT', 'state': 'absent'}, 'facts': {}, 'timer': None}
    assert refusal('h', {'ip_masq_state': 'absent', 'ip_masq_chain': 'bad chain'}).startswith("ip_masq_chain of h: 'bad chain'")


_SIXTY = ['10.%d.0.0/16' % i for i in range(60)]


@pytest.mark.parametrize('values,options,start', [
    # What validate.yml let through and the node's core then refused: now on the controller, naming the variable.
    ({'ip_masq_chain': 'bad chain'}, {'chain': 'bad chain'}, "ip_masq_chain of h: 'bad chain' is not a valid chain name"),
    ({'ip_masq_chain': 'A' * 29}, {'chain': 'A' * 29}, "ip_masq_chain of h: '%s' is 29 characters long" % ('A' * 29)),
    ({'ip_masq_to_ports': ['70000']}, {'to_ports': ['70000']}, "ip_masq_to_ports of h: '70000' is not a range inside 1-65535"),
    ({'ip_masq_nonmasquerade_cidrs': _SIXTY, 'ip_masq_nomasq_all_reserved_ranges': True},
     {'nonmasquerade_cidrs': _SIXTY, 'nomasq_all_reserved_ranges': True},
     'ip_masq_nonmasquerade_cidrs of h: 68 CIDRs (excluding link-local) is over cidr_limit 64'),
])
def test_what_the_core_refuses_is_refused_before_any_node(values, options, start):
    msg = refusal('h', values)
    assert msg.startswith(start), msg
    with pytest.raises(MasqError) as info:     # the node's own check (masq_chain builds the same Policy)
        Policy(**options)
    assert msg.endswith(info.value.msg.partition(': ')[2])


@pytest.mark.parametrize('name', ['eth0', 'bond0.100', 'br-1a2b_c', 'x' * 15, '_', '.a', 'a-', 'a.b.c',
                                  '', '.', '..', '-eth1', 'eth+', 'eth*', 'eth 2', 'a' * 16, 'eth:0', 'br@x', 'é',
                                  'eth0\n', None, 5])
def test_one_interface_name_rule(name):
    """The core's rule is the one validate.yml spelt as a regular expression."""
    import re
    regex = isinstance(name, str) and bool(re.match(r'^[A-Za-z0-9_.][A-Za-z0-9_.-]{0,14}\Z', name)) and name not in ('.', '..')
    assert is_interface_name(name) == regex


@pytest.mark.parametrize('interval, timer', [
    ('60s', '60s'), ('90s', '90s'), ('1m30s', '90s'), ('1500ms', '1500ms'), ('1.5s', '1500ms'), ('2h', '7200s'),
    ('1ms', '1ms'), ('1500us', '2ms'),
])
def test_the_resync_interval_becomes_the_timer_in_whole_seconds_else_milliseconds(interval, timer):
    assert run('timer-host', ip_masq_resync_interval=interval)['timer'] == timer


@pytest.mark.parametrize('interval, words', [
    ('0s', 'is not a positive Go duration'), ('-1s', 'is not a positive Go duration'),
    ('500us', 'is shorter than a millisecond'), ('soon', 'soon'),
])
def test_a_resync_interval_that_gives_no_timer_is_refused_naming_it(interval, words):
    message = refusal('timer-host', {'ip_masq_resync_interval': interval})
    assert message.startswith('ip_masq_resync_interval of timer-host: ') and words in message
