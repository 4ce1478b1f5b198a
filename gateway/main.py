"""python -m gateway.main: serve the REST surface on $PORT (default 8001)."""

from __future__ import annotations

import os

# grpc reads this when it is imported, so it is set before anything imports it.
# Without the EventEngine client the gateway's calls to the services cost
# less CPU (docs/performance.md); a value set outside wins.
os.environ.setdefault("GRPC_EXPERIMENTS", "-event_engine_client")

import structlog  # noqa: E402
import uvicorn  # noqa: E402

from gateway.app import GROUPS, create_app  # noqa: E402
from gateway.auth import load_or_create_token  # noqa: E402
from gateway.tokens_file import TokensFileError  # noqa: E402
from services.core.observability import configure_logging, start_metrics_server  # noqa: E402
from services.core.settings import Settings  # noqa: E402


def main() -> None:
    settings = Settings.load(*GROUPS)
    configure_logging("gateway", level=settings.process.log_level, json_logs=settings.process.log_json)
    log = structlog.get_logger()
    token = settings.gateway.automem_api_token
    host = settings.gateway.gateway_host
    if not token and settings.gateway.memgrid_tokens_file is None:
        token, created = load_or_create_token(settings.process.memgrid_data_dir)
        host = host or "127.0.0.1"  # a generated token: local access only
        where = settings.process.memgrid_data_dir / "api_token"
        print(f"memgrid API token ({'generated' if created else 'loaded'}, saved in {where}): {token}", flush=True)
    host = host or "0.0.0.0"  # noqa: S104  only with a configured token (a pod); a generated one binds 127.0.0.1
    try:
        app = create_app(settings, token)
    except TokensFileError as exc:
        raise SystemExit(f"gateway not started: {exc}") from None
    # Metrics on a port of their own (GATEWAY_METRICS_PORT): what the Ingress routes never serves them.
    start_metrics_server(settings.gateway.gateway_metrics_port, host=host)
    log.info(
        "gateway listening", host=host, port=settings.gateway.port, metrics_port=settings.gateway.gateway_metrics_port
    )
    uvicorn.run(
        app,
        host=host,
        port=settings.gateway.port,
        log_level="warning",
        access_log=False,  # requests are counted in Prometheus; a log line each would cost more than routing
        timeout_graceful_shutdown=int(settings.process.shutdown_grace_seconds),
    )


if __name__ == "__main__":
    main()
