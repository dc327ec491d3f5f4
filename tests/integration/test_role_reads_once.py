"""The role's action reads the collection's own files once per run, not once
per host (issue 34's performance goal: the role's controller CPU within
1.3x of the bare module's).  Ansible imports an action in its main process
and forks a worker per host and task from it; what the action reads at its
import (the role's argument spec and defaults, the resync code whose hash
names the unit's PYTHONPATH) every worker has, where what ``run()`` reads is
read again in every worker.  Counted with strace on a real ansible-playbook
run of four hosts: each file is opened by the main process alone.  The
action runs with ``validate_only`` (no node is contacted), every node path
of the hosts moved below the test's own directory all the same."""
import json
import os
import shutil
import subprocess

import pytest

from ipmasq_lab import netlab

HOSTS = ('n1', 'n2', 'n3', 'n4')
PLAY = '''- hosts: all
  gather_facts: false
  connection: local
  tasks:
    - name: Validate and render
      ipmasq.agent.ip_masq:
        validate_only: true
'''
WATCHED = {
    'the role\'s argument spec': '/roles/ip_masq/meta/argument_specs.yml',
    'the role\'s defaults': '/roles/ip_masq/defaults/main.yml',
    'the resync\'s entry (hashed for its root)': '/plugins/module_utils/_core/agent/resync.py',
}


def opened(log):
    """``{what: [pid, ...]}``: the processes that opened each watched file (successfully)."""
    out = dict((what, []) for what in WATCHED)
    with open(log) as handle:
        for line in handle:
            pid, _sep, call = line.partition(' ')
            if 'openat(' not in call or '= -1' in call:
                continue
            path = call.split('"')[1] if '"' in call else ''
            for what, tail in WATCHED.items():
                if path.endswith(tail):
                    out[what].append(int(pid))
    return out


@pytest.mark.skipif(not shutil.which('strace'), reason='strace is not installed')
def test_the_action_reads_the_collections_files_once_per_run_not_per_host(tmp_path):
    (tmp_path / 'group_vars').mkdir()
    node_vars = dict(netlab.role_node_paths(tmp_path / 'node'), ip_masq_resync_enabled=True)
    (tmp_path / 'group_vars' / 'all.json').write_text(json.dumps(node_vars))
    (tmp_path / 'hosts').write_text('\n'.join(HOSTS) + '\n')
    (tmp_path / 'play.yml').write_text(PLAY)
    log = str(tmp_path / 'strace.log')
    argv = ['strace', '-f', '-qq', '-e', 'trace=openat', '-o', log,
            os.path.join(netlab.VENV_BIN, 'ansible-playbook'), '-i', str(tmp_path / 'hosts'), str(tmp_path / 'play.yml')]
    env = dict(netlab.ansible_env(), ANSIBLE_FORKS='4')
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    stats = json.loads(proc.stdout)['stats']
    assert sorted(h for h, s in stats.items() if s['ok'] == 1 and not s['failures']) == list(HOSTS), stats
    pids = opened(log)
    # Each read by one process only (the main one), not by each host's worker.
    assert dict((what, len(set(p))) for what, p in pids.items()) == dict((what, 1) for what in WATCHED), pids
    assert len(set(pid for p in pids.values() for pid in p)) == 1, pids
    assert len(pids['the role\'s argument spec']) == 1, pids
