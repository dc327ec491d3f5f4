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


class _Tagged(str):
    """A str as ansible-core's templating returns it (a subclass carrying where the value came from)."""


class _TaggedInt(int):
    pass


class _LazyList(list):
    pass


class _TaggingTemplar:
    def template(self, value):
        if isinstance(value, str):
            return _Tagged(value)
        if isinstance(value, bool):
            return value
        if isinstance(value, int):
            return _TaggedInt(value)
        if isinstance(value, list):
            return _LazyList(self.template(v) for v in value)
        if isinstance(value, dict):
            return dict((self.template(k), self.template(v)) for k, v in value.items())
        return value


def test_the_role_variables_are_read_as_plain_python_without_the_templating_s_types():
    """The validator deep-copies what it checks; a value of templating's own types copies slowly."""
    module = action.ActionModule.__new__(action.ActionModule)
    module._templar = _TaggingTemplar()  # pylint: disable=protected-access
    module._task = None                  # pylint: disable=protected-access
    host = module._host({'ip_masq_chain': 'C', 'ip_masq_cidr_limit': 7, 'ip_masq_enable_ipv6': True,  # pylint: disable=protected-access
                         'ip_masq_nonmasquerade_cidrs': ['10.0.0.0/8'], 'ip_masq_snat_to': [{'source': 'a', 'to': 'b'}]})
    values = host.variables

    def kinds(value):
        if isinstance(value, dict):
            return [type(value)] + [t for k, v in value.items() for t in kinds(k) + kinds(v)]
        if isinstance(value, list):
            return [type(value)] + [t for v in value for t in kinds(v)]
        return [type(value)]
    assert set(t for v in values.values() for t in kinds(v)) <= {dict, list, str, int, float, bool, type(None)}
    assert values['ip_masq_chain'] == 'C' and values['ip_masq_cidr_limit'] == 7 and values['ip_masq_enable_ipv6'] is True
    assert values['ip_masq_nonmasquerade_cidrs'] == ['10.0.0.0/8']
    assert values['ip_masq_snat_to'] == [{'source': 'a', 'to': 'b'}]
