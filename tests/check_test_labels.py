#!/usr/bin/env python3
"""Every CTest entry of a build carries at least one label (the test tiers:
`ctest -L unit` is the fast tier). Usage: check_test_labels.py BUILD_DIR"""
import json
import subprocess
import sys


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    out = subprocess.run(["ctest", "--show-only=json-v1"], cwd=sys.argv[1],
                         check=True, capture_output=True, text=True).stdout
    tests = json.loads(out)["tests"]
    unlabelled = []
    for test in tests:
        props = {p["name"]: p["value"] for p in test.get("properties", [])}
        if not props.get("LABELS"):
            unlabelled.append(test["name"])
    if not tests:
        print("no tests found in " + sys.argv[1], file=sys.stderr)
        return 1
    if unlabelled:
        print(f"{len(unlabelled)} of {len(tests)} CTest entries have no LABELS "
              "(give each a tier: unit, mpi, python, telemetry, cli, bench, "
              "slow, ...):", file=sys.stderr)
        for name in unlabelled:
            print("  " + name, file=sys.stderr)
        return 1
    print(f"all {len(tests)} CTest entries are labelled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
