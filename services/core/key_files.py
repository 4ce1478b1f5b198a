"""A secret kept in a file under the data directory, minted on first start:
the service plane's claim key and the backups' signing key both live so."""

from __future__ import annotations

import os
import secrets
import time
from collections.abc import Callable
from pathlib import Path


def load_or_create_key_file(path: Path, check: Callable[[str], bytes]) -> bytes:
    """The key saved at `path`, minted on first start (0600), passed through
    `check`. Several processes may start at once: the first creates the file
    exclusively, the others wait for its content."""
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        deadline = time.monotonic() + 5.0
        while True:
            saved = path.read_text().strip()
            if saved or time.monotonic() > deadline:
                return check(saved)
            time.sleep(0.05)  # its creator is writing it
    with os.fdopen(fd, "w") as handle:
        key = secrets.token_urlsafe(48)
        handle.write(key + "\n")
    return key.encode()
