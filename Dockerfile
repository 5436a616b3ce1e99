# ctxproxy: runs `ctxproxy serve` as a non-root user. Mirrors the README's install.
#
#   docker build -t ctxproxy .
#   docker run -p 8531:8531 ctxproxy        # the embedded default (clients send their own key)
#   docker run -p 8531:8531 -v "$PWD/config.yaml:/etc/ctxproxy/config.yaml:ro" \
#       ctxproxy --config /etc/ctxproxy/config.yaml                     # your config, read-only
#
# A relative `policies_dir` in the config is relative to the config file: mount a policies
# directory next to it (e.g. `-v "$PWD/policies:/etc/ctxproxy/policies:ro"`). The health check
# polls /healthz on port 8531: keep `server.port` at 8531 inside the container.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md LICENSE ./
COPY proxy ./proxy
COPY policies ./policies
RUN pip install --no-cache-dir . && useradd --create-home --uid 10001 ctxproxy
USER ctxproxy
EXPOSE 8531
HEALTHCHECK --interval=10s --timeout=3s --start-period=20s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8531/healthz', timeout=2)"]
ENTRYPOINT ["ctxproxy", "serve", "--host", "0.0.0.0"]
