# One image for all five services; the command picks the service: `layby serve <name>`.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY contracts ./contracts
COPY libs ./libs
COPY services ./services
RUN pip install --no-cache-dir . && useradd --system --uid 10001 layby \
    && mkdir -p /keys /nats-auth && chown 10001 /keys /nats-auth
USER 10001
ENV LAYBY_LOG_FORMAT=json
ENTRYPOINT ["layby"]
CMD ["serve", "door"]
