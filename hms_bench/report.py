"""Render a ``results.json`` of ``hms-txn bench`` as Markdown (for docs/benchmarks.md).

    python -m hms_bench.report bench-results/results.json > table.md
"""

from __future__ import annotations

import json
import sys
from typing import Any


def _f(x: Any, fmt: str) -> str:
    if x is None or (isinstance(x, float) and x != x):
        return "-"
    return format(x, fmt)


def cells_markdown(results: dict[str, Any]) -> str:
    rows = ["| workload | server | clients | ops/s | calls/s | p50 ms | p99 ms | × Java ops/s | "
            "× Java p50 | server CPU | machine CPU | errors |",
            "|---|---|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|"]
    for c in results["cells"]:
        if c.get("error"):
            rows.append(f"| {c['workload']} | {c['server']} | {c['clients']} | "
                        f"error: {c['error'].splitlines()[0][:100]} ||||||||| ")
            continue
        vj = c.get("vs_java") or {}
        rows.append(
            f"| {c['workload']} | {c['server']} | {c['clients']} | "
            f"{_f(c['ops_per_s'], '.1f' if c['ops_per_s'] >= 10 else '.2f')} | "
            f"{_f(c['calls_per_s'], '.0f')} | {_f(c['p50_ms'], '.3f')} | {_f(c['p99_ms'], '.2f')} | "
            f"{_f(vj.get('throughput'), '.1f')}{'×' if vj.get('throughput') else ''} | "
            f"{_f(vj.get('p50'), '.1f')}{'×' if vj.get('p50') else ''} | "
            f"{_f(c.get('server_cpu_pct'), '.0f')}% | {_f(c.get('machine_cpu_pct'), '.0f')}% | "
            f"{c['errors']}{' (' + c['first_error'][:60] + ')' if c.get('first_error') else ''} |")
    return "\n".join(rows)


def targets_markdown(results: dict[str, Any]) -> str:
    rows = ["| target | server | measured | goal | met | detail |", "|---|---|--:|--:|:-:|---|"]
    for t in results.get("targets", []):
        rss = "RSS" in t["target"]
        m = t["measured"]
        shown = "-" if m is None else (f"{m:.0f} MB" if rss else f"{m:.1f}×")
        goal = f"< {t['goal']:.0f} MB" if rss else f"≥ {t['goal']:g}×"
        rows.append(f"| {t['target']} | {t['server']} | {shown} | {goal} | "
                    f"{'yes' if t['met'] else '**no**'} | {t['detail']} |")
    return "\n".join(rows)


def scale_markdown(results: dict[str, Any]) -> str:
    rows = ["| server | committed txns | get_open_txns p50 / p99 ms | same, 1e3 open | "
            "get_valid_write_ids(10) p50 / p99 ms | same, 1e3 open | server RSS MB |",
            "|---|--:|--:|--:|--:|--:|--:|"]
    for sc in results.get("scale", []):
        if sc.get("error"):
            rows.append(f"| {sc['server']} | error: {sc['error'][:100]} ||||||")
        for p in sc["points"]:
            def pair(key):
                v = p.get(key)
                return f"{v['p50_ms']:.2f} / {v['p99_ms']:.2f}" if v else "-"
            rows.append(f"| {sc['server']} | {p['committed']} | {pair('get_open_txns')} | "
                        f"{pair('get_open_txns_1000_open')} | {pair('get_valid_write_ids')} | "
                        f"{pair('get_valid_write_ids_1000_open')} | {p['rss_mb']:.0f} |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print(__doc__, file=sys.stderr)
        return 2
    with open(argv[0]) as f:
        results = json.load(f)
    from hms_bench.runner import evaluate_targets, ratios
    ratios(results["cells"])
    rss = [c["server_rss_mb"] for c in results["cells"]
           if c["server"].startswith("hms-") and c.get("server_rss_mb")]
    results["targets"] = evaluate_targets(results["cells"], results.get("scale", []),
                                          max(rss) if rss else None)
    print(cells_markdown(results))
    print()
    print(targets_markdown(results))
    print()
    print(scale_markdown(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
