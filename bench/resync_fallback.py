"""One resync cycle the plain way, for when the node-side entry point
(plugins/module_utils/_masq_resync.py) is not there: a fresh Python process
that imports the core and calls sync() once with subprocess/shutil.which.

    PYTHONPATH=build/collections python3 bench/resync_fallback.py CIDRS.json

CIDRS.json holds the list of non-masquerade CIDRs.  Run by bench/node_cycle.py
inside a benchmark namespace; prints {"changed": ...}.
"""
import json
import shutil
import subprocess
import sys

from ansible_collections.ipmasq.agent.plugins.module_utils._masq import MasqError, Policy, sync


def run(argv, data=None):
    proc = subprocess.run(argv, input=data, capture_output=True, text=True, check=False)
    return proc.returncode, proc.stdout, proc.stderr


def main(path):
    with open(path, encoding='utf-8') as handle:
        cidrs = json.load(handle)
    try:
        result = sync(Policy(nonmasquerade_cidrs=cidrs, cidr_limit=None), run=run, find=shutil.which)
    except MasqError as exc:
        sys.stderr.write('%s\n' % exc.msg)
        return 1
    sys.stdout.write(json.dumps({'changed': result['changed']}) + '\n')
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1]))
