"""The role's second task (main.yml: the steps a node still needs) runs in a
worker process per host, also where it only finds no step. Its loop is the
action's own list of steps, in the action's order (STEP_TAGS, the order of
the include files), templated without a Jinja filter or test: the first one
a process uses loads every filter (or test) plugin of ansible-core."""
import json
import os
import subprocess
import sys

import pytest
import yaml

from ansible_collections.ipmasq.agent.plugins.action import ip_masq as action

ROLE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), 'roles', 'ip_masq')

# The loop templated as a worker does, in a process of its own: what it gives and the plugins it loaded.
TEMPLATE = '''
import json, sys
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template
loop, run = sys.argv[1], json.loads(sys.argv[2])
before = set(sys.modules)
out = Templar(DataLoader(), variables={'__ip_masq_run': run}).template(trust_as_template(loop))
print(json.dumps({'steps': list(out), 'plugins': sorted(m for m in set(sys.modules) - before
                                                      if m.startswith(('ansible.plugins.filter', 'ansible.plugins.test')))}))
'''


def steps_task():
    with open(os.path.join(ROLE, 'tasks', 'main.yml'), encoding='utf-8') as handle:
        tasks = yaml.safe_load(handle)
    return [t for t in tasks if 'ansible.builtin.include_tasks' in t][0]


def template(loop, run):
    proc = subprocess.run([sys.executable, '-c', TEMPLATE, loop, json.dumps(run)], capture_output=True, text=True,
                          timeout=120, check=False)
    if 'cannot import name' in proc.stderr and 'trust_as_template' in proc.stderr:
        pytest.skip('ansible-core before 2.19 has no trust_as_template')
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout.splitlines()[-1])


@pytest.mark.parametrize('run, steps', [
    ({'changed': False, 'steps': []}, []),
    ({'changed': True, 'steps': ['packages', 'apply', 'resync', 'other_snat', 'audit']},
     ['packages', 'apply', 'resync', 'other_snat', 'audit']),
    ({'failed': True, 'msg': 'ip_masq_chain of n1: ...'}, []),     # under ignore_errors: no step
])
def test_the_steps_loop_is_the_action_s_list_templated_without_a_plugin(run, steps):
    task = steps_task()
    assert 'when' not in task and task['loop_control'] == {'loop_var': '__ip_masq_step'}
    assert template(task['loop'], run) == {'steps': steps, 'plugins': []}


def test_the_action_lists_its_steps_in_the_order_of_the_include_files():
    assert list(action.STEP_TAGS) == ['packages', 'resync_code', 'apply', 'resync', 'resync_absent', 'other_snat',
                                      'audit', 'absent', 'explain']
    assert all(os.path.isfile(os.path.join(ROLE, 'tasks', step + '.yml')) for step in action.STEP_TAGS)
