"""python -m devstack.deploy_secrets [DIR]: the dev overlay's secrets, generated.

Writes DIR/secrets.env (deploy/k8s/overlays/dev by default; git-ignored):
the claim key, the API tokens, FalkorDB's password and the backup signing key of a development
deployment, each random, for the overlay's secretGenerator to turn into
memgrid-secrets at apply time. No secret is committed; an existing file is
kept, so a redeploy keeps its tokens (delete the file to rotate them all).
`make deploy-secrets` runs it.
"""

from __future__ import annotations

import os
import secrets
import sys
from pathlib import Path

DEV_OVERLAY = Path(__file__).resolve().parents[1] / "deploy" / "k8s" / "overlays" / "dev"
FILE_NAME = "secrets.env"
#: Each key of the dev Secret and how many random bytes its value holds (hex: twice as many characters).
KEYS = {
    "SERVICE_CLAIM_KEY": 32, "AUTOMEM_API_TOKEN": 24, "ADMIN_API_TOKEN": 24, "FALKORDB_PASSWORD": 24,
    "BACKUP_SIGNING_KEY": 32,
}  # fmt: skip


def write_secrets(directory: Path) -> tuple[Path, bool]:
    """DIR/secrets.env with a fresh value per key, readable by this user only;
    (its path, whether it was written now rather than kept)."""
    path = directory / FILE_NAME
    if path.exists():
        return path, False
    text = "".join(f"{key}={secrets.token_hex(size)}\n" for key, size in KEYS.items())
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)
    return path, True


def main(argv: list[str]) -> int:
    path, written = write_secrets(Path(argv[0]) if argv else DEV_OVERLAY)
    print(f"{'wrote' if written else 'kept'} {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
