"""Benchmark of the ipmasq.agent CIDR filters on 10,000 CIDRs (not a test: no assertions).

    .venv/bin/python bench/bench_filters.py

The input is deterministic and shaped like a large real inventory: IPv4
clusters with adjacent halves, subnets inside other entries, repeats written
differently (spaces, upper case), and IPv6 prefixes mixed in. Each operation
runs REPEATS times; the table shows the best wall-clock time.
"""
from __future__ import annotations

import ipaddress
import os
import random
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, 'build', 'collections'))

# pylint: disable=wrong-import-position
import netaddr  # noqa: E402

from ansible_collections.ipmasq.agent.plugins.filter.cidr_aggregate import cidr_aggregate  # noqa: E402
from ansible_collections.ipmasq.agent.plugins.filter.cidr_aggregate_report import cidr_aggregate_report  # noqa: E402
from ansible_collections.ipmasq.agent.plugins.filter.cidr_list import cidr_list  # noqa: E402
from ansible_collections.ipmasq.agent.plugins.filter.cidr_overlaps import cidr_overlaps  # noqa: E402
from ansible_collections.ipmasq.agent.plugins.filter.cidr_split import cidr_split  # noqa: E402
from ansible_collections.ipmasq.agent.plugins.filter.nonmasq_guard import nonmasq_guard  # noqa: E402
from ansible_collections.ipmasq.agent.plugins.test.cidr import cidr as is_cidr  # noqa: E402

SIZE = 10_000
REPEATS = 5
SEED = 20261121


def _net4(first, plen):
    return ipaddress.IPv4Network((first, plen))


def make_cidrs(size: int = SIZE, seed: int = SEED) -> list[str]:
    """size CIDR strings, about 80% IPv4 and 20% IPv6, deterministic."""
    rng = random.Random(seed)
    sites4 = [ipaddress.IPv4Network(f'10.{i * 4}.0.0/14') for i in range(48)] + \
             [ipaddress.IPv4Network(f'172.{16 + i}.0.0/16') for i in range(16)] + \
             [ipaddress.IPv4Network(f'{rng.randrange(1, 223)}.{rng.randrange(256)}.0.0/16') for _site in range(64)]
    sites6 = [ipaddress.IPv6Network(f'2001:db8:{i:x}::/48') for i in range(32)] + \
             [ipaddress.IPv6Network(f'fd{i:02x}::/16') for i in range(8)]
    out: list[str] = []

    def random_in(site, low, high):
        plen = rng.randint(max(site.prefixlen, low), high)
        bits = site.max_prefixlen
        offset = rng.randrange(site.num_addresses) & ~((1 << (bits - plen)) - 1)
        return ipaddress.ip_network((int(site.network_address) + offset, plen))

    while len(out) < size:
        roll = rng.random()
        if roll < 0.80 * 0.55:                      # a plain IPv4 subnet of a site
            out.append(str(random_in(rng.choice(sites4), 18, 30)))
        elif roll < 0.80 * 0.75:                    # two adjacent halves of one block
            block = random_in(rng.choice(sites4), 18, 28)
            out.extend(str(half) for half in block.subnets(1))
        elif roll < 0.80 * 0.90 and out:            # inside an earlier IPv4 entry
            parent = ipaddress.ip_network(rng.choice(out).strip())
            if parent.version == 4 and parent.prefixlen < 32:
                out.append(str(random_in(parent, parent.prefixlen + 1, 32)))
        elif roll < 0.80 and out:                   # a repeat, written differently
            text = rng.choice(out).strip()
            out.append(rng.choice([text, f' {text}', f'{text} ', text.upper()]))
        else:                                       # IPv6
            net = random_in(rng.choice(sites6), 40, 64)
            out.append(rng.choice([str(net), str(net).upper(), f'{net.network_address.exploded}/{net.prefixlen}']))
    return out[:size]


def _best(func, repeats: int):
    best = float('inf')
    result = None
    for _round in range(repeats):
        start = time.perf_counter()
        result = func()
        best = min(best, time.perf_counter() - start)
    return best, result


def run(size: int = SIZE, repeats: int = REPEATS) -> list[dict]:
    """Time each operation; rows of operation, n_in, n_out, seconds (best of repeats), repeats."""
    cidrs = make_cidrs(size)
    normalised = cidr_list(cidrs, duplicates='drop')
    others = normalised[::10]
    stripped = [c.strip() for c in cidrs]
    cases = [
        ('cidr_list (validate + normalise, duplicates=drop)', len(cidrs),
         lambda: cidr_list(cidrs, duplicates='drop'), len),
        ('nonmasq_guard (cidr_list + catch-all check)', len(cidrs),
         lambda: nonmasq_guard(cidrs, duplicates='drop'), len),
        ('cidr_split', len(normalised), lambda: cidr_split(normalised), lambda r: len(r['ipv4']) + len(r['ipv6'])),
        ('cidr_aggregate', len(cidrs), lambda: cidr_aggregate(cidrs), len),
        ('cidr_aggregate_report', len(cidrs), lambda: cidr_aggregate_report(cidrs), lambda r: r['output_count']),
        ('cidr_overlaps (vs every 10th entry; N out = pairs)', len(normalised),
         lambda: cidr_overlaps(normalised, others), lambda r: len(r['overlaps'])),
        ("select('ipmasq.agent.cidr') (the test plugin)", len(cidrs),
         lambda: [c for c in cidrs if is_cidr(c)], len),
        ('netaddr.cidr_merge (reference: no validation, no report)', len(stripped),
         lambda: netaddr.cidr_merge(stripped), len),
    ]
    rows = []
    for name, n_in, func, count in cases:
        seconds, result = _best(func, repeats)
        rows.append({'operation': name, 'n_in': n_in, 'n_out': count(result), 'seconds': seconds, 'repeats': repeats})
    return rows


def main() -> None:
    rows = run()
    print(f'{SIZE} CIDRs (seed {SEED}), Python {sys.version.split()[0]}, netaddr {netaddr.__version__}\n')
    print(f'| operation | N in | N out | seconds (best of {REPEATS}) |')
    print('|---|---:|---:|---:|')
    for row in rows:
        print(f"| {row['operation']} | {row['n_in']} | {row['n_out']} | {row['seconds']:.4f} |")


if __name__ == '__main__':
    main()
