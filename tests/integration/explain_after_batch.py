"""Explain many flows "after the role" in one process, inside a node's
network namespace: the code the snat_explain module runs in after mode
(``_snat_explain.project`` once, then ``_explain.node.read`` through the
projection, then ``Reading.explain`` per flow), with the module's command
runner replaced by subprocess (argv lists, LC_ALL=C).  On stdin
``{"after": {...}, "flows": [...]}`` (``after`` as the module's option, the
flows as explain_batch.py takes them); prints one JSON list of answers.
Run with the collection on PYTHONPATH (``build/collections``)."""
import json
import sys

from explain_batch import find, run

from ansible_collections.ipmasq.agent.plugins.module_utils._explain import flow as flows
from ansible_collections.ipmasq.agent.plugins.module_utils._snat_explain import project
from ansible_collections.ipmasq.agent.plugins.module_utils._explain.node import read


def main():
    asked = json.load(sys.stdin)
    projection, _msg, _notes, chain = project(asked['after'], run, find)
    reading = read(projection, find, 4, chain=chain)
    out = []
    for one in asked['flows'][:10000]:
        flow = flows.parse(one['src'], one['dst'], one.get('proto'), one.get('dport'), one.get('out_interface'),
                           one.get('mark'))
        out.append(reading.explain(flow, chain))
    json.dump(out, sys.stdout)


if __name__ == '__main__':
    main()
