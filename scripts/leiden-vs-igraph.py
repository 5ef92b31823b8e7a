#!/usr/bin/python3
"""Side-by-side Leiden benchmark: kgstream (pkg/leiden via `kgstream leiden`)
against igraph's community_leiden, on the 100,000-node / 1,000,000-edge
planted-partition and Erdos-Renyi graphs of pkg/leiden's benchmarks.

Outside the product: a measuring tool for issue 3. Needs Go and Debian's
python3-igraph (apt-get install -y python3-igraph); run from the repository
root (/work/main):

    /usr/bin/python3 scripts/leiden-vs-igraph.py [--dir /tmp/leiden-bench]

What is timed:
  - igraph: the community_leiden call alone (graph construction is reported
    separately), objective "modularity", n_iterations 1 as the issue asks,
    and 2 for comparison with LEIDEN.md's reference figures.
  - kgstream: the `time` the CLI prints on stderr, which covers building the
    network (NewNetwork: label interning, CSR) plus the algorithm, but not
    parsing the TSV or writing the output; the whole process wall time and
    peak RSS are shown too.
Modularity: each tool's own figure, and igraph's Graph.modularity of
kgstream's (level-0) partition as an independent check.
"""

import argparse
import os
import random
import subprocess
import sys
import tempfile
import time

import igraph

GRAPHS = ("planted", "er")


def run(cmd, stdin_path=None, stdout_path=os.devnull, cwd=None):
    """Runs cmd, returns (wall seconds, peak RSS MiB, stderr text)."""
    with open(stdin_path or os.devnull, "rb") as fin, open(stdout_path, "wb") as fout, \
            tempfile.TemporaryFile() as ferr:
        start = time.perf_counter()
        p = subprocess.Popen(cmd, stdin=fin, stdout=fout, stderr=ferr, cwd=cwd)
        _, status, ru = os.wait4(p.pid, 0)
        wall = time.perf_counter() - start
        p.returncode = os.waitstatus_to_exitcode(status)
        ferr.seek(0)
        err = ferr.read().decode()
    if p.returncode != 0:
        sys.exit(f"{' '.join(cmd)} failed ({p.returncode}):\n{err}")
    return wall, ru.ru_maxrss / 1024, err


def parse_go_stderr(err):
    q = t = None
    for line in err.splitlines():
        if line.startswith("modularity"):
            q = float(line.split()[-1])
        elif line.startswith("time "):
            t = line.split(None, 1)[1]
    return q, t


def go_duration_seconds(s):
    """Parses a Go time.Duration string such as 1.234s, 950ms or 1m2.5s."""
    total, num = 0.0, ""
    units = {"h": 3600, "m": 60, "s": 1, "ms": 1e-3, "us": 1e-6, "µs": 1e-6, "ns": 1e-9}
    i = 0
    while i < len(s):
        c = s[i]
        if c.isdigit() or c == ".":
            num += c
            i += 1
            continue
        for u in ("ms", "us", "µs", "ns", "h", "m", "s"):
            if s.startswith(u, i):
                total += float(num) * units[u]
                num = ""
                i += len(u)
                break
        else:
            raise ValueError(f"bad duration {s!r}")
    return total


def load(path):
    names, edges = {}, []
    with open(path) as f:
        for line in f:
            a, b, _ = line.rstrip("\n").split("\t")
            ia = names.setdefault(a, len(names))
            ib = names.setdefault(b, len(names))
            edges.append((ia, ib))
    return names, edges


def membership_from(path, names, level0_only):
    memb = [0] * len(names)
    with open(path) as f:
        for line in f:
            fs = line.rstrip("\n").split("\t")
            if level0_only and fs[2] != "0":
                continue
            memb[names[fs[0]]] = int(fs[1])
    return memb


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", default=os.path.join(tempfile.gettempdir(), "leiden-bench"))
    ap.add_argument("--max-cluster-size", type=int, default=10)
    ap.add_argument("--igraph-iterations", default="1,2")
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)

    print("writing the benchmark graphs (pkg/leiden's generator) ...", flush=True)
    subprocess.run(["go", "run", "./pkg/leiden/internal/benchgraphs", "-out", args.dir], check=True,
                   stdout=subprocess.DEVNULL)
    binary = os.path.join(args.dir, "kgstream")
    print("building kgstream ...", flush=True)
    subprocess.run(["go", "build", "-o", binary, "./cmd/kgstream"], check=True)

    rows = []
    for name in GRAPHS:
        path = os.path.join(args.dir, name + ".edges.tsv")
        names, edges = load(path)
        t0 = time.perf_counter()
        g = igraph.Graph(n=len(names), edges=edges)
        build = time.perf_counter() - t0
        print(f"\n{name}: {g.vcount()} nodes, {g.ecount()} edges (igraph graph built in {build:.2f}s)", flush=True)

        for iters in [int(x) for x in args.igraph_iterations.split(",") if x]:
            random.seed(42)
            t0 = time.perf_counter()
            cl = g.community_leiden(objective_function="modularity", n_iterations=iters)
            took = time.perf_counter() - t0
            q = g.modularity(cl.membership)
            rows.append((name, f"igraph {igraph.__version__} community_leiden n_iterations={iters}", took, None, None, q, None,
                         len(set(cl.membership))))

        for flat in (True, False):
            out = os.path.join(args.dir, f"{name}.{'flat' if flat else 'hier'}.out.tsv")
            cmd = [binary, "leiden"] + (["--flat"] if flat else ["--max-cluster-size", str(args.max_cluster_size)])
            wall, rss, err = run(cmd, stdin_path=path, stdout_path=out)
            q, t = parse_go_stderr(err)
            memb = membership_from(out, names, level0_only=not flat)
            check = g.modularity(memb)
            label = "kgstream leiden --flat" if flat else f"kgstream leiden (hierarchical, mcs {args.max_cluster_size})"
            rows.append((name, label, go_duration_seconds(t), wall, rss, q, check, len(set(memb))))

    print()
    hdr = ("graph", "implementation", "algo s", "process s", "peak MiB", "modularity", "igraph Q of it", "clusters(l0)")
    print("| " + " | ".join(hdr) + " |")
    print("|" + "---|" * len(hdr))
    for r in rows:
        name, label, algo, wall, rss, q, check, k = r
        cells = [name, label, f"{algo:.2f}", f"{wall:.2f}" if wall else "-", f"{rss:.0f}" if rss else "-",
                 f"{q:.4f}", f"{check:.4f}" if check is not None else "-", str(k)]
        print("| " + " | ".join(cells) + " |")
    print("\nkgstream 'algo s' = the CLI's own time: NewNetwork + Leiden, excluding TSV parsing and output;"
          " igraph 'algo s' = community_leiden alone; 'process s' = whole CLI process (parse + build + run + write).")
    print(f"machine: {os.cpu_count()} CPUs; single-threaded runs", flush=True)


if __name__ == "__main__":
    main()
