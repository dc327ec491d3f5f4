"""The packet tests of the SNAT explanation (test_snat_explain*.py): each
answer sorted against the source the receiver saw (:class:`Sorted`)."""


class Sorted:
    """Answers sorted against what the packets did.  ``expected(flow,
    answer)`` is the source the receiver must see by an answer.

    ``ties``: base chains of equal priority that disagree (``unknown`` with
    ``candidates``), as ``(flow, reason)``; ``unknown``: the other unknown
    answers, as ``(flow, reason, source seen)``; ``wrong``: an answer the
    packet disagrees with (for a tie: the packet took none of the
    candidates), each after the caller's ``context``."""

    def __init__(self, expected):
        self.expected = expected
        self.ties, self.unknown, self.wrong = [], [], []

    def add(self, context, flow, answer, got):
        """Sort ``answer`` for ``flow`` by ``got``, the source the receiver saw."""
        if answer['verdict'] == 'unknown' and answer['candidates']:
            # Equal priority, different translations: the packet took one of them.
            self.ties.append((flow, answer['reason']))
            if got not in [self.expected(flow, c) for c in answer['candidates']]:
                self.wrong.append(tuple(context) + (flow, answer['msg'], answer['candidates'], 'receiver saw %s' % got))
        elif answer['verdict'] == 'unknown':
            self.unknown.append((flow, answer['reason'], got))
        elif got != self.expected(flow, answer):
            self.wrong.append(tuple(context) + (flow, answer['msg'], answer['decided_by'], 'receiver saw %s' % got))
