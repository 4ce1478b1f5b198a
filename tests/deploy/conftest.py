"""The deployment's checks run offline: kustomize renders both overlays, and
the tools of .venv-tools (`make tools`) read what it rendered."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
K8S = ROOT / "deploy" / "k8s"
TOOLS = ROOT / ".venv-tools" / "bin"
OVERLAYS = ("dev", "prod")


def tool(name: str) -> str:
    """A tool of .venv-tools (kubectl: the machine's first, as the Makefile has it)."""
    found = shutil.which(name) if name == "kubectl" else None
    path = found or TOOLS / name
    if not Path(path).exists():
        pytest.fail(f"{name} is missing: run `make tools` (it installs the deployment checks' tools into .venv-tools)")
    return str(path)


@pytest.fixture(scope="session")
def rendered(tmp_path_factory) -> dict[str, Path]:
    """Each overlay rendered by kustomize into a file: {overlay: path}. From a copy of deploy/k8s
    whose dev overlay has its secrets.env written as `make deploy-secrets` writes it (the file is
    git-ignored: a checkout has none)."""
    from devstack.deploy_secrets import write_secrets

    out = tmp_path_factory.mktemp("rendered")
    k8s = out / "k8s"
    shutil.copytree(K8S, k8s, ignore=shutil.ignore_patterns("secrets.env"))
    write_secrets(k8s / "overlays" / "dev")
    files = {}
    for overlay in OVERLAYS:
        result = subprocess.run(
            [tool("kubectl"), "kustomize", str(k8s / "overlays" / overlay)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert result.returncode == 0, f"kustomize failed on {overlay}: {result.stderr}"
        files[overlay] = out / f"{overlay}.yaml"
        files[overlay].write_text(result.stdout)
    return files


@pytest.fixture(scope="session")
def objects(rendered) -> dict[str, list[dict]]:
    """Each overlay's rendered objects."""
    return {overlay: [d for d in yaml.safe_load_all(path.read_text()) if d] for overlay, path in rendered.items()}
