"""Explain many flows in one process, inside a node's network namespace:
the code the snat_explain module runs (``_explain.node.read``, once, then
``Reading.explain`` per flow), with the module's command runner replaced by
subprocess (argv lists, LC_ALL=C, as ``_module.runner``).  The flows as JSON on
stdin (``[{"src":..., "dst":..., "proto":..., "dport":..., "out_interface":...,
"mark":...}, ...]``); prints one JSON list of answers.  Run with the
collection on PYTHONPATH (``build/collections``)."""
import json
import os
import shutil
import subprocess
import sys

from ansible_collections.ipmasq.agent.plugins.module_utils._explain import flow as flows
from ansible_collections.ipmasq.agent.plugins.module_utils._explain.node import read

ENV = dict(os.environ, LC_ALL='C', LANG='C')


def run(argv, data=None):
    proc = subprocess.run(argv, input=data, capture_output=True, text=True, env=ENV, check=False, timeout=60)
    return proc.returncode, proc.stdout, proc.stderr


def find(name):
    return shutil.which(name) or shutil.which(name, path='/usr/sbin:/sbin')


def main():
    asked = json.load(sys.stdin)
    reading = read(run, find, 4)
    out = []
    for one in asked[:10000]:
        flow = flows.parse(one['src'], one['dst'], one.get('proto'), one.get('dport'), one.get('out_interface'),
                           one.get('mark'))
        out.append(reading.explain(flow))
    json.dump(out, sys.stdout)


if __name__ == '__main__':
    main()
