"""`memgrid import` and `memgrid export` through the gateway: memories a second,
the console script run as a user runs it, on a fresh embedded stack."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks.report import line, progress
from benchmarks.stack import TOKEN, BenchStack, cpu_seconds


def _memgrid(stack: BenchStack, *args: str) -> dict:
    """The console script (python -m cli when it is not installed) with --json; its report."""
    script = Path(sys.executable).with_name("memgrid")
    command = [str(script)] if script.exists() else [sys.executable, "-m", "cli"]
    env = {**os.environ, "MEMGRID_URL": stack.url, "MEMGRID_TOKEN": TOKEN}
    done = subprocess.run([*command, "--json", *args], env=env, capture_output=True, text=True, check=False)  # noqa: S603  the benchmark runs its own memgrid CLI with arguments it built
    if done.returncode != 0:
        raise RuntimeError(f"memgrid {' '.join(args)}: exit {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def _children_cpu() -> float:
    """CPU seconds (user + system) of the finished child processes (the command)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _input(path: Path, count: int) -> None:
    with path.open("w") as out:
        for i in range(count):
            memory = {
                "content": f"imported memory {i}: the build on host {i % 97} needed flag {i % 13} after the upgrade",
                "type": "Context",
                "tags": ["import", f"host-{i % 97}"],
                "importance": 0.5,
                "metadata": {"n": i},
            }
            out.write(json.dumps(memory) + "\n")


def run(count: int, parallel: int, batch_size: int, only_import: bool = False) -> None:
    # Enrichment off: the figure is the write path's, not the models' CPU.
    with (
        tempfile.TemporaryDirectory(prefix="memgrid-import-") as folder,
        BenchStack(ENRICHMENT_ENABLED="false") as stack,
    ):
        source = Path(folder) / "memories.jsonl"
        _input(source, count)
        print(f"\nimport/export: {count} memories through the gateway, the memgrid command (enrichment off)")
        progress(f"importing {count} memories, {parallel} batches of {batch_size} in flight")
        # CPU as well as the wall clock: on a shared machine the rate moves with
        # the neighbours' load, the CPU a memory costs much less.
        load_before, stack_before, command_before = os.getloadavg()[0], cpu_seconds(stack.process.pid), _children_cpu()
        started = time.perf_counter()
        report = _memgrid(stack, "import", str(source), "--batch-size", str(batch_size), "--parallel", str(parallel))
        wall = time.perf_counter() - started
        used = {k: v - stack_before.get(k, 0.0) for k, v in cpu_seconds(stack.process.pid).items()}
        used["memgrid (the command)"] = _children_cpu() - command_before
        line(
            f"memgrid import x{count}",
            f"{report['memories_per_second']:9.0f} memories/s  ({report['elapsed_seconds']:.2f} s importing, "
            f"{wall:.2f} s with the command's start; batch {batch_size}, {parallel} in flight)",
        )
        line("  CPU a memory, every process", f"{sum(used.values()) * 1000 / count:9.3f} ms")
        for name, seconds in sorted(used.items(), key=lambda kv: -kv[1]):
            if seconds * 1000 / count >= 0.005:
                line(f"    {name}", f"{seconds * 1000 / count:9.3f} ms")
        line("  load average (1 min)", f"{load_before:5.2f} before, {os.getloadavg()[0]:5.2f} after")
        if only_import:
            return
        output = Path(folder) / "export.jsonl"
        started = time.perf_counter()
        exported = _memgrid(stack, "export", str(output))
        elapsed = time.perf_counter() - started
        line(
            f"memgrid export x{exported['count']}", f"{exported['count'] / elapsed:9.0f} memories/s  ({elapsed:.2f} s)"
        )
