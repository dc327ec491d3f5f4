"""The quick start's steps, as written in README.md and quickstart.rst, work in a
fresh project: find the installed collection's folder from what
`ansible-galaxy collection list ipmasq.agent` prints, make the folder, copy the
example inventory. And the play the quick start shows as "what the shipped play
does" is the shipped play.

The collection is "installed" by a link under an empty collections root (this
tree, as ansible-galaxy would have put it there); the documented root
(/home/me/...) is replaced by the one ansible-galaxy printed. Only mkdir and cp
run: the documented ansible-playbook lines are tested from a real install in
tests/install/test_build_install.py. About 2 s (one ansible-galaxy run).
"""
import os
import re
import shlex
import subprocess

import pytest
import yaml

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BIN = os.path.join(ROOT, '.venv', 'bin')
LIST = 'ansible-galaxy collection list ipmasq.agent'


def readme_steps():
    with open(os.path.join(ROOT, 'README.md')) as handle:
        blocks = re.findall(r'^```bash\n(.*?)^```', handle.read(), re.MULTILINE | re.DOTALL)
    block = [b for b in blocks if LIST in b]
    assert len(block) == 1, 'the README has no single bash block with %r' % LIST
    return block[0].splitlines()


def quickstart_steps():
    with open(os.path.join(ROOT, 'docs', 'docsite', 'rst', 'quickstart.rst')) as handle:
        text = handle.read()
    blocks = re.findall(r'\.\. code-block:: console\n\n((?:   .*\n|\n)+)', text)
    block = [b for b in blocks if LIST in b]
    assert len(block) == 1, 'quickstart.rst has no single console block with %r' % LIST
    return [ln[3:] for ln in block[0].splitlines() if ln.strip()]


def commands_and_root(lines, prompt):
    """The commands (without the prompt) and the root the text shows as printed."""
    commands, shown = [], None
    for line in lines:
        line = line.strip()
        if prompt and line.startswith(prompt):
            commands.append(line[len(prompt):].strip())
        elif not prompt and line and not line.startswith('#'):
            commands.append(line.split('  #')[0].strip())
        elif line.startswith('# /') and shown is None:
            shown = line[2:].strip()
    return commands, shown


@pytest.fixture(scope='module')
def installed(tmp_path_factory):
    """(collections root as ansible-galaxy prints it, env)."""
    top = tmp_path_factory.mktemp('quickstart')
    link = top / 'collections' / 'ansible_collections' / 'ipmasq' / 'agent'
    link.parent.mkdir(parents=True)
    link.symlink_to(ROOT)
    home = top / 'home'
    home.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env.update(HOME=str(home), ANSIBLE_COLLECTIONS_PATH=str(top / 'collections'),
               ANSIBLE_CONFIG=str(home / 'no-ansible.cfg'), PATH=BIN + os.pathsep + env.get('PATH', '/usr/bin:/bin'))
    proc = subprocess.run(shlex.split(LIST), cwd=str(home), env=env, capture_output=True, text=True, timeout=120,
                          check=True)
    printed = [ln[2:].strip() for ln in proc.stdout.splitlines() if ln.startswith('# /')]
    assert printed, proc.stdout
    return printed[0], env, top


@pytest.mark.parametrize('source', ['README.md', 'quickstart.rst'])
def test_the_copy_of_the_example_inventory_works_in_a_fresh_project(installed, source, tmp_path):
    printed, env, top = installed
    lines = readme_steps() if source == 'README.md' else quickstart_steps()
    commands, shown = commands_and_root(lines, None if source == 'README.md' else '$ ')
    assert LIST in commands
    # What the doc shows as printed has the shape ansible-galaxy prints: the collections root.
    assert shown and shown.endswith('/ansible_collections') and printed.endswith('/ansible_collections'), (shown, printed)
    project = tmp_path / 'project'
    project.mkdir()
    ran = 0
    for command in commands:
        argv = shlex.split(command.replace(shown, printed))
        if argv[0] not in ('mkdir', 'cp'):
            continue
        proc = subprocess.run(argv, cwd=str(project), env=env, capture_output=True, text=True, timeout=60,
                              check=False)
        assert proc.returncode == 0, '%s: %r fails in a fresh project: %s' % (source, command, proc.stderr)
        ran += 1
    assert ran >= 2
    assert (project / 'inventories' / 'prod' / 'hosts.yml').is_file()
    assert (project / 'inventories' / 'prod' / 'group_vars').is_dir()


def test_the_play_shown_is_the_shipped_play():
    """quickstart.rst's "what the shipped play does" has every keyword of
    playbooks/site.yml's play, with the same values."""
    with open(os.path.join(ROOT, 'playbooks', 'site.yml')) as handle:
        shipped = yaml.safe_load(handle)
    with open(os.path.join(ROOT, 'docs', 'docsite', 'rst', 'quickstart.rst')) as handle:
        text = handle.read()
    block = re.search(r'\.\. code-block:: yaml\n\n((?:   .*\n|\n)*?   # playbooks/site.yml of your project\n'
                      r'(?:   .*\n|\n)+)', text)
    assert block, 'quickstart.rst has no yaml block for "playbooks/site.yml of your project"'
    shown = yaml.safe_load('\n'.join(ln[3:] for ln in block.group(1).splitlines()))
    assert shown == shipped
