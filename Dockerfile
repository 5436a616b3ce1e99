# ctxproxy: runs `ctxproxy serve` as a non-root user. Mirrors the README's install.
FROM python:3.11-slim
WORKDIR /app
COPY pyproject.toml README.md ./
COPY proxy ./proxy
COPY policies ./policies
RUN pip install --no-cache-dir . && useradd --create-home --uid 10001 ctxproxy
USER ctxproxy
EXPOSE 8531
ENTRYPOINT ["ctxproxy", "serve", "--host", "0.0.0.0"]
