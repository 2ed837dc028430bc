"""What a benchmark run's measurements mean: ratios against the Java metastore, the
targets met or missed, and the table and chart of the results."""

from __future__ import annotations

import json
from typing import Any


def percentile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    k = (len(sorted_vals) - 1) * q
    lo = int(k)
    hi = min(lo + 1, len(sorted_vals) - 1)
    return sorted_vals[lo] + (sorted_vals[hi] - sorted_vals[lo]) * (k - lo)


def ratios(cells: list[dict[str, Any]]) -> None:
    """Annotate each of our cells with ratios against the Java cell of the same workload/clients."""
    java = {(c["workload"], c["clients"]): c for c in cells
            if c["server"].startswith("java") and not c.get("error")}
    for c in cells:
        ref = java.get((c["workload"], c["clients"]))
        if c["server"].startswith("java") or not ref or c.get("error"):
            continue
        c["vs_java"] = {
            "throughput": c["ops_per_s"] / ref["ops_per_s"] if ref["ops_per_s"] else None,
            "p50": ref["p50_ms"] / c["p50_ms"] if c["p50_ms"] else None,
            "p99": ref["p99_ms"] / c["p99_ms"] if c["p99_ms"] else None,
        }


def _cell(cells, workload, server, clients):
    for c in cells:
        if c["workload"] == workload and c["server"] == server and c["clients"] == clients \
                and not c.get("error"):
            return c
    return None


def _java_cell(cells, workload, clients):
    """The Java metastore's cell (one Java server per run: on Derby or on PostgreSQL)."""
    for c in cells:
        if c["workload"] == workload and c["server"].startswith("java") \
                and c["clients"] == clients and not c.get("error"):
            return c
    return None


# Issue 31 (PostgreSQL): (workload, our server, its clients, goal: x Java throughput, or
# ops/s where there is no Java counterpart).
ISSUE31_TARGETS = (
    ("open_commit", "hms-postgres-x2", 16, 10.0, None),
    ("writer", "hms-postgres-x2", 16, 5.0, None),
    ("get_table", "hms-postgres-x2", 16, 5.0, None),
    ("get_table", "hms-postgres-x2-nocache", 16, 2.0, None),
    ("valid_write_ids", "hms-postgres-x2", 16, None, 1000.0),
    ("open_commit", "hms-postgres", 1, 5.0, None),
)


# Issue 42 (PostgreSQL, one statement per transaction call; Java on the same PostgreSQL).
ISSUE42_TARGETS = (
    ("open_commit", "hms-postgres-x2", 16, 2.5, None),
    ("writer", "hms-postgres-x2", 16, 2.0, None),
    ("open_commit", "hms-postgres", 1, 1.5, None),
    ("get_table", "hms-postgres-x2-nocache", 16, 3.0, None),
    ("valid_write_ids", "hms-postgres-x2", 16, None, 2000.0),
)


def issue31_targets(cells: list[dict[str, Any]],
                    table: tuple = ISSUE31_TARGETS) -> list[dict[str, Any]]:
    """Issue 31's targets (or another issue's ``table`` of the same form): two server
    processes on one PostgreSQL database with 16 clients spread over them, and one server
    with one client, against Java in the same run."""
    out = []
    for wl, server, n, times_java, ops_goal in table:
        c = _cell(cells, wl, server, n)
        if c is None:
            continue
        if ops_goal is not None:
            out.append({"target": f"{wl} ops/s, {n} clients", "server": server,
                        "measured": c["ops_per_s"], "goal": ops_goal,
                        "met": c["ops_per_s"] >= ops_goal, "detail": f"{c['ops_per_s']:.0f} ops/s"})
            continue
        ref = _java_cell(cells, wl, n)
        if ref is None or not ref["ops_per_s"]:
            continue
        ratio = c["ops_per_s"] / ref["ops_per_s"]
        out.append({"target": f"{wl} throughput x Java, {n} client(s)", "server": server,
                    "measured": ratio, "goal": times_java, "met": ratio >= times_java,
                    "detail": f"{c['ops_per_s']:.0f} vs {ref['ops_per_s']:.0f} ops/s "
                              f"({ref['server']})"})
    return out


def evaluate_targets(cells: list[dict[str, Any]], scale: list[dict[str, Any]],
                     max_rss_mb: float | None) -> list[dict[str, Any]]:
    """Issue 8's targets, on the embedded default (SQLite) and on PostgreSQL when measured."""
    out = []
    servers = sorted({c["server"] for c in cells if c["server"].startswith("hms-")
                      and not c["server"].endswith("-nocache")})

    def add(name, server, measured, goal, detail):
        out.append({"target": name, "server": server, "measured": measured, "goal": goal,
                    "met": (measured is not None and measured >= goal), "detail": detail})

    for s in servers:
        for wl, goal in (("open_commit", 20.0), ("writer", 10.0)):
            for n in (1, 16):
                c = _cell(cells, wl, s, n)
                if c and "vs_java" in c:
                    add(f"{wl} throughput x Java, {n} client(s)", s, c["vs_java"]["throughput"], goal,
                        f"{c['ops_per_s']:.0f} vs {_java_cell(cells, wl, n)['ops_per_s']:.0f} ops/s")
        c = _cell(cells, "get_table", s, 1)
        if c and "vs_java" in c:
            add("get_table cached p50 x Java, 1 client", s, c["vs_java"]["p50"], 5.0,
                f"{c['p50_ms']:.3f} vs {_java_cell(cells, 'get_table', 1)['p50_ms']:.3f} ms")
        for n in (8, 16):
            c = _cell(cells, "get_table", s, n)
            if c and "vs_java" in c:
                add(f"get_table cached throughput x Java, {n} clients", s, c["vs_java"]["throughput"],
                    5.0, f"{c['ops_per_s']:.0f} vs {_java_cell(cells, 'get_table', n)['ops_per_s']:.0f} ops/s")
        c, nc = _cell(cells, "get_table", s, 1), _cell(cells, "get_table", s + "-nocache", 1)
        if c and nc:
            add("get_table cached p50 x our uncached (issue 4)", s, nc["p50_ms"] / c["p50_ms"], 3.0,
                f"{c['p50_ms']:.3f} vs {nc['p50_ms']:.3f} ms")
        for wl in ("partitions_by_names", "add_partitions"):
            c = _cell(cells, wl, s, 1)
            if c and "vs_java" in c:
                add(f"{wl}(1000) p50 x Java, 1 client", s, c["vs_java"]["p50"], 3.0,
                    f"{c['p50_ms']:.1f} vs {_java_cell(cells, wl, 1)['p50_ms']:.1f} ms")
            many = max((c["clients"] for c in cells if c["workload"] == wl and c["server"] == s
                        and not c.get("error")), default=1)
            c = _cell(cells, wl, s, many) if many > 1 else None
            if c and "vs_java" in c:
                add(f"{wl}(1000) throughput x Java, {many} clients", s, c["vs_java"]["throughput"], 3.0,
                    f"{c['ops_per_s']:.2f} vs {_java_cell(cells, wl, many)['ops_per_s']:.2f} ops/s")
    # The memory target is about transaction history: RSS of our scale-curve servers.
    for sc in scale:
        if sc["server"].startswith("hms-") and sc.get("points"):
            top = max(p["rss_mb"] for p in sc["points"])
            txns = max(p["committed"] for p in sc["points"])
            short = "" if txns >= 1_000_000 else " (the target says 1e6; not measured that far)"
            out.append({"target": "server RSS < 300 MB through txn history", "server": sc["server"],
                        "measured": top, "goal": 300.0, "met": top < 300.0 and not short,
                        "detail": f"peak RSS along the scale curve up to {txns} committed txns"
                                  + short})
    if max_rss_mb is not None:
        out.append({"target": "server RSS < 300 MB, whole run (info)", "server": "hms-*",
                    "measured": max_rss_mb, "goal": 300.0, "met": max_rss_mb < 300.0,
                    "detail": "peak RSS of any of our servers in any cell, catalog workloads "
                              "included (concurrent add_partitions of 1,000 peak highest)"})
    return out


def format_table(cells: list[dict[str, Any]]) -> str:
    head = (f"{'workload':<20} {'server':<20} {'cl':>3} {'ops/s':>10} {'calls/s':>10} "
            f"{'p50 ms':>9} {'p99 ms':>9} {'srv cpu':>7} {'x java tput':>11} {'x java p50':>10}")
    lines = [head, "-" * len(head)]
    for c in cells:
        if c.get("error"):
            lines.append(f"{c['workload']:<20} {c['server']:<20} {c['clients']:>3}  ERROR: "
                         f"{c['error'].splitlines()[0][:120]}")
            continue
        vj = c.get("vs_java") or {}
        tp = f"{vj['throughput']:.1f}x" if vj.get("throughput") else "-"
        p50 = f"{vj['p50']:.1f}x" if vj.get("p50") else "-"
        cpu = f"{c['server_cpu_pct']:.0f}%" if c.get("server_cpu_pct") is not None else "-"
        lines.append(f"{c['workload']:<20} {c['server']:<20} {c['clients']:>3} {c['ops_per_s']:>10.1f} "
                     f"{c['calls_per_s']:>10.1f} {c['p50_ms']:>9.3f} {c['p99_ms']:>9.3f} {cpu:>7} "
                     f"{tp:>11} {p50:>10}")
    return "\n".join(lines)


def format_targets(targets: list[dict[str, Any]]) -> str:
    lines = []
    for tg in targets:
        m = tg["measured"]
        unit = "MB" if "RSS" in tg["target"] else "/s" if "ops/s" in tg["target"] else "x"
        shown = "n/a" if m is None else (f"{m:.0f} {unit}" if unit != "x" else f"{m:.1f}x")
        goal = (f"< {tg['goal']:.0f} MB" if unit == "MB"
                else f">= {tg['goal']:g}{'' if unit == 'x' else ' '}{unit}")
        lines.append(f"{'MET ' if tg['met'] else 'MISS'} {tg['target']:<48} {tg['server']:<16} "
                     f"{shown:>9} (goal {goal}; {tg['detail']})")
    return "\n".join(lines)


def chart(results: dict[str, Any], path: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = [c for c in results["cells"] if not c.get("error")]
    workloads = list(dict.fromkeys(c["workload"] for c in cells))
    servers = list(dict.fromkeys(c["server"] for c in cells))
    scale = results.get("scale") or []
    nrows = 3 if scale else 2
    fig, axes = plt.subplots(nrows, 1, figsize=(14, 5 * nrows))
    width = 0.8 / max(1, len(servers))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]

    ax = axes[0]
    for k, s in enumerate(servers):
        xs, p50, p99 = [], [], []
        for i, w in enumerate(workloads):
            c = _cell(cells, w, s, 1)
            if c:
                xs.append(i + k * width)
                p50.append(c["p50_ms"])
                p99.append(c["p99_ms"])
        ax.bar(xs, p50, width, label=f"{s} p50", color=colors[k % len(colors)])
        ax.scatter(xs, p99, marker="_", s=200, color="black", zorder=3,
                   label="p99" if k == 0 else None)
    if any(_cell(cells, w, s, 1) for w in workloads for s in servers):
        ax.set_yscale("log")    # (a log axis with no data at all cannot be drawn)
    else:
        ax.text(0.5, 0.5, "no 1-client cells in this run", ha="center", va="center",
                transform=ax.transAxes)
    ax.set_ylabel("latency per op, ms (log)")
    ax.set_title("Latency, 1 client (bar = p50, tick = p99)")
    ax.set_xticks([i + width * (len(servers) - 1) / 2 for i in range(len(workloads))])
    ax.set_xticklabels(workloads, rotation=15)
    if servers:   # a scale-only run has no cells to label
        ax.legend(fontsize=8, ncol=3)

    ax = axes[1]
    clients = sorted({c["clients"] for c in cells})
    labels = [(w, n) for w in workloads for n in clients
              if any(c["workload"] == w and c["clients"] == n for c in cells)]
    for k, s in enumerate(servers):
        xs, ys = [], []
        for i, (w, n) in enumerate(labels):
            c = _cell(cells, w, s, n)
            if c:
                xs.append(i + k * width)
                ys.append(c["ops_per_s"])
        ax.bar(xs, ys, width, label=s, color=colors[k % len(colors)])
    ax.set_yscale("log")
    ax.set_ylabel("ops/s (log)")
    ax.set_title("Throughput by number of client processes")
    ax.set_xticks([i + width * (len(servers) - 1) / 2 for i in range(len(labels))])
    ax.set_xticklabels([f"{w}\n{n} cl" for w, n in labels], fontsize=7, rotation=30)
    if servers:
        ax.legend(fontsize=8)

    if scale:
        ax = axes[2]
        for k, sc in enumerate(scale):
            pts = sc["points"]
            xs = [p["committed"] for p in pts]
            if not pts:
                continue
            for j, (key, style) in enumerate((("get_open_txns", "-o"), ("get_open_txns_1000_open", "--o"),
                                              ("get_valid_write_ids", "-s"),
                                              ("get_valid_write_ids_1000_open", "--s"))):
                if key in pts[0]:
                    ax.plot(xs, [p[key]["p50_ms"] for p in pts], style, label=f"{sc['server']} {key}",
                            color=plt.cm.tab20((4 * k + j) % 20))
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("committed transactions in history")
        ax.set_ylabel("p50 latency, ms (log)")
        ax.set_title("Scale curves (dashed: with 1,000 open transactions)")
        ax.legend(fontsize=7, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)




def emit_json(result: Any, out: str | None) -> None:
    """Print a result as JSON, and write it to ``out`` too when given."""
    text = json.dumps(result, indent=2)
    print(text)
    if out:
        with open(out, "w") as fh:
            fh.write(text + "\n")
