#!/usr/bin/env python3
"""Checks that the manual's figures have one source and that its generated
parts match what they are generated from (docs/testing.md, "The docs").

  --numbers           every number of README.md's Measured table appears in
                      the part of docs/benchmarks.md its row links to, and
                      every measured-looking figure elsewhere in README.md
                      (a ratio, a percentage, a decimal) in benchmarks.md
  --provenance        no commit hash, date or diary phrase in README.md or
                      docs/ outside docs/benchmarks.md
  --script-variables  docs/configuration.md's "Variables of the scripts" is
                      what tools/script_variables.txt generates, and every
                      HVDTUNE_*/QUICKSTART_* variable a tools/*.sh script
                      reads is listed there (and every listed one is read);
                      with --update, rewrites the block instead
  --design-files      docs/design.md names every source file of the
                      libraries in runtime/CMakeLists.txt and
                      store/CMakeLists.txt

Needs no build. Exit status: 0 when the checks passed, 1 when one failed,
2 on bad usage.
"""

import argparse
import glob
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from run_doc_blocks import slug  # noqa: E402  (GitHub's heading anchors)

BENCHMARKS = os.path.join("docs", "benchmarks.md")


def read(path):
    with open(path, encoding="utf-8") as f:
        return f.read()


def without_fences(text):
    """The text with fenced code blocks blanked (line count kept)."""
    out, fenced = [], False
    for line in text.split("\n"):
        if line.startswith("```"):
            fenced = not fenced
            out.append("")
        else:
            out.append("" if fenced else line)
    return "\n".join(out)


# --- numbers -------------------------------------------------------------

# A number not glued to a word (resnet50, mobilenet_v2 and float16 are
# names) or to another number's dot (the 4 of 4.1.4); thousands separated
# by commas count as one number.
NUMBER = re.compile(
    r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?![\w])")
# A figure outside the Measured table: a number directly before × or %, or
# with a decimal point.
FIGURE = re.compile(
    r"(?<![\w.])(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?(?=\s?[×%])|"
    r"(?<![\w.])\d+\.\d+(?![\w.])")
LINK = re.compile(r"\[([^\]]*)\]\(([^)\s]+)\)")


def numbers(text, pattern=NUMBER):
    """The numbers of a Markdown text, link targets left out, commas
    removed (4,096 and 4096 are one number)."""
    text = LINK.sub(lambda m: m.group(1), text)
    return {m.group(0).replace(",", "") for m in pattern.finditer(text)}


def sections(path):
    """{anchor: text of the section under that heading, down to the next
    heading of the same or a higher level}."""
    lines = read(path).split("\n")
    heads, fenced = [], False
    for i, line in enumerate(lines):
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            m = re.match(r"^(#+)\s+(.*)$", line)
            if m:
                heads.append((i, len(m.group(1)), slug(m.group(2))))
    out = {}
    for n, (i, level, anchor) in enumerate(heads):
        end = len(lines)
        for j, other_level, _ in heads[n + 1:]:
            if other_level <= level:
                end = j
                break
        out[anchor] = "\n".join(lines[i:end])
    return out


def measured_rows(readme):
    """(line number, row text) of every data row of the table under the
    README's "## Measured" heading (not its header or separator)."""
    rows, inside = [], False
    for i, line in enumerate(without_fences(readme).split("\n"), 1):
        if line.startswith("## "):
            inside = line.strip() == "## Measured"
        elif inside and line.startswith("|"):
            rows.append((i, line))
    separator = re.compile(r"^\|(?:\s*:?-+:?\s*\|)+$")
    if len(rows) >= 2 and separator.match(rows[1][1]):
        return rows[2:]
    return [(i, l) for i, l in rows if not separator.match(l)]


def check_numbers(source):
    readme = read(os.path.join(source, "README.md"))
    bench_path = os.path.join(source, BENCHMARKS)
    bench = read(bench_path)
    parts = sections(bench_path)
    everywhere = numbers(bench)
    bad = 0
    rows = measured_rows(readme)
    if not rows:
        print("FAIL README.md: no table under a '## Measured' heading")
        return 1
    for line, row in rows:
        anchors = [t.partition("#")[2] for _, t in LINK.findall(row)
                   if t.partition("#")[0] == BENCHMARKS.replace(os.sep, "/")]
        if not anchors:
            print(f"FAIL README.md:{line}: the row links to no part of "
                  f"{BENCHMARKS}")
            bad += 1
            continue
        missing_anchor = [a for a in anchors if a not in parts]
        for a in missing_anchor:
            print(f"FAIL README.md:{line}: {BENCHMARKS} has no heading #{a}")
            bad += 1
        source_text = numbers("\n".join(parts[a] for a in anchors
                                        if a in parts))
        for n in sorted(numbers(row) - source_text):
            print(f"FAIL README.md:{line}: {n} is not in the part of "
                  f"{BENCHMARKS} the row links to "
                  f"({', '.join('#' + a for a in anchors)})")
            bad += 1
    table_lines = {line for line, _ in rows}
    prose = "\n".join(l for i, l in enumerate(
        without_fences(readme).split("\n"), 1) if i not in table_lines)
    for n in sorted(numbers(prose, FIGURE) - everywhere):
        print(f"FAIL README.md: the figure {n} is not in {BENCHMARKS}")
        bad += 1
    if not bad:
        print(f"ok   the {len(rows)} rows of README.md's Measured table and "
              f"its other figures are in {BENCHMARKS}")
    return 1 if bad else 0


# --- provenance ----------------------------------------------------------

HEX = re.compile(r"(?<![0-9A-Za-z_])[0-9a-f]{7,40}(?![0-9A-Za-z_])")
# A config-store fingerprint, <hardware hash>-<model hash>, is a hash of
# the hardware and the model, not of a commit: the manual shows one.
FINGERPRINT = re.compile(r"\b[0-9a-f]{16}-[0-9a-f]{16}\b")
MONTHS = ("January|February|March|April|May|June|July|August|September|"
          "October|November|December|Jan|Feb|Mar|Apr|Jun|Jul|Aug|Sept|Sep|"
          "Oct|Nov|Dec")
DATE = re.compile(
    r"\b(?:19|20)\d\d-[01]\d-[0-3]\d\b|"
    rf"\b(?:{MONTHS})\.?\s+(?:[0-3]?\d(?:st|nd|rd|th)?,?\s+)?(?:19|20)\d\d\b|"
    rf"\b[0-3]?\d\s+(?:{MONTHS})\.?,?\s+(?:19|20)\d\d\b")
DIARY = re.compile(r"\b(?:that|this) (?:morning|afternoon|evening|day)\b|"
                   r"\byesterday\b|\bload average\b", re.I)


def looks_like_hash(token):
    """A commit hash mixes digits and letters; 1e999999 is a number."""
    return (re.search(r"\d", token) and re.search(r"[a-f]", token)
            and not re.fullmatch(r"\d+e\d+", token))


def check_provenance(source):
    pages = [os.path.join(source, "README.md")] + sorted(
        glob.glob(os.path.join(source, "docs", "**", "*.md"), recursive=True))
    skip = os.path.realpath(os.path.join(source, BENCHMARKS))
    bad = 0
    for page in pages:
        if os.path.realpath(page) == skip or not os.path.isfile(page):
            continue
        where = os.path.relpath(page, source)
        for n, line in enumerate(read(page).split("\n"), 1):
            text = FINGERPRINT.sub("", line)
            found = [t for t in HEX.findall(text) if looks_like_hash(t)]
            found += [m.group(0) for m in DATE.finditer(line)]
            found += [m.group(0) for m in DIARY.finditer(line)]
            for f in found:
                print(f"FAIL {where}:{n}: '{f}': commit hashes, dates and "
                      f"the measurement diary belong in {BENCHMARKS}")
                bad += 1
    if not bad:
        print(f"ok   no commit hash, date or diary phrase outside "
              f"{BENCHMARKS} ({len(pages) - 1} pages)")
    return 1 if bad else 0


# --- the scripts' variables ----------------------------------------------

SCRIPT_LIST = os.path.join("tools", "script_variables.txt")
OURS = r"(?:HVDTUNE|QUICKSTART)_[A-Z0-9_]*[A-Z0-9]"
# ${NAME:-x}, ${NAME-x}, ${NAME:+x}, ${NAME:?x}, ${NAME:=x}: read from the
# environment, whatever the script assigns.
WITH_DEFAULT = re.compile(r"\$\{(" + OURS + r"):?[-+?=]")
PLAIN = re.compile(r"\$\{?(" + OURS + r")\b(?![:\-+?=])")
ASSIGNED = re.compile(r"(?:^|[\s;(&|])(?:export\s+|local\s+|readonly\s+)?("
                      + OURS + r")=")
BLOCK_BEGIN = "<!-- script-variables:begin -->\n"
BLOCK_END = "<!-- script-variables:end -->"


def declared_variables(source):
    """[(name, meaning)] of tools/script_variables.txt, in its order."""
    out = []
    for n, line in enumerate(read(os.path.join(source, SCRIPT_LIST))
                             .split("\n"), 1):
        if not line.strip() or line.startswith("#"):
            continue
        if line[0].isspace():
            if not out:
                raise ValueError(f"{SCRIPT_LIST}:{n}: a continuation line "
                                 "before any variable")
            out[-1] = (out[-1][0], out[-1][1] + " " + line.strip())
            continue
        m = re.match(r"^(" + OURS + r"):\s+(\S.*)$", line)
        if not m:
            raise ValueError(f"{SCRIPT_LIST}:{n}: expected 'NAME: meaning'")
        if any(name == m.group(1) for name, _ in out):
            raise ValueError(f"{SCRIPT_LIST}:{n}: {m.group(1)} is listed "
                             "twice")
        out.append((m.group(1), m.group(2)))
    return out


def variables_read(source):
    """{name: [scripts]} of the HVDTUNE_*/QUICKSTART_* variables the
    tools/*.sh scripts read from their environment: with a default, or
    plainly where the script never assigns them."""
    found = {}
    for path in sorted(glob.glob(os.path.join(source, "tools", "*.sh"))):
        code = "\n".join(l for l in read(path).split("\n")
                         if not l.lstrip().startswith("#"))
        assigned = set(ASSIGNED.findall(code))
        names = set(WITH_DEFAULT.findall(code))
        names |= {n for n in PLAIN.findall(code) if n not in assigned}
        for name in names:
            found.setdefault(name, []).append(os.path.basename(path))
    return found


def script_variables_block(source, runtime_names):
    read_by = variables_read(source)
    declared = declared_variables(source)
    problems = []
    for name in sorted(set(read_by) - {n for n, _ in declared}):
        if name not in runtime_names:
            problems.append(f"{name} is read by {', '.join(read_by[name])} "
                            f"but not listed in {SCRIPT_LIST}")
    for name, _ in declared:
        if name not in read_by:
            problems.append(f"{name} is listed in {SCRIPT_LIST} but no "
                            "tools/*.sh script reads it")
    rows = ["| variable | read by | meaning |", "|---|---|---|"]
    for name, meaning in declared:
        if meaning.startswith("internal:") or name not in read_by:
            continue
        scripts = ", ".join(f"`{s}`" for s in read_by[name])
        rows.append(f"| `{name}` | {scripts} | {meaning} |")
    return "\n".join(rows) + "\n", problems


def runtime_variables(config_page):
    """The variables of the generated configuration reference: the
    runtime's, which a script may pass on without documenting them."""
    text = read(config_page)
    ref = text.split("<!-- config-reference:begin -->", 1)[-1].split(
        "<!-- config-reference:end -->", 1)[0]
    return set(re.findall(OURS, ref))


def check_script_variables(source, update):
    page = os.path.join(source, "docs", "configuration.md")
    try:
        block, problems = script_variables_block(source,
                                                 runtime_variables(page))
    except ValueError as e:
        print(f"FAIL {e}")
        return 1
    for p in problems:
        print(f"FAIL {p}")
    text = read(page)
    if BLOCK_BEGIN not in text or BLOCK_END not in text:
        print(f"FAIL docs/configuration.md: no {BLOCK_BEGIN.strip()} ... "
              f"{BLOCK_END} block")
        return 1
    head, rest = text.split(BLOCK_BEGIN, 1)
    current, tail = rest.split(BLOCK_END, 1)
    if update:
        if current != block:
            with open(page, "w", encoding="utf-8") as f:
                f.write(head + BLOCK_BEGIN + block + BLOCK_END + tail)
            print("updated docs/configuration.md")
        return 1 if problems else 0
    if current != block:
        import difflib
        print(f"FAIL docs/configuration.md's script variables differ from "
              f"{SCRIPT_LIST}; regenerate them with tools/check_docs.py "
              "--source . --script-variables --update")
        sys.stdout.writelines(difflib.unified_diff(
            current.splitlines(True), block.splitlines(True), "page",
            SCRIPT_LIST))
        return 1
    if problems:
        return 1
    print(f"ok   docs/configuration.md's script variables are {SCRIPT_LIST}'s,"
          " and every variable a script reads is listed")
    return 0


# --- design.md names every source file -----------------------------------

def library_sources(cmake):
    """The .cc files of a CMakeLists.txt's add_library and target_sources
    calls."""
    text = re.sub(r"#.*", "", read(cmake))
    files = []
    for call in re.finditer(r"\b(?:add_library|target_sources)\s*\(([^)]*)\)",
                            text):
        files += re.findall(r"[\w./-]+\.cc\b", call.group(1))
    return files


def check_design_files(source):
    design = read(os.path.join(source, "docs", "design.md"))
    bad = n = 0
    for cmake in ("runtime/CMakeLists.txt", "store/CMakeLists.txt"):
        for path in library_sources(os.path.join(source, cmake)):
            n += 1
            name = os.path.basename(path)
            if not re.search(r"(?<![\w.])" + re.escape(name), design):
                print(f"FAIL docs/design.md does not name {name} "
                      f"({cmake})")
                bad += 1
    if not bad:
        print(f"ok   docs/design.md names all {n} library sources")
    return 1 if bad else 0


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--source", required=True, help="the source tree")
    p.add_argument("--numbers", action="store_true")
    p.add_argument("--provenance", action="store_true")
    p.add_argument("--script-variables", action="store_true")
    p.add_argument("--update", action="store_true",
                   help="with --script-variables: rewrite the block")
    p.add_argument("--design-files", action="store_true")
    args = p.parse_args()
    source = os.path.realpath(args.source)
    checks = []
    if args.numbers:
        checks.append(lambda: check_numbers(source))
    if args.provenance:
        checks.append(lambda: check_provenance(source))
    if args.script_variables:
        checks.append(lambda: check_script_variables(source, args.update))
    elif args.update:
        p.error("--update goes with --script-variables")
    if args.design_files:
        checks.append(lambda: check_design_files(source))
    if not checks:
        p.error("name at least one check")
    return max(check() for check in checks)


if __name__ == "__main__":
    sys.exit(main())
