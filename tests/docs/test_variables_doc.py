"""docs/docsite/rst/variables.rst is what scripts/gen_variables_doc.py makes from
the role's meta/argument_specs.yml and defaults/main.yml, and the two agree:
every variable is documented, with the default the role really uses."""
import io
import os
import sys

import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, 'scripts'))

import gen_variables_doc  # noqa: E402  pylint: disable=wrong-import-position

ROLE = os.path.join(ROOT, 'roles', 'ip_masq')


def load(*parts):
    with open(os.path.join(ROLE, *parts)) as handle:
        return yaml.safe_load(handle)


def test_the_reference_is_generated_from_the_argument_spec():
    out = io.StringIO()
    assert gen_variables_doc.main(out) == 0
    with open(os.path.join(ROOT, 'docs', 'docsite', 'rst', 'variables.rst')) as handle:
        assert handle.read() == out.getvalue(), (
            'docs/docsite/rst/variables.rst is out of date: run '
            '.venv/bin/python scripts/gen_variables_doc.py > docs/docsite/rst/variables.rst')


def test_argument_spec_and_defaults_agree():
    options = load('meta', 'argument_specs.yml')['argument_specs']['ip_masq']['options']
    # Names that start with '__' are the role's internal node paths, not settings.
    defaults = {k: v for k, v in load('defaults', 'main.yml').items() if not k.startswith('__')}
    assert sorted(options) == sorted(defaults)
    for name, spec in options.items():
        assert spec.get('default') == defaults[name], name
        assert spec.get('description'), name


def test_every_variable_has_its_entry_once():
    with open(os.path.join(ROOT, 'docs', 'docsite', 'rst', 'variables.rst')) as handle:
        text = handle.read()
    for name in load('meta', 'argument_specs.yml')['argument_specs']['ip_masq']['options']:
        assert text.count('\n``%s``\n' % name) == 1, name
