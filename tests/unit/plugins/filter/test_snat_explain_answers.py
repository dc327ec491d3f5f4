"""The role's form on the controller (ip_masq_explain_flows): the registered
results of its snat_explain loop kept as the fact ip_masq_explain, one
answer per flow, in order (ipmasq.agent.snat_explain_answers); and the role's
task files leave such judging to Python (issue 34: control in one place)."""
import glob
import os

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.ipmasq.agent.plugins.filter.snat_explain_answers import snat_explain_answers

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
FLOW = {'src': '10.244.1.2', 'dst': '203.0.113.10', 'proto': 'tcp', 'dport': '443'}
OTHER = {'src': '10.244.1.2', 'dst': '10.10.0.10'}
OURS = {'owner': 'ip-masq-agent', 'backend': 'nft', 'table': 'inet ip-masq-agent', 'chain': 'postrouting',
        'rule': 'ip saddr 10.244.0.0/16 masquerade', 'position': 5}


def looped(flow, **result):
    """One item of a registered loop (loop_var __ip_masq_flow), as snat_explain's result carries it."""
    out = {'changed': False, 'failed': False, '__ip_masq_flow': flow, 'ansible_loop_var': '__ip_masq_flow',
           'item': 'not the flow'}
    out.update(result)
    return out


def answer(flow, verdict, decided_by=None, to=None, after=False, now=None):
    return looped(flow, verdict=verdict, to=to, decided_by=decided_by, after=after, now=now, reason=None,
                  msg='%s -> %s: %s' % (flow['src'], flow['dst'], verdict))


def test_a_real_run_keeps_each_answer_in_order():
    results = [answer(FLOW, 'masquerade', OURS), answer(OTHER, 'unchanged')]
    assert snat_explain_answers(results, False) == {'flows': [
        {'flow': FLOW, 'verdict': 'masquerade', 'to': None, 'decided_by': OURS, 'after': False, 'now': None,
         'msg': '10.244.1.2 -> 203.0.113.10: masquerade'},
        {'flow': OTHER, 'verdict': 'unchanged', 'to': None, 'decided_by': None, 'after': False, 'now': None,
         'msg': '10.244.1.2 -> 10.10.0.10: unchanged'}]}


def test_check_mode_keeps_the_after_answer_with_the_answer_now_beside_it():
    now = {'verdict': 'unchanged', 'to': None, 'reason': None, 'decided_by': None, 'msg': 'now: unchanged'}
    out = snat_explain_answers([answer(FLOW, 'snat', OURS, to='203.0.113.7', after=True, now=now)], True)
    assert out == {'flows': [{'flow': FLOW, 'verdict': 'snat', 'to': '203.0.113.7', 'decided_by': OURS,
                              'after': True, 'now': now, 'msg': '10.244.1.2 -> 203.0.113.10: snat'}]}


def test_an_unknown_verdict_is_an_answer_like_the_others():
    unknown = dict(OURS, owner='unknown')
    out = snat_explain_answers([answer(FLOW, 'unknown', unknown)], False)
    assert out['flows'][0]['verdict'] == 'unknown' and out['flows'][0]['decided_by'] == unknown
    assert out['flows'][0]['msg'] == '10.244.1.2 -> 203.0.113.10: unknown'


@pytest.mark.parametrize('check_mode', [True, False])
def test_a_flow_the_node_could_not_answer_is_reported_failed_in_either_mode(check_mode):
    """The loop's failed_when: false: the result has no verdict, only the module's message."""
    failed = looped(OTHER, failed_when_result=True, msg='cannot read the nat table: nft: Operation not permitted')
    out = snat_explain_answers([answer(FLOW, 'masquerade', OURS, after=check_mode), failed], check_mode)
    assert out['flows'][0]['verdict'] == 'masquerade'
    assert out['flows'][1] == {
        'flow': OTHER, 'verdict': 'failed', 'to': None, 'decided_by': None, 'after': check_mode, 'now': None,
        'msg': '10.244.1.2 -> 10.10.0.10: could not explain: cannot read the nat table: nft: Operation not permitted'}


def test_the_loop_item_is_found_under_its_loop_var_or_as_item():
    plain = answer(FLOW, 'unchanged')
    del plain['ansible_loop_var'], plain['__ip_masq_flow']
    plain['item'] = FLOW
    assert snat_explain_answers([plain], False)['flows'][0]['flow'] == FLOW
    assert snat_explain_answers([], True) == {'flows': []}


@pytest.mark.parametrize('given,words', [
    ({'results': []}, 'give the results of a snat_explain loop (a list), got'),
    ([answer(FLOW, 'unchanged'), 'x'], "result 1 is not a dict: 'x'"),
    ([{'verdict': 'unchanged', 'msg': 'm'}], 'result 0 carries no flow (a dict) as its loop item (item)'),
])
def test_bad_input_is_named(given, words):
    with pytest.raises(AnsibleFilterError) as info:
        snat_explain_answers(given, False)
    assert str(info.value).startswith('ipmasq.agent.snat_explain_answers: ') and words in str(info.value)
    with pytest.raises(AnsibleFilterError, match="after must be true or false, got 'no'"):
        snat_explain_answers([], 'no')


def test_the_role_tasks_and_playbooks_hold_no_jinja_statements():
    """Judging and summing up live in Python (filters, the action), not in {% ... %} blocks of YAML."""
    files = sorted(glob.glob(os.path.join(ROOT, 'roles', 'ip_masq', 'tasks', '*.yml'))
                   + glob.glob(os.path.join(ROOT, 'playbooks', '*.yml')))
    assert len(files) > 10
    offenders = []
    for path in files:
        with open(path, encoding='utf-8') as handle:
            if '{%' in handle.read():
                offenders.append(os.path.relpath(path, ROOT))
    assert not offenders, offenders
