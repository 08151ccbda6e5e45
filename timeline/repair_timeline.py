#!/usr/bin/env python3
"""Makes the timeline of a job that was killed (HOROVOD_TIMELINE) valid JSON.

A finished job's timeline is a JSON array. A killed job's file lacks the
closing bracket (trace viewers such as Perfetto and chrome://tracing load it
as it is) and may end in a partly written event. This drops an incomplete
last event and closes the array, in place or into a new file:

    repair_timeline.py TIMELINE [OUTPUT]
"""
import json
import sys


def repair(text):
    try:
        json.loads(text)
        return text  # already complete
    except ValueError:
        pass
    # One event per line, lines separated by ",\n": drop lines from the end
    # until what is left, closed, parses (a killed writer leaves at most one
    # partial event).
    lines = text.split("\n")
    while lines:
        body = "\n".join(lines).rstrip().rstrip(",")
        candidate = body + "\n]\n"
        try:
            json.loads(candidate)
            return candidate
        except ValueError:
            lines.pop()
    return "[\n]\n"


def main(argv):
    if len(argv) not in (2, 3):
        sys.stderr.write(__doc__)
        return 2
    with open(argv[1], encoding="utf-8", errors="replace") as f:
        text = f.read()
    fixed = repair(text)
    json.loads(fixed)  # raises if the file was not a timeline
    with open(argv[2] if len(argv) == 3 else argv[1], "w", encoding="utf-8") as f:
        f.write(fixed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
