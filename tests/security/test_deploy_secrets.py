"""No secret is committed under deploy/ (issue 24, Deployment): no Secret
manifest with data, no secretGenerator with literals, and the files a
generator reads are git-ignored and untracked; the dev overlay's are written
at apply time by `make deploy-secrets` (devstack/deploy_secrets.py), random
and readable by their owner only. (tests/deploy renders the overlays with
them and checks that FalkorDB requires the password in dev too.)"""

from __future__ import annotations

import stat
import subprocess
from pathlib import Path

import yaml

from devstack.deploy_secrets import KEYS, write_secrets

ROOT = Path(__file__).resolve().parents[2]
DEPLOY = ROOT / "deploy"


def manifests() -> list[tuple[Path, dict]]:
    found = []
    for path in sorted(DEPLOY.rglob("*.y*ml")):
        found.extend((path, doc) for doc in yaml.safe_load_all(path.read_text()) if isinstance(doc, dict))
    return found


def git(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=30)


def test_no_secret_with_literal_data_is_committed():
    docs = manifests()
    assert docs, "no manifests found under deploy/"
    for path, doc in docs:
        if doc.get("kind") == "Secret":
            assert not doc.get("data") and not doc.get("stringData"), f"{path}: a Secret with its values"
        for generator in doc.get("secretGenerator") or []:
            assert not generator.get("literals"), f"{path}: secretGenerator {generator['name']} has literals"
            for entry in (generator.get("envs") or []) + (generator.get("files") or []):
                source = path.parent / entry.split("=", 1)[-1]
                relative = str(source.relative_to(ROOT))
                assert git("check-ignore", "-q", relative).returncode == 0, f"{relative} is not git-ignored"
                assert not git("ls-files", relative).stdout.strip(), f"{relative} is committed"


def test_the_dev_secrets_are_generated_random_private_and_kept(tmp_path):
    first, written = write_secrets(tmp_path)
    assert written and stat.S_IMODE(first.stat().st_mode) == 0o600
    values = dict(line.split("=", 1) for line in first.read_text().split())
    assert set(values) == set(KEYS) and all(len(v) >= 32 for v in values.values())
    again, rewritten = write_secrets(tmp_path)
    assert again == first and not rewritten and dict(line.split("=", 1) for line in again.read_text().split()) == values
    other, _ = write_secrets(tmp_path / "elsewhere" if (tmp_path / "elsewhere").mkdir() is None else tmp_path)
    assert set(dict(line.split("=", 1) for line in other.read_text().split()).values()).isdisjoint(values.values())
