"""The action reads a host's task_vars once (ActionModule._host): its name,
its role variables (templated), every variable name it has, ansible_managed,
and what this run's --tags and --skip-tags pick, resolved there to the node
run's parts, the later steps and the daemons, as picked and selected say."""
import pytest

from ansible import constants as C

from ansible_collections.ipmasq.agent.plugins.action import ip_masq as action
from ansible_collections.ipmasq.agent.plugins.module_utils._daemons import registry


class _Templar:
    def template(self, value):
        return value.replace('{{ x }}', 'X') if isinstance(value, str) else value


def read(task_vars):
    module = action.ActionModule.__new__(action.ActionModule)
    module._templar = _Templar()    # pylint: disable=protected-access
    module._task = None             # pylint: disable=protected-access
    return module._host(task_vars)  # pylint: disable=protected-access


@pytest.mark.parametrize('run_tags, skip_tags', [
    (None, None), (['ip_masq_chain'], []), (['all'], ['ip_masq_resync']), (['ip_masq_docker', 'ip_masq_audit'], []),
    (['tagged'], ['ip_masq_chain', 'ip_masq_config']), (['other'], ['ip_masq_docker']),
])
def test_the_tags_are_resolved_once_as_picked_and_selected_say(run_tags, skip_tags):
    task_vars = {'inventory_hostname': 'n1', 'ip_masq_chain': 'C-{{ x }}', 'other_var': 1}
    if run_tags is not None:
        task_vars.update(ansible_run_tags=run_tags, ansible_skip_tags=skip_tags)
    host = read(task_vars)
    run, skip = run_tags or ['all'], skip_tags or []
    assert host.name == 'n1' and host.variables['ip_masq_chain'] == 'C-X' and 'other_var' not in host.variables
    assert set(host.names) == set(task_vars)
    assert host.parts == set(p for p in action.PART_TAGS if action.selected(p, run, skip))
    assert host.steps == set(s for s in action.STEP_TAGS if action.picked(action.step_tags(s), run, skip))
    assert host.daemons == set(d.variable for d in registry.DAEMONS if action.picked((d.variable,), run, skip))
    assert host.managed == C.DEFAULT_MANAGED_STR


def test_ansible_managed_is_templated_and_an_empty_one_is_the_default():
    assert read({'ansible_managed': 'by {{ x }}'}).managed == 'by X'
    assert read({'ansible_managed': ''}).managed == C.DEFAULT_MANAGED_STR
    assert read({}).name == '?'
