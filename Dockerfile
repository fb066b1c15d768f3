# syntax=docker/dockerfile:1
# One image for all five services; the command picks the service: `layby serve <name>`.
# Why it is built this way: docs/decisions/0024-image-and-lock-file.md; how to build it, its size
# and its health check: docs/kubernetes.md#image.

# A tag, not a digest: a rebuild picks up the base's security fixes (ADR 0024). To reproduce a
# build exactly, pass the digest: --build-arg PYTHON_IMAGE=python:3.11-slim-bookworm@sha256:...
ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS builder
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
# The locked runtime dependencies first, on their own: this layer is rebuilt only when the lock
# or the install script changes, never for a change of our code.
COPY deploy/image/requirements.lock deploy/image/install.sh deploy/image/
RUN --mount=type=cache,target=/root/.cache/pip deploy/image/install.sh deps /opt/layby
# Then our code, as a wheel installed without its dependencies (all are in the venv already).
COPY pyproject.toml README.md ./
COPY contracts ./contracts
COPY libs ./libs
COPY services ./services
RUN --mount=type=cache,target=/root/.cache/pip python -m pip wheel --no-deps -w /wheels . \
    && deploy/image/install.sh app /opt/layby /wheels

FROM ${PYTHON_IMAGE}
ARG VERSION=0.1.0
ARG REVISION=unknown
LABEL org.opencontainers.image.title="Layby" \
      org.opencontainers.image.description="Human-in-the-loop asks for AI agents: the five services (layby serve ask|door|delivery|resume|sweeper)" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.vendor="Layby"
# A numeric user (runAsNonRoot can verify it) that owns only the two mount points the
# `nats-config` command writes to in Docker Compose.
RUN groupadd --system --gid 10001 layby \
    && useradd --system --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent \
       --shell /usr/sbin/nologin layby \
    && mkdir -p /keys /nats-auth && chown 10001:10001 /keys /nats-auth
COPY --from=builder /opt/layby /opt/layby
USER 10001:10001
# Listen on every interface (the container's network is the boundary); JSON log lines; the
# health port for the services without a door (the door ignores it).
ENV PATH=/opt/layby/bin:$PATH \
    PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    LAYBY_HTTP_HOST=0.0.0.0 \
    LAYBY_HTTP_PORT=8000 \
    LAYBY_HEALTH_PORT=8081 \
    LAYBY_LOG_FORMAT=json
EXPOSE 8000 8081
# Asks /healthz on the health port, else on the door's port: whichever the service serves.
# Kubernetes ignores it and uses the chart's HTTP probes (docs/kubernetes.md#probes).
HEALTHCHECK --interval=30s --timeout=5s --start-period=60s --retries=3 \
    CMD ["python", "-m", "layby_server.operations.healthcheck"]
ENTRYPOINT ["layby"]
CMD ["serve", "door"]
