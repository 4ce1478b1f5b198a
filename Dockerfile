# syntax=docker/dockerfile:1
# One image for every memgrid process; the command picks the service:
#   docker run memgrid services.recall.main      (ingest, recall, enrich, consolidate)
#   docker run memgrid                            (the gateway: gateway.main)
# The local models (the ONNX embedder, the spaCy pipeline, the tokenizer) are Python packages, so they
# are inside the image: nothing is downloaded at run time (HF_HUB_OFFLINE).

# Build: the pinned dependencies into a venv, and the gRPC code from the protos.
FROM python:3.11.7-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
RUN python -m venv /opt/memgrid
ENV PATH=/opt/memgrid/bin:$PATH
WORKDIR /src
COPY requirements.txt requirements-nodeps.txt constraints.txt ./
RUN pip install -r requirements.txt -c constraints.txt \
 && pip install --no-deps -r requirements-nodeps.txt
COPY protos/ protos/
RUN mkdir gen \
 && python -m grpc_tools.protoc -Iprotos \
      -I"$(python -c 'import grpc_tools, os; print(os.path.join(os.path.dirname(grpc_tools.__file__), "_proto"))')" \
      --python_out=gen --pyi_out=gen --grpc_python_out=gen protos/memgrid/v1/*.proto

# Run: the slim image (no compilers), the venv and the code, as an unprivileged user.
FROM python:3.11.7-slim-bookworm AS runtime
RUN groupadd --system --gid 10001 memgrid \
 && useradd --system --uid 10001 --gid memgrid --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin memgrid
COPY --from=build /opt/memgrid /opt/memgrid
WORKDIR /app
COPY --from=build /src/gen/ gen/
COPY services/ services/
COPY gateway/ gateway/
COPY deploy/image/health_probe.py health_probe.py
# Compiled now: the pods' root filesystem is read-only.
RUN python -m compileall -q services gateway gen health_probe.py
ENV PATH=/opt/memgrid/bin:$PATH \
    PYTHONPATH=/app:/app/gen \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    HF_HUB_OFFLINE=1 \
    XDG_CACHE_HOME=/tmp/cache \
    MEMGRID_DATA_DIR=/data
USER 10001:10001
EXPOSE 8001 50051 50052 50053 50054 9101 9102 9103 9104
# Kubernetes probes each service (deploy/k8s); one image serves five processes, so no single HEALTHCHECK fits.
HEALTHCHECK NONE
ENTRYPOINT ["python", "-m"]
CMD ["gateway.main"]
