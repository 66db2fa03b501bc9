"""The README's sample outputs are the commands' real outputs (run by
test_readme.sh):  readme_check.py README KAITEN

Every `$ build/kaiten sim|compare|plan ...` line in a code block is run
(build/kaiten is KAITEN) and the lines under it, up to the next `$ ` line
or the block's end, must be its output, line by line, where
  ...            stands for any lines (none included)
  TEXT ...       is a line that starts with TEXT, any number in TEXT
                 standing for any number (timings)
Commands of other kinds (train, sample, report) are not checked: their
output is measured. Prints one line per command; exit 1 on a mismatch."""
import re
import shlex
import subprocess
import sys

CHECKED = ("sim", "compare", "plan")
NUM = r"[-+]?\d+(?:\.\d+)?(?:e[-+]?\d+)?"


def samples(text):
    """(line number, command, expected lines) of each checked sample."""
    out, block, cmd = [], False, None
    for n, line in enumerate(text.splitlines(), 1):
        if line.startswith("```"):
            block, cmd = not block, None
            continue
        if not block:
            continue
        if line.startswith("$ "):
            words = shlex.split(line[2:].split("  #")[0])
            cmd = None
            if words[:1] == ["build/kaiten"] and len(words) > 1 and words[1] in CHECKED:
                cmd = (n, words[1:], [])
                out.append(cmd)
        elif cmd:
            cmd[2].append(line.rstrip())
    return out


def line_matches(want, got):
    if want.endswith(" ...") and want != "...":
        parts = re.split("(" + NUM + ")", want[:-4])
        pat = "".join(NUM if i % 2 else re.escape(p) for i, p in enumerate(parts))
        return re.match(pat, got) is not None
    return want == got


def matches(want, got):
    """Whether got (lines) is want (lines with ... for any lines)."""
    if not want:
        return not got
    if want[0] == "...":
        return any(matches(want[1:], got[k:]) for k in range(len(got) + 1))
    return bool(got) and line_matches(want[0], got[0]) and matches(want[1:], got[1:])


def first_difference(want, got):
    for i, (w, g) in enumerate(zip(want, got)):
        if w == "..." or w.endswith(" ..."):
            return "from README line %d (%r) on" % (i + 1, w)
        if w != g:
            return "README %r, output %r" % (w, g)
    return "README has %d lines, the output %d" % (len(want), len(got))


def main(readme, kaiten):
    bad = 0
    found = samples(open(readme).read())
    for n, args, want in found:
        r = subprocess.run([kaiten] + args, capture_output=True, text=True, timeout=120)
        got = [l.rstrip() for l in r.stdout.splitlines()]
        ok = r.returncode == 0 and matches(want, got)
        print("%s README line %d: kaiten %s" % ("ok  " if ok else "FAIL", n, " ".join(args)))
        if not ok:
            bad += 1
            print("  exit %d; %s" % (r.returncode, first_difference(want, got)))
    if len(found) < 3:
        print("FAIL: %d samples found, the README has sim, compare and plan" % len(found))
        bad += 1
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
