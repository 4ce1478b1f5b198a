"""The write path against an earlier commit's, on the same machine in one
run (`make bench ARGS="--only write-ab"`): the earlier commit is checked out
into a temporary git worktree and its protobuf code generated there; both
stacks are started the same way (this venv's python -m devstack, each tree
first on PYTHONPATH, enrichment off, everything else at its default, so the
audit log is on where there is one); and the same load runs against each:
batch seeding through POST /memory/batch, then single creates through POST
/memory. The ratios, new against old, are the figures (docs/performance.md,
Write path A/B): absolute times move with the neighbours' load on a shared
machine, a ratio measured in one run much less."""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import contextmanager
from pathlib import Path

import grpc_tools

from benchmarks.report import line, percentiles, progress
from benchmarks.stack import TOKEN, BenchStack, KeepAlive, cpu_seconds

#: The last commit before the trust layer (326b223: trust state, tombstones, the audit log).
BEFORE_TRUST = "c7922b2"

ROOT = Path(__file__).resolve().parents[1]
BATCH = 500


def _git(*args: str) -> str:
    git = shutil.which("git") or "git"
    return subprocess.run(  # noqa: S603  git on this repository, the benchmark's own arguments
        [git, "-C", str(ROOT), *args], check=True, capture_output=True, text=True
    ).stdout.strip()


@contextmanager
def checked_out(commit: str):
    """`commit` in a temporary worktree with its generated protobuf code: the tree's path."""
    tree = Path(tempfile.mkdtemp(prefix="memgrid-ab-")) / "tree"
    _git("worktree", "add", "--detach", str(tree), commit)
    try:
        includes = Path(grpc_tools.__file__).parent / "_proto"
        protos = sorted(str(p.relative_to(tree)) for p in (tree / "protos").rglob("*.proto"))
        (tree / "gen").mkdir()
        subprocess.run(  # noqa: S603  this venv's protoc on the checked-out tree's own protos
            [
                sys.executable,
                "-m",
                "grpc_tools.protoc",
                "-Iprotos",
                f"-I{includes}",
                "--python_out=gen",
                "--pyi_out=gen",
                "--grpc_python_out=gen",
                *protos,
            ],
            cwd=tree,
            check=True,
        )
        yield tree
    finally:
        _git("worktree", "remove", "--force", str(tree))
        tree.parent.rmdir()


def stack_of(tree: Path, env: dict[str, str] | None = None) -> BenchStack:
    """The stack of the code in `tree`, started as every side is started (`env` on both)."""
    stack = BenchStack(ENRICHMENT_ENABLED="false", PYTHONPATH=f"{tree}:{tree / 'gen'}", **(env or {}))
    stack.cwd = tree
    return stack


def _stack_cpu(stack: BenchStack) -> dict[str, float]:
    assert stack.process is not None  # noqa: S101  an invariant (started), not an input check
    return cpu_seconds(stack.process.pid)


def seed(stack: BenchStack, tag: str, first: int, count: int) -> tuple[float, dict[str, float]]:
    """`count` memories in 500-item batches: the seconds it took and the CPU
    seconds of each process. A connection of its own: the gateway closes an
    idle one while the stack settles."""
    client = KeepAlive(stack.url, TOKEN)
    before = _stack_cpu(stack)
    started = time.perf_counter()
    try:
        for start in range(first, first + count, BATCH):
            memories = [
                {"content": f"ab {tag} seed memory {i}", "tags": ["bench"], "type": "Context"}
                for i in range(start, min(first + count, start + BATCH))
            ]
            client.request("POST", "/memory/batch", {"memories": memories})
        elapsed = time.perf_counter() - started
    finally:
        client.close()
    return elapsed, _used(before, _stack_cpu(stack))


def _used(before: dict[str, float], after: dict[str, float]) -> dict[str, float]:
    return {name: after[name] - before.get(name, 0.0) for name in after}


def _per(used: dict[str, float], count: int) -> str:
    """CPU milliseconds each process used per item (those above 0.005 s in all)."""
    return ", ".join(f"{p} {v * 1000 / count:.3f}" for p, v in sorted(used.items()) if v > 0.005)


def run(base: str, memories: int, creates: int, chunks: int, env: dict[str, str] | None = None) -> None:
    """Seed `memories` on each side in `chunks` turns (old, new, new, old, ...;
    each after its stack is quiet), then `creates` single creates on each,
    alternately (neither always first); print both sides and the ratios.
    `env`: settings both stacks start with (one the old code lacks changes the new side only)."""
    commit = _git("rev-parse", "--short", base)
    head = _git("rev-parse", "--short", "HEAD")
    dirty = " (with uncommitted changes)" if _git("status", "--porcelain", "--untracked-files=no") else ""
    print(f"\nwrite path A/B: {commit} (old) against {head}{dirty} (new), {memories} memories, {creates} creates")
    if env:
        print("both stacks with " + " ".join(f"{k}={v}" for k, v in env.items()))
    with checked_out(base) as old_tree:
        trees = {"old": old_tree, "new": ROOT}
        stacks = {name: stack_of(tree, env) for name, tree in trees.items()}
        with stacks["old"], stacks["new"]:
            _measure(stacks, memories, creates, chunks)


def _measure(stacks: dict[str, BenchStack], memories: int, creates: int, chunks: int) -> None:
    per_chunk = max(BATCH, memories // chunks // BATCH * BATCH)
    seconds = {"old": 0.0, "new": 0.0}
    cpu: dict[str, dict[str, float]] = {"old": {}, "new": {}}
    seeded = {"old": 0, "new": 0}
    turn = 0
    while seeded["old"] < memories:
        count = min(per_chunk, memories - seeded["old"])
        for name in ("old", "new") if turn % 2 == 0 else ("new", "old"):
            stacks[name].settle()
            elapsed, used = seed(stacks[name], name, seeded[name], count)
            seconds[name] += elapsed
            seeded[name] += count
            for process, value in used.items():
                cpu[name][process] = cpu[name].get(process, 0.0) + value
        turn += 1
        progress(f"seeded {seeded['old']}/{memories} on each side")
    for stack in stacks.values():
        stack.settle()
    samples: dict[str, list[float]] = {"old": [], "new": []}
    clients = {name: KeepAlive(stack.url, TOKEN) for name, stack in stacks.items()}
    before = {name: _stack_cpu(stack) for name, stack in stacks.items()}
    try:
        for i in range(creates):
            for name in ("old", "new") if i % 2 else ("new", "old"):
                started = time.perf_counter()
                clients[name].request("POST", "/memory", {"content": f"ab create memory {i}", "type": "Context"})
                samples[name].append(time.perf_counter() - started)
        # Over the creates alone: their events are published and projected meanwhile, and a
        # settling after them would count whatever scheduled pass (decay, backup) fell in it.
        create_cpu = {name: _used(before[name], _stack_cpu(stack)) for name, stack in stacks.items()}
    finally:
        for client in clients.values():
            client.close()
    rate = {name: memories / seconds[name] for name in seconds}
    p50 = {name: statistics.median(samples[name]) for name in samples}
    for name in ("old", "new"):
        line(
            f"  {name}: batch seeding", f"{rate[name]:9.0f} memories/s  (CPU ms a memory: {_per(cpu[name], memories)})"
        )
        line(f"  {name}: POST /memory", percentiles(samples[name]))
        line("", f"(CPU ms a create: {_per(create_cpu[name], creates)})")
    line("batch seeding, new / old", f"{rate['new'] / rate['old']:8.2f}x  (target >= {1 / 1.15:.2f}x)")
    line("create p50, new / old", f"{p50['new'] / p50['old']:8.2f}x  (target <= 1.15x)")
