"""Every plugin of the collection renders with ansible-doc, with examples and
return values, and ansible-doc lists each of them."""
import glob
import json
import os
import re
import subprocess

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# IMQ_ANSIBLE_BIN: the bin/ of another ansible-core's venv (tests/versions.sh).
ANSIBLE_DOC = os.path.join(os.environ.get('IMQ_ANSIBLE_BIN') or os.path.join(ROOT, '.venv', 'bin'), 'ansible-doc')
ENV = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=os.path.join(ROOT, 'build', 'collections'),
           ANSIBLE_HOME=os.path.join(ROOT, 'build', 'ansible-home'))
KINDS = {'module': 'modules', 'filter': 'filter', 'test': 'test'}


def plugins():
    found = []
    for kind, folder in KINDS.items():
        for path in sorted(glob.glob(os.path.join(ROOT, 'plugins', folder, '*.py'))):
            name = os.path.splitext(os.path.basename(path))[0]
            if not name.startswith('_'):
                found.append((kind, name))
    return found


def doc(*args):
    proc = subprocess.run([ANSIBLE_DOC] + list(args), capture_output=True, text=True, env=ENV, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert 'ERROR' not in proc.stderr and 'WARNING' not in proc.stderr, proc.stderr
    return proc.stdout


def test_there_are_plugins():
    assert ('module', 'masq_chain') in plugins()


_ANSI = re.compile(r'\x1b\[[0-9;]*m')
# Each plugin's text starts '> MODULE ipmasq.agent.x (path)', or in ansible-core
# before 2.17 '> IPMASQ.AGENT.X    (path)'.
_HEADER = re.compile(r'^> (?:[A-Z]+ )?(ipmasq\.agent\.\w+)', re.M | re.I)


@pytest.fixture(scope='module')
def rendered():
    """``{(kind, name): (json entry, text)}``: every plugin of a kind through one
    ansible-doc call for the JSON and one for the text (two calls per plugin
    cost a process start each); each call must still print no error or warning."""
    out = {}
    for kind in sorted(KINDS):
        names = ['ipmasq.agent.' + n for k, n in plugins() if k == kind]
        if not names:
            continue
        data = json.loads(doc('-t', kind, '--json', *names))
        text = _ANSI.sub('', doc('-t', kind, *names))
        starts = [(m.start(), m.group(1).lower()) for m in _HEADER.finditer(text)] + [(len(text), None)]
        texts = dict((name, text[start:end]) for (start, name), (end, _next) in zip(starts, starts[1:]))
        for name in names:
            out[(kind, name[len('ipmasq.agent.'):])] = (data.get(name), texts.get(name, ''))
    return out


@pytest.mark.parametrize('kind,name', plugins(), ids=str)
def test_plugin_renders_with_examples_and_return(rendered, kind, name):
    entry, text = rendered[(kind, name)]
    assert entry, 'ansible-doc --json printed nothing for %s' % name
    assert entry['doc']['short_description']
    assert entry['doc'].get('description')
    assert entry['examples'] and entry['examples'].strip()
    assert entry['return']
    assert 'EXAMPLES' in text


@pytest.mark.parametrize('kind', sorted(KINDS))
def test_every_plugin_is_listed(kind):
    names = [n for k, n in plugins() if k == kind]
    if not names:
        pytest.skip('no %s plugins' % kind)
    listing = doc('-t', kind, '-l', 'ipmasq.agent')
    for name in names:
        assert 'ipmasq.agent.' + name in listing


def role_doc(*args):
    """ansible-doc for roles: as doc(), but ansible-core 2.21 warns, for roles, about
    its own internal collection (ansible._protomatter has no MANIFEST.json), not ours."""
    proc = subprocess.run([ANSIBLE_DOC, '-t', 'role'] + list(args), capture_output=True, text=True, env=ENV,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert [ln for ln in proc.stderr.splitlines() if ln.strip() and '_protomatter' not in ln] == [], proc.stderr
    return proc.stdout


def test_every_role_ansible_doc_lists_prints_a_description():
    """ansible-doc lists every folder under roles/: each prints an entry point with
    a description; ip_masq's entry point is not called main (ansible-core would add
    a per-host argument spec task for it: the role's one task checks the spec)."""
    roles = sorted(os.path.basename(p) for p in glob.glob(os.path.join(ROOT, 'roles', '*')) if os.path.isdir(p))
    assert roles == ['ip_masq']
    listing = role_doc('-l', 'ipmasq.agent')
    for role in roles:
        assert 'ipmasq.agent.%s' % role in listing
        data = json.loads(role_doc('--json', 'ipmasq.agent.' + role))['ipmasq.agent.' + role]
        points = data.get('entry_points') or {}
        assert points, '%s: ansible-doc prints nothing' % role
        for point in points.values():
            assert point.get('short_description') and point.get('description'), role
        assert 'main' not in points
