"""Benchmark: the test suite's time against an earlier checkout's, on the same machine, back to
back. Each checkout's own README test command is run in it (the `.venv/bin/python -m pytest ...`
part of the README's line that installs and runs the tests; the checkout's .venv must exist),
and it prints the wall time, the CPU the machine spent meanwhile (from /proc/stat: Ray's and
Chromium's processes are not children the runner waits for, so the runner's own rusage misses
them) and the ratio of the two wall times. Run it on a quiet machine: the CPU is the machine's.

python bench/suite.py --before ../old [--after .] [--repeat 1]

`--before` is a checkout of the commit to compare with, e.g. `git worktree add ../old 3938af6`
(the commit before issue 26) and its .venv made as its README says.
"""

import argparse
import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

TEST_COMMAND = re.compile(r"(\.venv/bin/python -m pytest[^`\n]*)")


def readme_test_command(checkout: Path) -> list[str]:
    """The pytest part of the README's install-and-test line in `checkout`."""
    for line in (checkout / "README.md").read_text(encoding="utf-8").splitlines():
        if "pip install" in line and (found := TEST_COMMAND.search(line)):
            return shlex.split(found.group(1).strip())
    raise SystemExit(f"{checkout / 'README.md'}: no line installs and runs the tests")


def busy_cpu_s() -> float:
    """CPU seconds the whole machine has spent busy since boot (all but idle and I/O wait)."""
    with open("/proc/stat") as stat:
        ticks = [int(value) for value in stat.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def run(checkout: Path) -> tuple[list[str], float, float, str]:
    """The README's test command in `checkout`: the command, wall seconds, machine CPU seconds,
    pytest's last line."""
    command = readme_test_command(checkout)
    started, cpu = time.monotonic(), busy_cpu_s()
    done = subprocess.run(command, cwd=checkout, capture_output=True, text=True)
    wall_s, cpu_s = time.monotonic() - started, busy_cpu_s() - cpu
    last = (done.stdout.strip().splitlines() or ["(no output)"])[-1]
    if done.returncode != 0:
        failed = [line for line in done.stdout.splitlines() if line.startswith(("FAILED", "ERROR"))]
        print(f"{checkout}: {shlex.join(command)} exited {done.returncode}: {last}", *failed, sep="\n", file=sys.stderr)
    return command, wall_s, cpu_s, last


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", type=Path, required=True, help="the earlier checkout, with its .venv")
    parser.add_argument("--after", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, alternating")
    args = parser.parse_args()
    times: dict[str, list[float]] = {"before": [], "after": []}
    for _ in range(args.repeat):
        for name, checkout in (("before", args.before), ("after", args.after)):
            command, wall_s, cpu_s, last = run(checkout.resolve())
            times[name].append(wall_s)
            print(f"{name:6}  {wall_s:6.1f} s wall  {cpu_s:6.1f} s machine CPU  {shlex.join(command)}")
            print(f"        {last}")
    before, after = min(times["before"]), min(times["after"])
    ratio = after / before
    change = f"{(1 - ratio) * 100:.0f} % faster" if ratio <= 1 else f"{(ratio - 1) * 100:.0f} % slower"
    print(f"after / before (wall, best of {args.repeat}): {ratio:.2f} ({change})")


if __name__ == "__main__":
    main()
