#!/usr/bin/env python3
"""Nothing outside runtime/ includes the runtime's private headers
(runtime/src): no build file outside runtime/ names that directory, only
tests/ links the white-box target hvdtune::internal_headers, and no source
outside runtime/ and tests/ includes a header that exists only in
runtime/src. Inside runtime/src, each library's folder (api/, core/, root/)
includes private headers only of its own folder and of the libraries it
links: api/ nothing of core/ or root/, core/ nothing of root/.
Usage: check_private_headers.py SOURCE_DIR"""
import os
import re
import sys

SOURCES = (".cc", ".h", ".c", ".cpp", ".hpp")
BUILD_FILES = ("CMakeLists.txt",)
SKIP_DIRS = {".git", "node_modules", "__pycache__"}
INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^">]+)[">]', re.M)
# The folders of runtime/src, one per library, and the private folders each
# may include (its own and those of the libraries it links).
LIBRARY_FOLDERS = {"api": {"api"}, "core": {"api", "core"},
                   "root": {"api", "core", "root"}}


def walk(root):
    for dirpath, dirnames, filenames in os.walk(root):
        rel = os.path.relpath(dirpath, root)
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and
                       not (rel == "." and (d.startswith("build") or
                                            d == "third_party"))]
        for f in filenames:
            yield os.path.join(dirpath, f), os.path.normpath(os.path.join(rel, f))


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = os.path.abspath(sys.argv[1])
    private_root = os.path.join(root, "runtime", "src")
    private = set()
    for path, _ in walk(private_root):
        if path.endswith(".h"):
            private.add(os.path.relpath(path, private_root))
    problems = []
    for path, rel in walk(private_root):
        folder = rel.split(os.sep)[0]
        if folder not in LIBRARY_FOLDERS:
            if path.endswith(SOURCES):
                folders = ", ".join(sorted(LIBRARY_FOLDERS))
                problems.append(f"runtime/src/{rel}: not in a library's "
                                f"folder ({folders})")
            continue
        if not path.endswith(SOURCES):
            continue
        text = open(path, encoding="utf-8", errors="replace").read()
        for inc in INCLUDE.findall(text):
            top = inc.split("/")[0]
            if (inc in private and top in LIBRARY_FOLDERS and
                    top not in LIBRARY_FOLDERS[folder]):
                problems.append(f"runtime/src/{rel}: includes {inc}, a header "
                                f"of a library above {folder}/")
    for path, rel in walk(root):
        top = rel.split(os.sep)[0]
        if top == "runtime" or rel == os.path.join("tests", os.path.basename(__file__)):
            continue
        name = os.path.basename(path)
        if name in BUILD_FILES or name.endswith(".cmake"):
            text = open(path, encoding="utf-8", errors="replace").read()
            if "runtime/src" in text:
                problems.append(f"{rel}: names runtime/src (link hvdtune::core or "
                                "hvdtune::runtime and include hvdtune/...)")
            if top != "tests" and "internal_headers" in text:
                problems.append(f"{rel}: links hvdtune::internal_headers "
                                "(white-box tests only)")
        elif name.endswith(SOURCES):
            text = open(path, encoding="utf-8", errors="replace").read()
            for inc in INCLUDE.findall(text):
                if "runtime/src" in inc:
                    problems.append(f"{rel}: includes {inc}")
                elif (top != "tests" and inc in private and not
                      os.path.exists(os.path.join(os.path.dirname(path), inc))):
                    problems.append(f"{rel}: includes the runtime's private "
                                    f"header {inc} (runtime/src/{inc})")
    if problems:
        print("private runtime headers used outside their library:",
              file=sys.stderr)
        for p in problems:
            print("  " + p, file=sys.stderr)
        return 1
    print(f"{len(private)} private runtime headers, each used only inside "
          "its library or by the white-box tests")
    return 0


if __name__ == "__main__":
    sys.exit(main())
