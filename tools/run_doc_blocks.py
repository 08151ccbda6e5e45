#!/usr/bin/env python3
"""Checks that the manual is true: runs the shell blocks of README.md and
docs/*.md that are marked runnable, and compares the configuration reference
in docs/configuration.md with what `hvd-tune knobs --markdown` prints; and
turns the C, C++ and Python examples marked `<!-- compiles -->` into programs
(tests/downstream builds and runs the C and C++ ones against the installed
package; the runnable check compiles the Python ones and resolves every
`hvd.NAME` they use in the module they import as hvd).

A block is marked by an HTML comment on the line before its fence:

    <!-- runnable -->
    ```sh
    build/tools/hvd_tune/hvd-tune knobs --json
    ```

`<!-- runnable requires=PATH -->` skips the block when PATH (relative to the
build directory) does not exist. Each block runs with `bash -euo pipefail`
from a scratch directory that mirrors the source tree (symbolic links to its
top-level entries) with `build` pointing at the build under test, so the
commands run as written from a checkout's root; HOME and TMPDIR point into
the scratch directory, so nothing outside it is written.

Exit status: 0 when every check passed, 1 when one failed, 2 on bad usage.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

MARKER = re.compile(r"^<!--\s*runnable(?:\s+requires=(\S+))?\s*-->\s*$")
FENCE_OPEN = re.compile(r"^```(sh|bash)\s*$")
EXAMPLE_MARKER = re.compile(r"^<!--\s*compiles\s*-->\s*$")
EXAMPLE_FENCE = re.compile(r"^```(cpp|c|python)\s*$")
REF_BEGIN = "<!-- config-reference:begin -->\n"
REF_END = "<!-- config-reference:end -->"


def pages(source):
    """README.md, then docs/*.md in name order."""
    out = [os.path.join(source, "README.md")]
    docs = os.path.join(source, "docs")
    if os.path.isdir(docs):
        out += sorted(
            os.path.join(docs, n) for n in os.listdir(docs) if n.endswith(".md"))
    return [p for p in out if os.path.isfile(p)]


def runnable_blocks(path):
    """(line number, requires, text) of every block marked runnable.

    A marker that is not followed by a sh/bash fence, or a block that is
    never closed, is an error: a marker must not silently mark nothing."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks = []
    i = 0
    while i < len(lines):
        m = MARKER.match(lines[i])
        if not m:
            i += 1
            continue
        if i + 1 >= len(lines) or not FENCE_OPEN.match(lines[i + 1]):
            raise ValueError(
                f"{path}:{i + 1}: a runnable marker must be followed by a "
                "```sh or ```bash fence")
        body = []
        j = i + 2
        while j < len(lines) and lines[j].rstrip() != "```":
            body.append(lines[j])
            j += 1
        if j >= len(lines):
            raise ValueError(f"{path}:{i + 2}: the runnable block is never "
                             "closed")
        blocks.append((i + 2, m.group(1), "\n".join(body) + "\n"))
        i = j + 1
    return blocks


def example_blocks(path):
    """(line number, language, text) of every block marked `compiles`."""
    lines = open(path, encoding="utf-8").read().split("\n")
    blocks = []
    for i, line in enumerate(lines):
        if not EXAMPLE_MARKER.match(line):
            continue
        fence = EXAMPLE_FENCE.match(lines[i + 1]) if i + 1 < len(lines) else None
        if not fence:
            raise ValueError(
                f"{path}:{i + 1}: a compiles marker must be followed by a "
                "```cpp, ```c or ```python fence")
        j = i + 2
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        if j >= len(lines):
            raise ValueError(f"{path}:{i + 2}: the example is never closed")
        blocks.append((i + 2, fence.group(1), "\n".join(lines[i + 2:j]) + "\n"))
    return blocks


def all_examples(source):
    out = []
    for page in pages(source):
        for line, lang, text in example_blocks(page):
            out.append((os.path.relpath(page, source), line, lang, text))
    return out


def extract_examples(args):
    """Writes each C/C++ example as a program: its #include lines first, the
    rest as the body of main (or as written when it defines main)."""
    os.makedirs(args.extract_examples, exist_ok=True)
    n = 0
    for page, line, lang, text in all_examples(os.path.realpath(args.source)):
        if lang == "python":
            continue
        lines = text.split("\n")
        includes = [l for l in lines if l.startswith("#include")]
        body = [l for l in lines if not l.startswith("#include")]
        program = [f"// {page}:{line}", *includes]
        if re.search(r"^int main\(", text, flags=re.M):
            program += body
        else:
            program += ["int main(void) {", *body, "  return 0;", "}"]
        ext = "cc" if lang == "cpp" else "c"
        name = f"doc_example_{n}.{ext}"
        with open(os.path.join(args.extract_examples, name), "w") as f:
            f.write("\n".join(program) + "\n")
        print(f"{name}: {page}:{line}")
        n += 1
    if n == 0:
        print("run_doc_blocks: no C or C++ example is marked compiles",
              file=sys.stderr)
        return 1
    return 0


HVD_NAME = re.compile(r"\bhvd\.([A-Za-z_]\w*)")
HVD_IMPORT = re.compile(r"^import\s+(\S+)\s+as\s+hvd\b", re.M)


def check_python_examples(source, build):
    """Each Python example compiles, and every hvd.NAME it uses exists in the
    module it imports as hvd. Returns the number of failures."""
    failed = 0
    env = dict(os.environ, PYTHONPATH=os.path.join(build, "python"))
    for page, line, lang, text in all_examples(source):
        if lang != "python":
            continue
        where = f"{page}:{line}"
        try:
            compile(text, where, "exec")
        except SyntaxError as e:
            print(f"FAIL {where}: the example does not compile: {e}")
            failed += 1
            continue
        module = HVD_IMPORT.search(text)
        names = sorted(set(HVD_NAME.findall(text)))
        if module and names:
            probe = ("import importlib, sys\n"
                     f"m = importlib.import_module({module.group(1)!r})\n"
                     f"missing = [n for n in {names!r} if not hasattr(m, n)]\n"
                     "print(' '.join(missing))\n"
                     "sys.exit(1 if missing else 0)\n")
            proc = subprocess.run([sys.executable, "-c", probe], env=env,
                                  stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True)
            if proc.returncode != 0:
                print(f"FAIL {where}: not in {module.group(1)}: "
                      f"{proc.stdout.strip()}")
                failed += 1
                continue
        print(f"ok   {where} (Python example, {len(names)} hvd names)")
    return failed


def scratch_tree(source, build, root):
    """A directory that looks like the checkout with build/ = the build."""
    tree = os.path.join(root, "tree")
    os.makedirs(tree)
    for name in os.listdir(source):
        if name in ("build", ".git"):
            continue
        os.symlink(os.path.join(source, name), os.path.join(tree, name))
    os.symlink(build, os.path.join(tree, "build"))
    return tree


def run_blocks(args):
    source = os.path.realpath(args.source)
    build = os.path.realpath(args.build)
    targets = pages(source)
    if args.only:
        wanted = {os.path.realpath(p) for p in args.only}
        targets = [p for p in targets if os.path.realpath(p) in wanted]
        if not targets:
            print(f"run_doc_blocks: no page matches --only {args.only}",
                  file=sys.stderr)
            return 2
    todo = []
    for page in targets:
        try:
            for line, requires, text in runnable_blocks(page):
                todo.append((os.path.relpath(page, source), line, requires,
                             text))
        except ValueError as e:
            print(f"FAIL {e}")
            return 1
    if args.list:
        for page, line, requires, text in todo:
            first = text.strip().split("\n")[0]
            need = f" (requires {requires})" if requires else ""
            print(f"{page}:{line}{need}: {first}")
        return 0
    if not todo:
        print("run_doc_blocks: no runnable blocks found", file=sys.stderr)
        return 1
    failed = skipped = 0
    with tempfile.TemporaryDirectory(prefix="hvdtune-docs-") as root:
        tree = scratch_tree(source, build, root)
        for n, (page, line, requires, text) in enumerate(todo):
            where = f"{page}:{line}"
            if requires and not os.path.exists(os.path.join(build, requires)):
                print(f"SKIP {where}: the build has no {requires}")
                skipped += 1
                continue
            # Each block starts in a fresh copy of the tree's root, so files a
            # block writes (a store, a CSV) never leak into another block.
            cwd = os.path.join(root, f"block{n}")
            shutil.copytree(tree, cwd, symlinks=True)
            home = os.path.join(root, f"home{n}")
            os.makedirs(os.path.join(home, "tmp"))
            env = {k: v for k, v in os.environ.items()
                   if not k.startswith(("HOROVOD_", "HVDTUNE_", "QUICKSTART_"))}
            env.update(HOME=home, TMPDIR=os.path.join(home, "tmp"),
                       XDG_STATE_HOME=os.path.join(home, "state"))
            started = time.monotonic()
            try:
                proc = subprocess.run(
                    ["bash", "-euo", "pipefail", "-c", text], cwd=cwd, env=env,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                    timeout=args.timeout, text=True)
                rc, out = proc.returncode, proc.stdout
            except subprocess.TimeoutExpired as e:
                rc = "timeout"
                out = e.stdout.decode() if isinstance(e.stdout, bytes) else (
                    e.stdout or "")
            took = time.monotonic() - started
            if rc == 0:
                print(f"ok   {where} ({took:.1f} s)")
            else:
                failed += 1
                print(f"FAIL {where}: exit {rc} after {took:.1f} s\n"
                      f"--- block ---\n{text}--- output (last 40 lines) ---")
                print("\n".join(out.rstrip("\n").split("\n")[-40:]))
    ran = len(todo) - skipped
    print(f"{ran - failed} of {ran} runnable blocks passed"
          + (f", {skipped} skipped" if skipped else ""))
    if os.path.isdir(os.path.join(build, "python", "hvdtune")):
        failed += check_python_examples(source, build)
    else:
        print("SKIP the Python examples: the build has no python/hvdtune")
    return 1 if failed else 0


LINK = re.compile(r"\]\(([^)\s]+)\)")
ANCHOR = re.compile(r'<a id="([^"]+)"></a>')


def slug(heading):
    """GitHub's anchor of a Markdown heading."""
    s = heading.strip().lower()
    s = re.sub(r"[^\w\- ]", "", s)
    return s.replace(" ", "-")


def anchors(path):
    text = open(path, encoding="utf-8").read()
    found = set(ANCHOR.findall(text))
    fenced = False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced and line.startswith("#"):
            found.add(slug(line.lstrip("#")))
    return found


def check_links(args):
    """Every relative link of the manual names a file that exists and, with
    a #fragment, a heading (or <a id>) of that file."""
    source = os.path.realpath(args.source)
    bad = 0
    for page in pages(source) + [os.path.join(source, "CHANGELOG.md")]:
        if not os.path.isfile(page):
            continue
        text = open(page, encoding="utf-8").read()
        text = re.sub(r"```.*?```", "", text, flags=re.S)
        for target in LINK.findall(text):
            if re.match(r"^[a-z]+:", target):
                continue
            file, _, frag = target.partition("#")
            path = os.path.normpath(
                os.path.join(os.path.dirname(page), file)) if file else page
            where = os.path.relpath(page, source)
            if not os.path.exists(path):
                print(f"FAIL {where}: link to missing {target}")
                bad += 1
            elif frag and path.endswith(".md") and frag not in anchors(path):
                print(f"FAIL {where}: no heading for #{frag} in {file or where}")
                bad += 1
    bad += check_variable_names(source)
    print("ok   every relative link resolves and every variable exists"
          if not bad else f"{bad} problem(s)")
    return 1 if bad else 0


VARIABLE = re.compile(r"\b(?:HOROVOD|HVDTUNE|QUICKSTART)_[A-Z0-9_]*[A-Z0-9]\b")
CODE_DIRS = ("runtime", "tuner", "store", "metrics", "timeline", "bench",
             "python", "tools", "tests", "dashboard", "cmake", "examples")


def check_variable_names(source):
    """Every HOROVOD_*/HVDTUNE_* name the manual mentions occurs in the code
    (a renamed variable must not live on in the docs)."""
    known = set()
    paths = [os.path.join(source, "CMakeLists.txt")]
    for top in CODE_DIRS:
        for dirpath, dirnames, files in os.walk(os.path.join(source, top)):
            dirnames[:] = [d for d in dirnames if d != "node_modules"]
            paths += [os.path.join(dirpath, f) for f in files
                      if not f.endswith(".md")]
    for path in paths:
        try:
            known.update(VARIABLE.findall(
                open(path, encoding="utf-8", errors="ignore").read()))
        except OSError:
            continue
    bad = 0
    for page in pages(source) + [os.path.join(source, "CHANGELOG.md")]:
        if not os.path.isfile(page):
            continue
        for name in sorted(set(VARIABLE.findall(open(page).read())) - known):
            print(f"FAIL {os.path.relpath(page, source)}: {name} is not a "
                  "name the code knows")
            bad += 1
    return bad


def check_reference(args):
    page = os.path.join(args.source, "docs", "configuration.md")
    text = open(page, encoding="utf-8").read()
    if REF_BEGIN not in text or REF_END not in text:
        print(f"FAIL {page}: no {REF_BEGIN.strip()} ... {REF_END} block")
        return 1
    block = text.split(REF_BEGIN, 1)[1].split(REF_END, 1)[0]
    generated = subprocess.run([args.hvd_tune, "knobs", "--markdown"],
                               check=True, stdout=subprocess.PIPE,
                               text=True).stdout
    if block != generated:
        import difflib
        print(f"FAIL {page} differs from `hvd-tune knobs --markdown`; "
              "regenerate it with HVDTUNE_UPDATE_DOCS=1 build/tests/unit_tests "
              "--gtest_filter=ConfigReference.DocsPageIsGenerated")
        sys.stdout.writelines(difflib.unified_diff(
            block.splitlines(True), generated.splitlines(True), "page",
            "hvd-tune knobs --markdown"))
        return 1
    print(f"ok   {page} is `hvd-tune knobs --markdown`")
    return 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", required=True, help="the source tree")
    p.add_argument("--build", help="the build directory (for runnable blocks)")
    p.add_argument("--list", action="store_true",
                   help="list the runnable blocks instead of running them")
    p.add_argument("--only", action="append", metavar="PAGE",
                   help="run only this page's blocks (repeatable)")
    p.add_argument("--timeout", type=float, default=120,
                   help="seconds one block may take (default 120)")
    p.add_argument("--check-reference", metavar="HVD_TUNE", dest="hvd_tune",
                   help="instead: compare docs/configuration.md's reference "
                   "with this hvd-tune's `knobs --markdown`")
    p.add_argument("--check-links", action="store_true",
                   help="instead: check that every relative link resolves "
                   "and every HOROVOD_*/HVDTUNE_* name exists in the code")
    p.add_argument("--extract-examples", metavar="DIR",
                   help="instead: write the C and C++ examples marked "
                   "compiles into DIR as programs")
    args = p.parse_args()
    if args.extract_examples:
        return extract_examples(args)
    if args.check_links:
        return check_links(args)
    if args.hvd_tune:
        return check_reference(args)
    if not args.build:
        p.error("--build is required to run blocks")
    return run_blocks(args)


if __name__ == "__main__":
    sys.exit(main())
