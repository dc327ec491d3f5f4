"""The site play in the collection's execution environment, as AWX and
Automation Platform run a job: ``ansible-runner run --process-isolation
--container-image``, podman running the image built by tests/ee.sh (with
ansible-builder, from tests/ee/execution-environment.yml: the collection's
meta/execution-environment.yml brings in netaddr).

tests/ee.sh builds the image and then runs this file with IMQ_EE_IMAGE set;
without it every test here is skipped (the README's test command runs
tests/ee.sh as a step of its own; SKIP_EE=1 leaves it out).

Networking: podman runs inside the fleet's controller namespace (entered
with nsenter, which leaves the mounts podman needs as they are) and the
container shares it (``--network=host`` there): it reaches the fleet's
sshd hosts over the fleet's bridge, and podman's network backend has
nothing to set up in any namespace.

The job's project carries this tree's collection in
``requirements_collections`` (as AWX installs a project's
collections/requirements.yml), which ansible-runner's container finds
before the one built into the image: the image is rebuilt only when its
recipe changes, and the test runs the code of this tree.
"""
import os
import shutil

import pytest

from ipmasq_lab import fleetlab, netlab
from test_runner_awx import APPLY_TASK, HOSTS, RUNNER, Job, check_converged, private_data_dir, runner_env

IMAGE = os.environ.get('IMQ_EE_IMAGE')
IN_IMAGE = '/usr/share/ansible/collections'
BASE_IMAGE = 'localhost/ipmasq-ee-base:bookworm'

pytestmark = pytest.mark.skipif(not IMAGE, reason='run by tests/ee.sh, which builds the execution environment first')


@pytest.fixture(scope='module')
def fleet():
    with fleetlab.Fleet() as made:
        yield made


def in_ns(ns, argv):
    """``argv`` in ``ns``'s network namespace, nothing else changed."""
    return ['nsenter', '--net=/run/netns/%s' % ns.name, '--'] + list(argv)


def podman(fleet, *args):
    return netlab.run(in_ns(fleet.ctl, ['podman'] + list(args)), timeout=300)


def test_the_image_holds_the_collection_and_what_its_meta_names(fleet):
    # netaddr: not in the base image, not named in the definition: found by
    # ansible-builder in the collection's meta/execution-environment.yml.
    base = podman(fleet, 'image', 'inspect', '--format', '{{ .Config.Labels }}', IMAGE).stdout
    assert 'io.ipmasq.recipe' in base    # built on tests/ee.sh's base image
    proc = netlab.run(in_ns(fleet.ctl, ['podman', 'run', '--rm', '--network=host', BASE_IMAGE, 'python3', '-c',
                                        'import netaddr']), check=False, timeout=300)
    assert proc.returncode == 1 and "No module named 'netaddr'" in proc.stderr, proc
    out = podman(fleet, 'run', '--rm', '--network=host', IMAGE, 'python3', '-c',
                 'import ansible, ansible_runner, netaddr; print(ansible.__version__)').stdout
    assert out.strip().startswith('2.')
    out = podman(fleet, 'run', '--rm', '--network=host', IMAGE, 'ansible-galaxy', 'collection', 'list',
                 'ipmasq.agent', '-p', IN_IMAGE).stdout
    assert 'ipmasq.agent' in out
    out = podman(fleet, 'image', 'inspect', '--format', '{{ index .Config.Labels "ansible-execution-environment" }}',
                 IMAGE).stdout
    assert out.strip() == 'true'


def test_site_play_in_the_execution_environment(fleet):
    west1 = fleet.host('west-1')
    west1.ns.exec(['iptables', '-w', '-t', 'nat', '-F', 'IP-MASQ-AGENT'], check=False)
    pdd = private_data_dir(fleet, 'site-ee', 'site', base='/runner', envvars={
        # AWX's order: the project's collections first, then the image's.
        'ANSIBLE_COLLECTIONS_PATH': '/runner/requirements_collections:' + IN_IMAGE,
        'ANSIBLE_HOME': '/runner/.ansible',
    })
    netlab.run([os.path.join(netlab.VENV_BIN, 'ansible-galaxy'), 'collection', 'install', '--no-deps', '--force',
                '-p', os.path.join(pdd, 'requirements_collections'), netlab.ROOT],
               env=dict(runner_env(), ANSIBLE_HOME=os.path.join(fleet.dir, 'ansible-home')), timeout=300)
    ident = 'site-ee'
    # --user=0: the image's user (1000, as ansible-builder leaves it) could
    # not read the job's directory, which this root shell made 0700 (AWX's
    # rootless podman maps its own user instead).
    argv = [RUNNER, 'run', pdd, '-p', 'site.yml', '--ident', ident,
            '--process-isolation', '--process-isolation-executable', 'podman',
            '--container-image', IMAGE, '--container-option=--network=host', '--container-option=--user=0']
    try:
        proc = netlab.run(in_ns(fleet.ctl, argv), check=False, timeout=400, env=runner_env())
    finally:
        # A run stopped by the timeout leaves its container behind.
        netlab.run(in_ns(fleet.ctl, ['podman', 'rm', '--force', '--time', '0', 'ansible_runner_' + ident]), check=False)
    job = Job(os.path.join(pdd, 'artifacts', ident))
    assert (proc.returncode, job.status, job.rc) == (0, 'successful', 0), job.explain() + proc.stderr[-2000:]
    job.check_consistent()
    check_converged(fleet)
    assert job.host_results(APPLY_TASK) == dict.fromkeys(HOSTS, 'runner_on_ok')
    assert job.per_host('changed')['west-1'] > 0
    # In the container, from the project's copy of the collection.
    paths = {e['event_data'].get('task_path', '') for e in job.events if e['event'] == 'runner_on_ok'}
    assert paths and all(p.startswith('/runner/requirements_collections/ansible_collections/ipmasq/agent/') for p in paths), paths
    with open(os.path.join(job.dir, 'command'), encoding='utf-8') as handle:
        command = handle.read()
    assert '"podman", "run"' in command and IMAGE in command
    # Nothing of the container is left in the namespace.
    assert podman(fleet, 'ps', '-aq', '--filter', 'name=ansible_runner_' + ident).stdout.strip() == ''
    shutil.rmtree(os.path.join(pdd, 'requirements_collections'), ignore_errors=True)
