#!/usr/bin/env python3
"""check_sleeps.py: tests wait for what they check, they do not sleep.

Usage: check_sleeps.py [TESTS_DIR]   (default: the folder of this script)

Lists every fixed sleep in TESTS_DIR's C files (a call of harness_sleep_ms,
sleep_ms, usleep, sleep or nanosleep) that is not inside a loop, and fails
when there are more than MAX_FIXED of them or when one has no comment
saying why a fixed time is the point ("a fixed time is the point", or
"pacing" for a measurement's pace) on its line or in the comment just
above. A sleep inside a for/while/do is a polling loop (HARNESS_WAIT,
HARNESS_HOLDS and their kind) and is not counted; the body of a sleep
helper (a function whose name holds "sleep") is not either.

Loops are found by indentation, which clang-format keeps true
(tests/check_format.sh): the sleep's enclosing blocks are the lines above
it with less indentation.
"""
import pathlib
import re
import sys

MAX_FIXED = 10
CALL = re.compile(r"\b(harness_sleep_ms|sleep_ms|usleep|sleep|nanosleep)\s*\(")
LOOP = re.compile(r"^\s*(\}\s*)?(for|while|do)\b|\bdo\s*\{")
WHY = re.compile(r"a fixed time is the point|pacing", re.I)
HELPER = re.compile(r"^(static )?(inline )?void \w*sleep\w*\(")


def indent(line):
    return len(line) - len(line.lstrip())


def in_loop(lines, i):
    """Whether line i sits in a loop (or is a for's step), by indentation."""
    if LOOP.search(lines[i]):
        return True
    ind = indent(lines[i])
    for j in range(i - 1, -1, -1):
        p = lines[j]
        s = p.strip()
        if not s or s.startswith(("/*", "*", "//", "#")):
            continue
        if indent(p) < ind:
            if LOOP.search(p):
                return True
            if indent(p) == 0:
                return False
            ind = indent(p)
    return False


def explained(lines, i):
    """Whether line i or the comment lines right above it say why."""
    if WHY.search(lines[i]):
        return True
    j = i - 1
    while j >= 0 and lines[j].strip().startswith(("/*", "*", "//")):
        if WHY.search(lines[j]):
            return True
        j -= 1
    return False


def fixed_sleeps(root):
    for f in sorted(root.rglob("*.[ch]")):
        lines = f.read_text(errors="replace").split("\n")
        for i, line in enumerate(lines):
            s = line.strip()
            if not CALL.search(line) or s.startswith(("/*", "*", "//")):
                continue
            if any(HELPER.match(lines[k]) for k in range(max(0, i - 3), i + 1)):
                continue
            if not in_loop(lines, i):
                yield f, i + 1, s, explained(lines, i)


def main():
    root = pathlib.Path(sys.argv[1] if len(sys.argv) > 1 else pathlib.Path(__file__).parent)
    found = list(fixed_sleeps(root))
    bad = [x for x in found if not x[3]]
    for f, n, text, ok in found:
        print(f"{f}:{n}: {text}{'' if ok else '   <- no comment says why a fixed time'}")
    print(f"{len(found)} fixed sleeps outside polling loops (at most {MAX_FIXED}), "
          f"{len(bad)} without a reason")
    return 1 if len(found) > MAX_FIXED or bad else 0


if __name__ == "__main__":
    sys.exit(main())
