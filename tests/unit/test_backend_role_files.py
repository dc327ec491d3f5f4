"""The backend registry (plugins/module_utils/_core/registry/backends.py) is the one
declaration of the backends: the files that cannot import it (the role's
tasks/packages.yml and meta/argument_specs.yml, masq_chain's DOCUMENTATION
and the options table, which ansible-doc and the role's validation read)
agree with it, on the backend choices and on which package installs each
backend's tool."""
import os

import jinja2
import pytest
import yaml

from ansible_collections.ipmasq.agent.plugins.module_utils._core.registry import backends
from ansible_collections.ipmasq.agent.plugins.module_utils._core.model.options import OPTIONS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROLE = os.path.join(ROOT, 'roles', 'ip_masq')


def _yaml(*path):
    with open(os.path.join(ROLE, *path), encoding='utf-8') as handle:
        return yaml.safe_load(handle)


def test_the_backend_choices_are_the_registry_s():
    choices = list(backends.BACKENDS)
    assert choices == ['auto'] + [cls.name for cls in backends.REGISTRY if cls.writes]
    role = _yaml('meta', 'argument_specs.yml')['argument_specs']['ip_masq']['options']['ip_masq_backend']
    assert list(role['choices']) == choices
    option = [o for o in OPTIONS if o.name == 'backend'][0]
    assert list(option.choices) == choices      # test_options.py: the module's DOCUMENTATION says the same


def _package_task():
    tasks = [t for t in _yaml('tasks', 'packages.yml') if 'ansible.builtin.package' in t]
    assert len(tasks) == 1
    return tasks[0]


def _render(text, variables):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters['bool'] = lambda value: value if isinstance(value, bool) else str(value).strip().lower() in ('true', 'yes', '1')
    return env.from_string(text).render(**variables).strip()


@pytest.mark.parametrize('os_family,major', [('Debian', '12'), ('RedHat', '8'), ('RedHat', '9'), ('RedHat', '10'),
                                             ('Suse', '15'), ('', '0')])
def test_packages_yml_installs_the_package_each_backend_declares(os_family, major):
    task = _package_task()
    facts = {'os_family': os_family, 'distribution_major_version': major}
    for choice in backends.BACKENDS:
        variables = {'ansible_facts': facts, 'ip_masq_backend': choice}
        for name, text in task['vars'].items():
            variables[name] = _render(text, variables)
        installed = _render(task['ansible.builtin.package']['name'], variables)
        # auto installs what a new node would get first: the first writer of the registry.
        writer = [cls for cls in backends.writers() if choice in ('auto', cls.name)][0]
        assert installed == writer.package(os_family, int(major)), (choice, os_family, major)
