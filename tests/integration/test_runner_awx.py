"""The site and audit plays run as AWX and Automation Platform run them:
through ansible-runner, from a private data directory laid out as AWX lays
it out, against the SSH fleet (tests/lab/ipmasq_lab/fleetlab.py: 3 hosts in 2
clusters, each a network namespace with its own sshd).

- ``ansible-runner run``: what AWX's controller node (or a hybrid node) runs;
- ``ansible-runner transmit | ansible-runner worker | ansible-runner process``:
  what AWX runs through receptor when the job goes to an execution node; the
  three run here in separate directories, joined only by their streams.

The private data directory, as AWX writes it for a job:

- ``project/``: the user's project (the job template's playbook, here one
  that imports ``ipmasq.agent.site`` or ``ipmasq.agent.audit`` by name, and
  the project's ansible.cfg);
- ``inventory/hosts``: an executable that prints the inventory as JSON (AWX
  writes its inventory so), made here with ``ansible-inventory --list
  --export`` from the fleet's inventory, as AWX imports an inventory source:
  the per-cluster groups with their variables, the host variables in ``_meta``;
- ``env/``: ``extravars`` (the job template's extra variables), ``envvars``,
  ``settings`` and ``ssh_key`` (the machine credential's key: ansible-runner
  loads it into an ssh-agent; the project's ssh config names no key).

One fleet for the whole module (module-scoped fixture): every test leaves
the fleet converged. The execution environment's container run is in
test_execution_environment.py.
"""
import glob
import json
import os
import shutil
import subprocess

import pytest

from ipmasq_lab import fleetlab, netlab
from test_fleet_ssh import EAST, WEST_V4, WEST_V6, returns

RUNNER = os.path.join(netlab.VENV_BIN, 'ansible-runner')
HOSTS = ['east-1', 'east-2', 'west-1']
# The role's one task (ipmasq.agent.ip_masq): validation, files, chain and audit in one node run.
APPLY_TASK = "Validate, write the agent's files, apply the policy and audit, in one node run"
# The playbook of the job template: the user's project imports the
# collection's playbook by name (an installed collection's playbooks are not
# files in the project).
PROJECT_PLAYBOOK = '''---
# The job template's playbook (written by tests/integration/test_runner_awx.py)
- name: {what}
  ansible.builtin.import_playbook: ipmasq.agent.{name}
'''
INVENTORY_SCRIPT = '''#!/usr/bin/env python3
# The job's inventory, as AWX writes it (tests/integration/test_runner_awx.py)
import sys

sys.stdout.write('{{}}\\n' if '--host' in sys.argv else {inventory!r})
'''


pytestmark = pytest.mark.skipif(not os.access(RUNNER, os.X_OK),
                                reason='ansible-runner is not installed: scripts/bootstrap.sh installs tests/requirements.txt')


@pytest.fixture(scope='module')
def fleet():
    with fleetlab.Fleet() as made:
        yield made


def awx_inventory(fleet):
    """The fleet's inventory as AWX has it after an inventory sync."""
    env = fleet.env()
    proc = netlab.run([os.path.join(netlab.VENV_BIN, 'ansible-inventory'), '-i', fleet.inventory, '--list', '--export'],
                      env=env)
    return json.loads(proc.stdout)


def private_data_dir(fleet, name, playbook, extravars=None, base=None, envvars=None):
    """Write an AWX-style private data directory below the fleet's directory.

    ``base``: where the directory is seen by ansible-playbook (``/runner``
    in a container); by default where it is written."""
    pdd = os.path.join(fleet.dir, 'runner', name)
    base = base or pdd
    for sub in ('project', 'inventory', 'env'):
        os.makedirs(os.path.join(pdd, sub))
    project = os.path.join(pdd, 'project')
    what = {'site': 'One source of SNAT on every node', 'audit': 'The fleet report'}[playbook]
    with open(os.path.join(project, playbook + '.yml'), 'w', encoding='utf-8') as handle:
        handle.write(PROJECT_PLAYBOOK.format(what=what, name=playbook))
    # The project's ssh settings: the fleet's host keys checked, no key named
    # (the credential's key comes from ansible-runner's ssh-agent).
    shutil.copy(fleet.known_hosts, os.path.join(project, 'known_hosts'))
    with open(os.path.join(project, 'ssh_config'), 'w', encoding='ascii') as handle:
        handle.write('\n'.join([
            'Host *',
            '  UserKnownHostsFile %s/project/known_hosts' % base,
            '  GlobalKnownHostsFile /dev/null',
            '  StrictHostKeyChecking yes',
            '  BatchMode yes',
            '  ConnectTimeout 10',
            '']))
    with open(os.path.join(project, 'ansible.cfg'), 'w', encoding='ascii') as handle:
        handle.write('\n'.join([
            '[defaults]',
            'forks = 10',
            'interpreter_python = %s' % fleetlab.PYTHON,
            '',
            '[ssh_connection]',
            'pipelining = True',
            'ssh_args = -F %s/project/ssh_config -C -o ControlMaster=auto -o ControlPersist=60s' % base,
            '']))
    script = os.path.join(pdd, 'inventory', 'hosts')
    with open(script, 'w', encoding='utf-8') as handle:
        handle.write(INVENTORY_SCRIPT.format(inventory=json.dumps(awx_inventory(fleet), indent=1) + '\n'))
    os.chmod(script, 0o700)
    env = os.path.join(pdd, 'env')
    with open(os.path.join(env, 'extravars'), 'w', encoding='utf-8') as handle:
        json.dump(extravars or {}, handle)
    with open(os.path.join(env, 'envvars'), 'w', encoding='utf-8') as handle:
        json.dump(dict({
            'ANSIBLE_COLLECTIONS_PATH': netlab.COLLECTIONS,
            'ANSIBLE_HOME': os.path.join(fleet.dir, 'ansible-home'),
            'ANSIBLE_HOST_KEY_CHECKING': 'True',
            'ANSIBLE_NOCOLOR': '1',
        }, **(envvars or {})), handle)
    with open(os.path.join(env, 'settings'), 'w', encoding='utf-8') as handle:
        json.dump({'job_timeout': 300, 'idle_timeout': 240, 'pexpect_use_poll': True}, handle)
    shutil.copy(fleet.client_key, os.path.join(env, 'ssh_key'))
    return pdd


class Job:
    """What ansible-runner left in an artifacts directory."""

    def __init__(self, artifacts):
        self.dir = artifacts
        self.status = self.read('status')
        self.rc = int(self.read('rc'))
        self.events = []
        for path in glob.glob(os.path.join(artifacts, 'job_events', '*.json')):
            with open(path, encoding='utf-8') as handle:
                self.events.append(json.load(handle))
        self.events.sort(key=lambda e: e['counter'])
        (stats,) = [e['event_data'] for e in self.events if e['event'] == 'playbook_on_stats']
        self.stats = stats

    def read(self, name):
        with open(os.path.join(self.dir, name), encoding='utf-8') as handle:
            return handle.read().strip()

    def host_results(self, task):
        """{host: event name} of the task ``task`` (its runner_on_* events)."""
        return {e['event_data']['host']: e['event'] for e in self.events
                if e['event'].startswith('runner_on_') and e['event_data'].get('task', '').endswith(task)}

    def per_host(self, key):
        """{host: count} from the recap, every host of the fleet listed."""
        return {host: self.stats.get(key, {}).get(host, 0) for host in HOSTS}

    def explain(self):
        failed = [(e['event_data'].get('host'), e['event_data'].get('task'),
                   e['event_data'].get('res', {}).get('msg')) for e in self.events if e['event'] == 'runner_on_failed']
        return 'status=%s rc=%s failed=%s\n%s' % (self.status, self.rc, failed, self.read('stdout')[-3000:])

    def check_consistent(self):
        """The recap per host agrees with the per-host events."""
        changed = sorted({e['event_data']['host'] for e in self.events
                          if e['event'] == 'runner_on_ok' and e['event_data']['res'].get('changed')})
        assert sorted(h for h, n in self.per_host('changed').items() if n) == changed
        assert sorted(self.stats['processed']) == HOSTS, self.explain()
        assert self.per_host('failures') == dict.fromkeys(HOSTS, 0) and self.per_host('dark') == dict.fromkeys(HOSTS, 0)


def runner_run(fleet, pdd, playbook, ident, env_extra=None):
    """``ansible-runner run`` on the controller namespace, as AWX's controller runs a job."""
    proc = fleet.ctl.exec([RUNNER, 'run', pdd, '-p', playbook + '.yml', '--ident', ident],
                          check=False, timeout=900, env=dict(runner_env(), **(env_extra or {})))
    job = Job(os.path.join(pdd, 'artifacts', ident))
    assert (proc.returncode, job.status, job.rc) == (0, 'successful', 0), job.explain() + proc.stderr[-2000:]
    return job


def runner_env():
    """The environment ansible-runner starts with: the test's own Ansible
    settings (netlab.ansible_env) left out, as on an AWX node."""
    env = {k: v for k, v in os.environ.items() if not k.startswith('ANSIBLE_')}
    env['PATH'] = netlab.VENV_BIN + os.pathsep + env.get('PATH', '/usr/sbin:/usr/bin:/sbin:/bin')
    env['LC_ALL'] = 'C.UTF-8'
    return env


def runner_stream(fleet, pdd, playbook, ident, status='successful', rc=0):
    """``ansible-runner transmit | worker | process``, as AWX sends a job to an
    execution node through receptor. The worker runs in a directory of its
    own and the processor in another: only the streams join them. The
    worker exits with the job's rc, the processor with 0 once it has
    written the artifacts."""
    work = os.path.join(fleet.dir, 'runner', ident + '-worker')
    controller = os.path.join(fleet.dir, 'runner', ident + '-controller')
    os.makedirs(controller)
    env = runner_env()
    transmit = netlab.run([RUNNER, 'transmit', pdd, '-p', playbook + '.yml', '--ident', ident], env=env)
    worker = subprocess.run(fleet.ctl.argv([RUNNER, 'worker', '--private-data-dir', work, '--delete']),
                            input=transmit.stdout.encode(), capture_output=True, timeout=900, env=env, check=False)
    assert worker.returncode == rc, worker.stderr.decode()[-3000:]
    assert not os.path.exists(work), 'the worker left its private data directory'
    proc = subprocess.run([RUNNER, 'process', controller, '--ident', ident], input=worker.stdout,
                          capture_output=True, timeout=300, env=env, check=False)
    job = Job(os.path.join(controller, 'artifacts', ident))
    assert (proc.returncode, job.status, job.rc) == (0, status, rc), job.explain() + proc.stderr.decode()[-2000:]
    return job, worker.stdout


def check_converged(fleet):
    for name in ('east-1', 'east-2'):
        assert returns(fleet.host(name)) == EAST
    assert returns(fleet.host('west-1')) == WEST_V4 and returns(fleet.host('west-1'), 6) == WEST_V6


def test_runner_run_site_then_audit_from_an_awx_private_data_dir(fleet):
    pdd = private_data_dir(fleet, 'site-run', 'site')
    job = runner_run(fleet, pdd, 'site', 'site-1')
    job.check_consistent()
    check_converged(fleet)
    # The artifacts AWX reads: the command run, the output, the events.
    assert {'command', 'rc', 'status', 'stdout', 'job_events'} <= set(os.listdir(job.dir))
    with open(os.path.join(job.dir, 'command'), encoding='utf-8') as handle:
        command = json.load(handle)['command']
    # The credential's key through an ssh-agent (the project names no key);
    # the inventory, the extra variables and the playbook as AWX passes them.
    assert command[:3] == ['ssh-agent', 'sh', '-c'], command
    assert ' -i %s/inventory -e @%s/env/extravars site.yml' % (pdd, pdd) in command[3], command
    assert job.host_results(APPLY_TASK) == dict.fromkeys(HOSTS, 'runner_on_ok')
    assert all(job.per_host('ok').values()), job.stats

    # The audit with the report's default path, ./snat-report, that is
    # $PWD/snat-report. ansible-runner runs the play in the project's folder
    # but hands on its own environment, PWD included; with a credential's
    # key it starts the play through ``ssh-agent sh -c``, and that shell
    # sets PWD to the project's folder: the report lands there, not in the
    # directory ansible-runner was started from. (Hence the docs' advice to
    # set ip_masq_report_path in a job template.)
    started_in = os.path.join(fleet.dir, 'started-here')
    os.makedirs(started_in)
    audit_pdd = private_data_dir(fleet, 'audit-run', 'audit', {'ip_masq_report_fail': True})
    audit = runner_run(fleet, audit_pdd, 'audit', 'audit-1', env_extra={'PWD': started_in})
    audit.check_consistent()
    # It only reads: what changed is the report, written once on the controller.
    assert sorted(e['event_data']['task'] for e in audit.events
                  if e['event'] == 'runner_on_ok' and e['event_data']['res'].get('changed')) == [
        'Write the report as JSON', 'Write the report as Markdown']
    assert os.listdir(started_in) == []
    with open(os.path.join(audit_pdd, 'project', 'snat-report.json'), encoding='utf-8') as handle:
        report = json.load(handle)
    assert os.path.exists(os.path.join(audit_pdd, 'project', 'snat-report.md'))
    assert report['off_policy_hosts'] == [] and sorted(report['hosts']) == HOSTS
    assert sorted(report['groups']) == ['cluster_east', 'cluster_west']


DOCKER_RULE = ['-s', '172.17.0.0/16', '!', '-o', 'docker0', '-j', 'MASQUERADE']
# The job template's extra variable for the report: the job's artifacts
# directory, which ansible-runner names in AWX_ISOLATED_DATA_DIR and which a
# worker streams back to the controller with the events.
IN_ARTIFACTS = "{{ lookup('ansible.builtin.env', 'AWX_ISOLATED_DATA_DIR') }}/snat-report"


def test_runner_transmit_worker_process_as_an_execution_node(fleet):
    west1, east2 = fleet.host('west-1'), fleet.host('east-2')
    # Drifted (a chain emptied), or not there yet when this test runs alone.
    west1.ns.exec(['iptables', '-w', '-t', 'nat', '-F', 'IP-MASQ-AGENT'], check=False)

    job, stream = runner_stream(fleet, private_data_dir(fleet, 'site-stream', 'site'), 'site', 'site-2')
    check_converged(fleet)
    job.check_consistent()
    assert job.per_host('changed')['west-1'] > 0
    assert job.host_results(APPLY_TASK) == dict.fromkeys(HOSTS, 'runner_on_ok')
    assert b'"zipfile"' in stream     # the artifacts came back in the stream

    # The audit as a gate: Docker's rule on east-2 fails that host (rc 2, the
    # job "failed"), and the report comes back with the artifacts.
    east2.ipt('-I', 'POSTROUTING', *DOCKER_RULE)
    try:
        pdd = private_data_dir(fleet, 'audit-gate', 'audit',
                               {'ip_masq_report_path': IN_ARTIFACTS, 'ip_masq_report_fail': True})
        gate, _stream = runner_stream(fleet, pdd, 'audit', 'audit-2', status='failed', rc=2)
        assert gate.per_host('failures') == {'east-1': 0, 'east-2': 1, 'west-1': 0}
        assert gate.per_host('dark') == dict.fromkeys(HOSTS, 0)
        failed = [e['event_data'] for e in gate.events if e['event'] == 'runner_on_failed']
        assert [(e['host'], e['task']) for e in failed] == [('east-2', 'Fail this host when it is off-policy (ip_masq_report_fail)')]
        assert 'docker SNAT rule' in failed[0]['res']['msg']
        with open(os.path.join(gate.dir, 'snat-report.json'), encoding='utf-8') as handle:
            report = json.load(handle)
        assert report['off_policy_hosts'] == ['east-2'] and sorted(report['hosts']) == HOSTS
        assert os.path.exists(os.path.join(gate.dir, 'snat-report.md'))
        assert not glob.glob(os.path.join(pdd, 'project', 'snat-report*'))
    finally:
        east2.ipt('-D', 'POSTROUTING', *DOCKER_RULE)
