"""Text that ansible-doc's terminal renderer would eat.

ansible-doc strips anything that looks like an RST directive (``.. \\w+::``,
where each ``.`` is any character) or an RST role (``:word:```) from every
description before printing it: ``Masquerade traffic to fe80::/10`` printed as
``Masquerade traffic /10``. The docsite build (tests/docs/build-docsite.sh)
renders such text fine, so this test reads every description, of every plugin
and of the role's argument spec, as ansible-doc returns it, and applies
ansible-doc's own patterns to it. Write addresses and code as V(...) or C(...).
"""
import json
import subprocess

import pytest
from ansible.cli.doc import DocCLI

from test_ansible_doc import ANSIBLE_DOC, ENV, plugins

EATERS = (DocCLI._RST_DIRECTIVES, DocCLI._RST_ROLES)  # pylint: disable=protected-access


def texts(node, where=''):
    """(where, text) for every string under description/short_description keys."""
    if isinstance(node, dict):
        for key, value in node.items():
            here = '%s.%s' % (where, key) if where else str(key)
            if key in ('description', 'short_description', 'notes', 'requirements'):
                for text in value if isinstance(value, list) else [value]:
                    if isinstance(text, str):
                        yield here, text
            if isinstance(value, (dict, list)):
                yield from texts(value, here)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from texts(value, '%s[%d]' % (where, index))


def docs(kind, names):
    proc = subprocess.run([ANSIBLE_DOC, '-t', kind, '--json'] + names, capture_output=True, text=True,
                          env=ENV, timeout=300, check=True)
    return json.loads(proc.stdout)


def eaten(data):
    found = []
    for where, text in texts(data):
        for pattern in EATERS:
            match = pattern.search(text)
            if match:
                found.append('%s: %r would lose %r' % (where, text, match.group(0)))
    return found


@pytest.mark.parametrize('kind', ['module', 'filter', 'test', 'role'])
def test_ansible_doc_prints_every_description_whole(kind):
    if kind == 'role':
        names = ['ipmasq.agent.ip_masq']
    else:
        names = ['ipmasq.agent.' + n for k, n in plugins() if k == kind]
    data = docs(kind, names)
    assert sorted(data) == sorted(names)
    assert eaten(data) == []


def test_the_check_catches_the_fe80_case():
    """The case seen in the role's argument spec, as ansible-doc returned it."""
    bad = {'options': {'x': {'description': 'Masquerade traffic to fe80::/10 (upstream C(masqLinkLocalIPv6)).'}}}
    assert eaten(bad) and 'to fe80::' in eaten(bad)[0]
    assert DocCLI.tty_ify(bad['options']['x']['description']).startswith('Masquerade traffic /10')
    good = {'options': {'x': {'description': 'Masquerade traffic to V(fe80::/10).'}}}
    assert eaten(good) == []
