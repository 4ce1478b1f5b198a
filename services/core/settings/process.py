"""Every process: its data directory, how it waits for its dependencies, how it stops and logs."""

from __future__ import annotations

from pathlib import Path

from services.core.settings.base import Group


class ProcessSettings(Group):
    """The process: its data directory, how it waits for FalkorDB and NATS, how it stops, how it logs."""

    # Where the process keeps its data.
    memgrid_data_dir: Path = Path("data")  # FalkorDB's, NATS's and the vector index's data, backups, api_token

    # Resilience.
    dependency_wait_seconds: float = 120.0  # how long a service waits at start-up for FalkorDB and NATS
    retry_initial_seconds: float = 0.1  # the first wait between two connection attempts ...
    retry_max_seconds: float = 2.0  # ... growing up to this
    shutdown_grace_seconds: float = 5.0  # on SIGTERM, how long calls in flight may finish

    # Logging.
    log_level: str = "INFO"  # DEBUG, INFO, WARNING, ERROR
    log_json: bool = True  # JSON lines; false: readable console lines
