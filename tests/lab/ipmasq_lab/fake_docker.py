"""A restartable stand-in for Docker, in tests only: the docker CLI's
``network ls`` and ``network inspect`` answer for the default bridge as the
Docker started last (:func:`install`, :func:`restart`) runs it, from the
daemon.json it (re)started with: ``"ip-masq": false`` switches the bridge's
masquerading off (``com.docker.network.bridge.enable_ip_masquerade``), as
moby reads ``ip-masq`` only when it starts.  Nothing runs a daemon and
nothing writes a rule: a test that "restarts" Docker calls :func:`restart`
where the role's handler restarts ``docker.service``.

Everything lives in one directory of the test's (``bin_dir``): the CLI
``docker`` and ``started.json`` (the settings of the last start).
"""
import json
import os

BRIDGE_ID = 'f1e2d3c4b5a6' * 5 + 'abcd'

CLI = '''#!/usr/bin/python3
# The docker CLI of tests/lab/ipmasq_lab/fake_docker.py: the default bridge as the
# daemon.json of the last (re)start (started.json beside it) says.
import json, os, sys
with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'started.json')) as f:
    started = json.load(f)
masq = 'false' if started['config'].get('ip-masq') is False else 'true'
bridge = {'Name': 'bridge', 'Id': %(id)r, 'Driver': 'bridge', 'Scope': 'local', 'EnableIPv6': False,
          'IPAM': {'Driver': 'default', 'Options': None, 'Config': [{'Subnet': started['subnet']}]},
          'Options': {'com.docker.network.bridge.default_bridge': 'true',
                      'com.docker.network.bridge.enable_ip_masquerade': masq,
                      'com.docker.network.bridge.name': started['bridge']}, 'Labels': {}}
args = sys.argv[1:]
if args[:2] == ['network', 'ls']:
    print(bridge['Id'])
elif args[:2] == ['network', 'inspect'] and args[2:] and all(a in ('bridge', bridge['Id']) for a in args[2:]):
    print(json.dumps([bridge for _a in args[2:]], indent=4))
else:
    sys.stderr.write('fake docker: %%r is not answered here\\n' %% (args,))
    sys.exit(1)
''' % {'id': BRIDGE_ID}


def install(bin_dir, daemon_json, bridge='docker0', subnet='172.17.0.0/16'):
    """The CLI in ``bin_dir`` (its path returned), Docker started with
    ``daemon_json`` (a path) as it is now, its default bridge ``bridge`` on
    ``subnet``."""
    os.makedirs(bin_dir, exist_ok=True)
    cli = os.path.join(bin_dir, 'docker')
    with open(cli, 'w') as f:
        f.write(CLI)
    os.chmod(cli, 0o755)
    _start(bin_dir, daemon_json, bridge, subnet)
    return cli


def restart(bin_dir, daemon_json):
    """Docker restarted: it now runs with ``daemon_json`` as it is now (its
    bridge as before)."""
    with open(os.path.join(bin_dir, 'started.json')) as f:
        started = json.load(f)
    _start(bin_dir, daemon_json, started['bridge'], started['subnet'])


def masquerades(bin_dir):
    """Whether the running Docker masquerades its default bridge."""
    with open(os.path.join(bin_dir, 'started.json')) as f:
        return json.load(f)['config'].get('ip-masq') is not False


def _start(bin_dir, daemon_json, bridge, subnet):
    with open(daemon_json) as f:
        text = f.read()
    config = json.loads(text) if text.strip() else {}
    with open(os.path.join(bin_dir, 'started.json'), 'w') as f:
        json.dump({'config': config, 'bridge': bridge, 'subnet': subnet}, f)
