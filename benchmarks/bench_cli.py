"""Benchmark of the command line: how long a person waits for ``gitmail``.

Run: ``python benchmarks/bench_cli.py`` (``--runs 21`` for steadier medians).
``--python VENV/bin/python`` measures another installation (say one made from
the wheel, as ``.ci/run`` does) with that interpreter as the yardstick: an
editable install adds its import hook to every start, ``python -c pass`` too.

A throw-away store gets one project with 1,000 past messages among 20 agents
(written with ``git fast-import``, as in ``bench_mcp.py``); one untimed read
brings the project's index up to date first (that first read is reported as
``cold``). Then, in interleaved rounds so that a busy moment hits every
command alike, each of these runs as its own process, the way a shell runs it:

- ``python -c pass``: the interpreter alone, the yardstick;
- ``gitmail --help``;
- ``gitmail inbox PROJECT AGENT`` (the newest 20 of ~250 messages);
- ``gitmail search PROJECT WORD`` (a word in a tenth of the messages).

Reported: the median wall time of each and its ratio to ``python -c pass``,
and the same for the CPU time the process used (user + system), which a busy
machine disturbs far less than the wall time: on a shared machine, read the
CPU ratio as the quiet machine's. Goals on a quiet machine: ``--help`` at most
3x ``python -c pass``; a read command at most 0.5 s. Prints a table, then one
JSON line with every figure.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from bench_mcp import PROJECT, RECIPIENT, history, setup  # noqa: E402 - beside this file

HELP_GOAL = 3.0  # x python -c pass
READ_GOAL_S = 0.5


def gitmail_command(python: str) -> list[str]:
    """The installed ``gitmail`` script beside ``python``, else ``python -m gitmail``."""
    script = os.path.join(os.path.dirname(python), "gitmail")
    return [script] if os.path.isfile(script) else [python, "-m", "gitmail"]


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_once(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``argv``."""
    cpu, began = children_cpu(), time.perf_counter()
    proc = subprocess.run(argv, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    elapsed = time.perf_counter() - began
    if proc.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {proc.returncode}: {proc.stderr}")
    return elapsed, children_cpu() - cpu


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--messages", type=int, default=1000, help="messages in the store (default 1000)")
    parser.add_argument("--runs", type=int, default=15, help="timed runs of each command (default 15)")
    parser.add_argument("--per-day", type=int, default=100, help="messages a day in the history (default 100)")
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter of the installation to measure (default: this one)")
    args = parser.parse_args(argv)

    home = tempfile.mkdtemp(prefix="gitmail-bench-cli-")
    env = dict(os.environ, GITMAIL_HOME=home)
    env.pop("GITMAIL_TOKEN", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # cache bytecode as an ordinary installation does
    gitmail = gitmail_command(args.python)
    try:
        setup(home, 1)
        fill_s = history(home, args.messages, args.per_day)
        commands = {
            "python -c pass": [args.python, "-c", "pass"],
            "gitmail --help": [*gitmail, "--help"],
            "gitmail inbox": [*gitmail, "inbox", PROJECT, RECIPIENT],
            "gitmail search": [*gitmail, "search", PROJECT, "review"],
        }
        cold_s, _ = run_once(commands["gitmail inbox"], env)  # brings the index up to date
        for argv_ in commands.values():  # warm the file cache and the bytecode of every command
            run_once(argv_, env)
        samples: dict[str, list[tuple[float, float]]] = {name: [] for name in commands}
        for _ in range(args.runs):
            for name, argv_ in commands.items():
                samples[name].append(run_once(argv_, env))
    finally:
        shutil.rmtree(home, ignore_errors=True)

    base = statistics.median(wall for wall, _ in samples["python -c pass"])
    base_cpu = statistics.median(cpu for _, cpu in samples["python -c pass"])
    rows = {}
    for name, values in samples.items():
        median = statistics.median(wall for wall, _ in values)
        cpu = statistics.median(cpu for _, cpu in values)
        rows[name] = {"median_s": round(median, 4), "min_s": round(min(wall for wall, _ in values), 4),
                      "ratio": round(median / base, 2), "cpu_s": round(cpu, 4), "cpu_ratio": round(cpu / base_cpu, 2)}
    result = {
        "messages": args.messages, "runs": args.runs, "fill_s": round(fill_s, 2), "cold_inbox_s": round(cold_s, 3),
        "commands": rows,
        "help_ratio": rows["gitmail --help"]["ratio"], "help_cpu_ratio": rows["gitmail --help"]["cpu_ratio"],
        "help_goal_ratio": HELP_GOAL, "help_ok": rows["gitmail --help"]["ratio"] <= HELP_GOAL,
        "read_goal_s": READ_GOAL_S,
        "reads_ok": all(rows[n]["median_s"] <= READ_GOAL_S for n in ("gitmail inbox", "gitmail search")),
        "python": args.python, "gitmail": " ".join(gitmail), "cpus": os.cpu_count(),
        "load_1min": round(os.getloadavg()[0], 2),
    }
    print(f"{' '.join(gitmail)}: {args.messages} messages (history written in {fill_s:.1f} s); "
          f"first inbox read, index catching up: {cold_s:.3f} s; {args.runs} runs each, interleaved; "
          f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    print(f"{'command':<18} {'median s':>9} {'min s':>8} {'x python -c pass':>17} {'CPU s':>7} {'CPU x':>6}  goal")
    goals = {"gitmail --help": f"<= {HELP_GOAL:g}x", "gitmail inbox": f"<= {READ_GOAL_S} s",
             "gitmail search": f"<= {READ_GOAL_S} s"}
    for name, row in rows.items():
        print(f"{name:<18} {row['median_s']:>9.3f} {row['min_s']:>8.3f} {row['ratio']:>17.2f} {row['cpu_s']:>7.3f} "
              f"{row['cpu_ratio']:>6.2f}  {goals.get(name, '')}")
    print(json.dumps(result))
    return result


if __name__ == "__main__":
    main()
