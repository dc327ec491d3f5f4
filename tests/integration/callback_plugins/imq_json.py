# Test-only stdout callback: prints every task result as one JSON document
# (the layout of the json callback, which ansible-core no longer ships).
from __future__ import annotations

import json

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = '''
name: imq_json
type: stdout
short_description: Task results as JSON, for the ipmasq.agent tests
description: Prints one JSON document with every task result when the run ends.
'''


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = 'stdout'
    CALLBACK_NAME = 'imq_json'

    def __init__(self):
        super().__init__()
        self.plays = []

    def v2_playbook_on_play_start(self, play):
        self.plays.append({'play': {'name': play.get_name()}, 'tasks': []})

    def _record(self, result, **extra):
        host = result._host.get_name()
        data = dict(result._result)
        data.update(extra)
        tasks = self.plays[-1]['tasks']
        name = result._task.get_name()
        if not tasks or tasks[-1]['task']['uuid'] != result._task._uuid:
            tasks.append({'task': {'name': name, 'uuid': result._task._uuid}, 'hosts': {}})
        tasks[-1]['hosts'][host] = data

    def v2_runner_on_ok(self, result):
        self._record(result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._record(result, failed=True)

    def v2_runner_on_skipped(self, result):
        self._record(result, skipped=True)

    def v2_runner_on_unreachable(self, result):
        self._record(result, unreachable=True, failed=True)

    def v2_playbook_on_stats(self, stats):
        recap = {host: stats.summarize(host) for host in sorted(stats.processed)}
        self._display.display(json.dumps({'plays': self.plays, 'stats': recap}, default=str))
