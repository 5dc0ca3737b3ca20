"""Benchmark of signed writes: what signing adds to a commit, and how fast ``gitmail verify`` judges history.

One command prints a table, then one JSON line::

    python benchmarks/bench_verify.py                # 2000 writes each way, 20k commits verified
    python benchmarks/bench_verify.py --quick        # a small run in seconds
    python benchmarks/bench_verify.py --writes 5000 --history 100000
    python benchmarks/bench_verify.py --quick --bound   # the senders registered, bound to the node

What it measures, all as CPU time of this process (and of its pool's
processes for the verification), so a busy machine moves the figures less:

1. Signing cost per commit: the same single-message transactions through
   ``Archive.transact`` into two archives, one with the node key's signer
   and one without, in alternating rounds (each archive repacked after
   every round, so both grow alike); the difference per commit is what
   signing adds. The signature alone (``NodeKey.sign_commit`` on a commit's bytes)
   is timed too.
2. Verification: a history of ``--history`` signed commits (written in
   groups through ``transact_many``, one commit per author change) judged
   by ``verify`` without remembered verdicts in one process (CPU and wall)
   and with a pool of two (wall, and CPU: this process's and what the
   pool's processes spent, read from the process that started them once it
   has reaped them, where ``/proc`` tells), then again with them (only the
   walk and the lookup remain). With ``--bound`` the two senders have
   profiles bound to the node, so every message is judged against its
   sender's binding (without, no sender is bound and any node may write).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
import time

from gitmail.model.clock import HybridClock
from gitmail.model.records import Message, inbox_path, outbox_path
from gitmail.storage.engine import Archive, Change
from gitmail.storage.nodekey import NodeKey
from gitmail.storage.verify import PARALLEL_FROM, verify

CLOCK = HybridClock("bench")


def _cpu() -> float:
    times = os.times()
    return times.user + times.system + times.children_user + times.children_system


def _send(sender: str, to: str, n: int):
    message = Message(id=CLOCK.new_id(), thread_id=f"t-{n}", sender=sender, subject=f"s {n}",
                      created_ts=CLOCK.now_ts(), to=[to], body=f"message {n}\n")

    def fn(snap):
        change = Change(f"{sender} sent {message.id}", author=sender)
        change.put_record(message).put(inbox_path(to, message.id), message).put(outbox_path(sender, message.id),
                                                                                  message)
        return change
    return fn


def signing_cost(root: str, writes: int, rounds: int = 20) -> dict[str, float]:
    """Two archives grown alike, one signed and one not, written in alternating rounds (order swapped each round)."""
    key = NodeKey(os.path.join(root, "home"), "bench")
    archives = {mode: Archive.init(os.path.join(root, f"{mode}.git"), durable=False, maintain=False,
                                   signer=key.sign_commit if mode == "signed" else None)
                for mode in ("signed", "unsigned")}
    per_round = max(1, writes // rounds)
    spent = {"signed": 0.0, "unsigned": 0.0}
    n = 0
    for round_no in range(rounds):
        for mode in (("unsigned", "signed") if round_no % 2 else ("signed", "unsigned")):
            archive = archives[mode]
            start = _cpu()
            for i in range(per_round):
                archive.transact(_send("BlueLake", "GreenCastle", n + i))
            spent[mode] += _cpu() - start
        n += per_round
        for archive in archives.values():  # the same pack count for both as they grow: fold the packs each round
            subprocess.run(["git", "--git-dir", archive.git_dir, "repack", "-adq"], check=True)
            archive.renew_handles()
    archive = archives["signed"]
    payload = archive.repo[archive.tip()].read_raw()
    count = 2000
    start = time.process_time()
    for _ in range(count):
        key.sign_commit(payload)
    alone = (time.process_time() - start) / count
    total = per_round * rounds
    return {"writes_each_way": total, "unsigned_ms_cpu": round(spent["unsigned"] / total * 1000, 4),
            "signed_ms_cpu": round(spent["signed"] / total * 1000, 4),
            "added_ms_cpu": round((spent["signed"] - spent["unsigned"]) / total * 1000, 4),
            "signature_alone_ms_cpu": round(alone * 1000, 4)}


def _pool_cpu() -> float | None:
    """CPU seconds of the processes the forkserver started and reaped (None: no forkserver, or no ``/proc``)."""
    from multiprocessing import forkserver
    pid = getattr(forkserver._forkserver, "_forkserver_pid", None)
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[13]) + int(fields[14])) / os.sysconf("SC_CLK_TCK")  # cutime + cstime


def verification(root: str, history: int, *, bound: bool = False) -> dict[str, float]:
    key = NodeKey(os.path.join(root, "home"), "bench")
    archive = Archive.init(os.path.join(root, "verify.git"), durable=False, maintain=False,
                           signer=key.sign_commit)
    from gitmail.model.records import Agent, Node, node_path
    archive.transact(lambda snap: Change("node", author="gitmail").put(
        node_path("bench"), Node(node="bench", key=key.public_line, kind="node", created_at=CLOCK.now_ts())))
    for name in ("BlueLake", "GreenCastle") if bound else ():
        agent = Agent(id=CLOCK.new_id(), name=name, program="bench", model="bench", inception_ts=CLOCK.now_ts(),
                      hlc=CLOCK.tick(), node="bench")
        archive.transact(lambda snap, agent=agent: Change(f"register {agent.name}", author=agent.name)
                         .put_record(agent))
    n = 0
    while n < history:
        group = min(1000, history - n)
        fns = [_send(("BlueLake", "GreenCastle")[i % 2], ("GreenCastle", "BlueLake")[i % 2], n + i)
               for i in range(group)]
        archive.transact_many(fns)
        n += group
    out: dict[str, float] = {}
    start, wall = _cpu(), time.monotonic()
    found = verify(archive, "bench", os.path.join(root, "cache-cold"), workers=1)
    assert found.clean and found.checked == found.commits, found.findings[:3]
    out["cold_one_process_commits_per_cpu_s"] = round(found.commits / (_cpu() - start))
    out["cold_one_process_commits_per_wall_s"] = round(found.commits / (time.monotonic() - wall))
    verify(archive, "bench", os.path.join(root, "cache-start"), workers=2, parallel_from=1)  # start the forkserver
    pool_start, start, wall = _pool_cpu(), _cpu(), time.monotonic()
    found = verify(archive, "bench", os.path.join(root, "cache-pool"), workers=2)
    assert found.clean and found.checked == found.commits
    out["cold_pool_2_commits_per_wall_s"] = round(found.commits / (time.monotonic() - wall))
    pool_end = _pool_cpu()
    if pool_start is not None and pool_end is not None:
        out["cold_pool_2_commits_per_cpu_s"] = round(found.commits / (_cpu() - start + pool_end - pool_start))
    start = _cpu()
    found = verify(archive, "bench", os.path.join(root, "cache-cold"))
    assert found.checked == 0
    out["warm_commits_per_cpu_s"] = round(found.commits / (_cpu() - start))
    out["commits"] = found.commits
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--writes", type=int, default=2000, help="transactions each way for the signing cost")
    parser.add_argument("--history", type=int, default=20000, help="signed commits to verify")
    parser.add_argument("--quick", action="store_true", help="a small run: 400 writes, 5000 commits")
    parser.add_argument("--bound", action="store_true", help="the senders registered and bound to the node")
    args = parser.parse_args()
    if args.quick:
        args.writes, args.history = 400, max(PARALLEL_FROM, 5000)
    root = tempfile.mkdtemp(prefix="gitmail-bench-verify-")
    try:
        sign = signing_cost(root, args.writes)
        check = verification(root, args.history, bound=args.bound)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    load = os.getloadavg()
    print(f"load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f}")
    print(f"{'signing, per commit (CPU ms)':<44}{'value':>12}")
    for name in ("unsigned_ms_cpu", "signed_ms_cpu", "added_ms_cpu", "signature_alone_ms_cpu"):
        print(f"  {name:<42}{sign[name]:>12}")
    print(f"{'verify, ' + str(check['commits']) + ' commits':<44}{'commits/s':>12}")
    for name, value in check.items():
        if name != "commits":
            print(f"  {name:<42}{value:>12}")
    print(json.dumps({"bench": "verify", "load": round(load[0], 2), "bound": args.bound, **sign, **check}))


if __name__ == "__main__":
    main()
