#!/usr/bin/python3
"""The tuner-at-scale table of docs/simulator.md from `cluster_sim`'s text
output (stdin): one Markdown row per scenario, with the targets at 20
samples (median regret <= 3%, p90 <= 10%, hvdtune's median below both
baselines', random and horovod_style), then the counts.

  build/bench/sim/cluster_sim --seeds 30 --jobs 2 | bench/sim/regret_table.py
"""
import re
import sys

HEAD = re.compile(r"^(\S+): (\d+) x (\d+) = (\d+) ranks, (\S+), (\S+), noise "
                  r"(\d+)%; best/default ([0-9.]+)x, ([0-9.]+)% of the space")
LINE = re.compile(r"^  (\S+)\s+@10: ([0-9.]+) / ([0-9.]+)\s+@20: ([0-9.]+) / "
                  r"([0-9.]+)\s+@40: ([0-9.]+) / ([0-9.]+)")


def main():
    rows, current = [], None
    for line in sys.stdin:
        m = HEAD.match(line)
        if m:
            current = {"head": m.groups(), "opt": {}}
            rows.append(current)
            continue
        m = LINE.match(line)
        if m and current is not None:
            current["opt"][m.group(1)] = [float(x) for x in m.groups()[1:]]
    if not rows:
        sys.exit("regret_table: no scenario in the input")
    print("| scenario | ranks (N x G) | preset | workload | noise | best / "
          "default | good region | hvdtune @10 | hvdtune @20 | hvdtune @40 | "
          "random @20 | horovod_style @20 | default | targets @20 |")
    print("|---" * 14 + "|")
    med_ok = p90_ok = below = every = 0
    for r in rows:
        name, n, g, ranks, preset, workload, noise, gain, good = r["head"]
        h, rnd = r["opt"]["hvdtune"], r["opt"]["random"]
        hs, d = r["opt"]["horovod_style"], r["opt"]["default"]
        ok = (h[2] <= 0.03, h[3] <= 0.10, h[2] < rnd[2] and h[2] < hs[2])
        med_ok += ok[0]
        p90_ok += ok[1]
        below += ok[2]
        every += all(ok)
        words = ["median ok" if ok[0] else "**median not**",
                 "p90 ok" if ok[1] else "**p90 not**",
                 "below both" if ok[2] else "**not below both**"]
        print("| %s | %s (%s x %s) | %s | %s | %s%% | %.2fx | %s%% | %.4f / %.3f "
              "| %.4f / %.3f | %.4f / %.3f | %.4f / %.3f | %.4f / %.3f | %.4f | "
              "%s |" % (name, ranks, n, g, preset, workload, noise, float(gain),
                        good, h[0], h[1], h[2], h[3], h[4], h[5], rnd[2], rnd[3],
                        hs[2], hs[3], d[2], ", ".join(words)))
    k = len(rows)
    print("\nmedian <= 3%%: %d/%d; p90 <= 10%%: %d/%d; below both baselines: "
          "%d/%d; all three: %d/%d" % (med_ok, k, p90_ok, k, below, k, every, k))


if __name__ == "__main__":
    main()
