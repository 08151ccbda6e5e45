#!/usr/bin/env python3
"""The workloads library sits between the runtime and its two users:
bench/ and tools/ both link workloads/ (hvdtune::workloads, hvdtune::svg),
tools/ never includes a header of bench/ or links a target defined under
bench/, workloads/ links and includes nothing of bench/ or tools/, and no
library of the runtime (runtime/, tuner/, store/, metrics/, timeline/,
python/) links or includes workloads/.
Usage: check_workloads_links.py SOURCE_DIR"""
import os
import re
import sys

SOURCES = (".cc", ".h", ".c", ".cpp", ".hpp")
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)
DEFINE = re.compile(r'\badd_(?:library|executable)\s*\(\s*([A-Za-z0-9_.+-]+)')
LINK = re.compile(r'\btarget_link_libraries\s*\(([^)]*)\)', re.S)
LIBRARIES = ("runtime", "tuner", "store", "metrics", "timeline", "python")
WORKLOADS_TARGETS = {"hvdtune_workloads", "hvdtune::workloads", "hvdtune_svg",
                     "hvdtune::svg"}


def files(root, top):
    for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        for f in filenames:
            yield os.path.join(dirpath, f)


def read(path):
    return open(path, encoding="utf-8", errors="replace").read()


def strip_comments(cmake):
    return re.sub(r'#[^\n]*', '', cmake)


def linked(cmake_text):
    """Every name in the target_link_libraries calls of a CMake file."""
    names = set()
    for args in LINK.findall(strip_comments(cmake_text)):
        names.update(args.split())
    return names


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    rel = lambda p: os.path.relpath(p, root)
    bench_targets = set()
    bench_headers = set()
    for path in files(root, "bench"):
        if os.path.basename(path) == "CMakeLists.txt":
            bench_targets.update(DEFINE.findall(strip_comments(read(path))))
        elif path.endswith((".h", ".hpp")):
            bench_headers.add(os.path.basename(path))
    problems = []
    # tools/: no bench target linked, no bench header included, no bench/
    # folder on an include path.
    for path in files(root, "tools"):
        name = os.path.basename(path)
        if name == "CMakeLists.txt" or name.endswith(".cmake"):
            text = read(path)
            for target in sorted(linked(text) & bench_targets):
                problems.append(f"{rel(path)}: links {target}, a target of "
                                "bench/ (link hvdtune::workloads instead)")
            if re.search(r'include_directories\s*\([^)]*bench',
                         strip_comments(text)):
                problems.append(f"{rel(path)}: puts a bench/ folder on an "
                                "include path")
        elif name.endswith(SOURCES):
            for inc in INCLUDE.findall(read(path)):
                local = os.path.join(os.path.dirname(path), inc)
                if "bench/" in inc or (os.path.basename(inc) in bench_headers
                                       and not os.path.exists(local)):
                    problems.append(f"{rel(path)}: includes {inc}, a header "
                                    "of bench/")
    # workloads/: nothing of bench/ or tools/.
    for path in files(root, "workloads"):
        name = os.path.basename(path)
        if name == "CMakeLists.txt":
            for target in sorted(linked(read(path)) & bench_targets):
                problems.append(f"{rel(path)}: links {target}, a target of "
                                "bench/")
            for target in sorted(linked(read(path))):
                if "hvd_tune" in target or target == "hvd-tune":
                    problems.append(f"{rel(path)}: links {target} of tools/")
        elif name.endswith(SOURCES):
            for inc in INCLUDE.findall(read(path)):
                if (os.path.basename(inc) in bench_headers or
                        "bench/" in inc or "tools/" in inc):
                    problems.append(f"{rel(path)}: includes {inc}")
    # The runtime's libraries never depend on the workloads.
    for top in LIBRARIES:
        for path in files(root, top):
            name = os.path.basename(path)
            if name == "CMakeLists.txt":
                for target in sorted(linked(read(path)) & WORKLOADS_TARGETS):
                    problems.append(f"{rel(path)}: links {target}: the "
                                    "runtime never depends on workloads/")
            elif name.endswith(SOURCES):
                for inc in INCLUDE.findall(read(path)):
                    if inc.startswith("hvdtune/workloads/"):
                        problems.append(f"{rel(path)}: includes {inc}")
    if problems:
        print("workloads/ layering broken:", file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    print(f"tools/ uses none of bench/'s {len(bench_targets)} targets and "
          f"{len(bench_headers)} headers; workloads/ stands between them")
    return 0


if __name__ == "__main__":
    sys.exit(main())
