"""N replicas of a stateless service on loopback: what each one's process is
given so that they run side by side (its own ports; for recall, its own data
directory and replica id, so its own embedded index and durable consumer),
and the list address the gateway and the services dial them by.

Used by `make run ARGS="--replicas recall=2 --replicas ingest=2"` and by the
test stacks (tests/reliability/procstack.py), so both run replicas the same way.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

#: Services that may run as several processes: consolidate schedules with leases, but one is enough here.
REPLICABLE = ("ingest", "recall", "enrich")


@dataclass(frozen=True)
class Replica:
    """Replica `index` of `service`: its process name, ports and data directory."""

    service: str
    index: int
    grpc_port: int
    metrics_port: int
    data_dir: Path

    @property
    def name(self) -> str:
        """The process's name: the service's for the first replica (recall), then recall-1, recall-2, ..."""
        return self.service if self.index == 0 else f"{self.service}-{self.index}"

    def env(self) -> dict[str, str]:
        """What this replica's process is given on top of the stack's environment."""
        prefix = self.service.upper()
        env = {f"{prefix}_GRPC_PORT": str(self.grpc_port), f"{prefix}_METRICS_PORT": str(self.metrics_port)}
        if self.service == "recall":
            # Its own embedded index (under its data dir) and durable consumer (services/core/replica.py).
            env |= {"MEMGRID_DATA_DIR": str(self.data_dir), "RECALL_REPLICA_ID": self.name}
        return env


def replicas_of(service: str, count: int, ports: list[tuple[int, int]], data_dir: Path) -> list[Replica]:
    """`count` replicas of `service` on `ports` ((grpc, metrics) each); the first keeps `data_dir`,
    the others (recall's) a directory of their own beside it."""
    if count > 1 and service not in REPLICABLE:
        raise ValueError(f"{service} runs as one process (replicas of {', '.join(REPLICABLE)})")
    return [
        Replica(service, i, grpc, metrics, data_dir if i == 0 else data_dir / f"{service}-{i}")
        for i, (grpc, metrics) in enumerate(ports[:count])
    ]


def address(replicas: list[Replica]) -> str:
    """The *_ADDR value naming every replica: IP address:ports, comma-separated (services/core/grpc/balancing.py)."""
    return ",".join(f"127.0.0.1:{r.grpc_port}" for r in replicas)


def parse_counts(values: list[str]) -> dict[str, int]:
    """`--replicas recall=2` values as {service: count}."""
    counts = {}
    for value in values:
        service, _, count = value.partition("=")
        if service not in REPLICABLE or not count.isdigit() or int(count) < 1:
            raise ValueError(f"--replicas takes SERVICE=N with SERVICE one of {', '.join(REPLICABLE)}: {value!r}")
        counts[service] = int(count)
    return counts
