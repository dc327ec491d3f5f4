"""ip_masq_explain_flows, the role's own form of ipmasq.agent.snat_explain
(issue 35's "what --check should say about SNAT"), checked on the controller
by the role's one task like every other role variable: each flow as the
module checks it, a bad one refused naming the variable, the host, the index
and the value; the step ``explain`` listed (last) only where flows are given,
with the ``after`` the fleet play (playbooks/explain.yml) passes too, made
in one place (the action)."""
import os

import pytest
import yaml

from ansible_collections.ipmasq.agent.plugins.action import ip_masq as action
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_args import RoleArgsError, role_args
from ansible_collections.ipmasq.agent.plugins.plugin_utils._role_vars import read

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
with open(os.path.join(ROOT, 'roles', 'ip_masq', 'defaults', 'main.yml'), encoding='utf-8') as _f:
    DEFAULTS = yaml.safe_load(_f)
FLOW = {'src': '10.244.1.2', 'dst': '203.0.113.10'}


def args(**values):
    return role_args(read(dict(DEFAULTS, **values), 'node-1'))


def refusal(**values):
    with pytest.raises(RoleArgsError) as info:
        args(**values)
    return info.value.message


def test_unset_the_action_lists_no_explain_step():
    """The default ([]): no explain step, and nothing more in the one task's result."""
    assert DEFAULTS['ip_masq_explain_flows'] == []
    checked = args()
    assert checked['explain_flows'] == []
    assert action.explain_step(checked) is None


def test_flows_are_typed_as_the_module_takes_them_and_listed_with_the_after_of_this_host():
    checked = args(ip_masq_explain_flows=[dict(FLOW, proto='tcp', dport=443), 'src=10.244.1.2 dst=10.10.0.10',
                                          {'src': 'fd00:244:1::2', 'dst': '2001:db8:e::10', 'mark': 16384,
                                           'out_interface': 'eth0', 'proto': ''}],
                   ip_masq_docker='auto', ip_masq_flannel='skip', ip_masq_kubelet='report', ip_masq_cni='manage',
                   ip_masq_enable_ipv6=True)
    assert checked['explain_flows'] == [
        dict(FLOW, proto='tcp', dport='443'), {'src': '10.244.1.2', 'dst': '10.10.0.10'},
        {'src': 'fd00:244:1::2', 'dst': '2001:db8:e::10', 'mark': '16384', 'out_interface': 'eth0'}]
    step = action.explain_step(checked)
    assert step['flows'] == checked['explain_flows']
    # The policy and the daemon steps the role runs (not skip, not report), whatever --tags picks.
    assert step['after'] == {'chain': checked['masq_chain'], 'allow_catch_all': False,
                             'daemons': [checked['daemon_steps']['docker'], checked['daemon_steps']['cni']]}


def test_the_step_is_the_last_one_and_has_its_tag():
    assert list(action.STEP_TAGS)[-1] == 'explain'
    assert action.step_tags('explain') == ('ip_masq_explain',)
    assert action.picked(action.step_tags('explain'), ['all'], [])
    assert not action.picked(action.step_tags('explain'), ['ip_masq_chain'], [])
    assert not action.picked(action.step_tags('explain'), ['all'], ['ip_masq_explain'])


@pytest.mark.parametrize('flows,line', [
    ([FLOW, dict(FLOW, dst='203.0.113.300')],
     "ip_masq_explain_flows[1].dst of node-1: '203.0.113.300' is not an IPv4 or IPv6 address"),
    ([{'src': '10.244.1.2'}], "ip_masq_explain_flows[0].dst of node-1: give the flow's destination address."),
    ([dict(FLOW, port=80)], 'ip_masq_explain_flows[0] of node-1: port is not a key of a flow (src, dst, proto, '
                            'dport, out_interface, mark).'),
    ([dict(FLOW, dst='fd00::1')], 'ip_masq_explain_flows[0] of node-1: src 10.244.1.2 and dst fd00::1 are not of '
                                  'one IP family.'),
    ([FLOW, FLOW, dict(FLOW, dport=80)],
     "ip_masq_explain_flows[2].dport of node-1: '80' needs proto tcp, udp, sctp, udplite"),
    ([FLOW, '10.0.0.1'], 'ip_masq_explain_flows[1] of node-1: must be a mapping, got a string: "10.0.0.1".'),
    ({'src': '10.244.1.2'}, 'ip_masq_explain_flows of node-1: must be a list of mappings, got a mapping: '
                            '{"src": "10.244.1.2"}.'),
], ids=['address', 'missing', 'key', 'family', 'dport', 'element', 'mapping'])
def test_a_bad_flow_is_refused_naming_the_variable_the_host_the_index_and_the_value(flows, line):
    msg = refusal(ip_masq_explain_flows=flows)
    assert msg.startswith(line), msg
    assert len(msg.splitlines()) == 1, msg


def test_every_bad_flow_at_once_with_the_other_problems():
    msg = refusal(ip_masq_explain_flows=[dict(FLOW, src='pod'), FLOW, dict(FLOW, mark='-1')],
                  ip_masq_cidr_limit='many')
    assert [line.split(' of node-1')[0] for line in msg.splitlines()] == [
        'ip_masq_cidr_limit', 'ip_masq_explain_flows[0].src', 'ip_masq_explain_flows[2].mark'], msg
