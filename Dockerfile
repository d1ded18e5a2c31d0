# bosun as an HTTP sidecar: one warm daemon that every agent harness reaches over streamable HTTP.
#
#   docker build -t bosun .
#   docker run -d --name bosun -p 127.0.0.1:8790:8790 -e BOSUN_TOKEN=$(openssl rand -hex 24) \
#              -v bosun-data:/data bosun
#   -> MCP endpoint http://127.0.0.1:8790/mcp (header "Authorization: Bearer $BOSUN_TOKEN"),
#      liveness/readiness at http://127.0.0.1:8790/healthz (503 while the model loads, then 200 JSON).
#
# The container binds 0.0.0.0, so bosun refuses to start without BOSUN_TOKEN (a bearer secret).
# /data is $BOSUN_HOME: the SQLite store (bosun.db) and the model directory. The model is assembled
# and verified at build time (`bosun provision`), so a named volume starts pre-seeded; an empty bind
# mount is re-assembled from the installed weights at start (a copy plus sha256 checks, no network).
# Change the port with -e BOSUN_PORT=N (the entry point and the health check both read it).
# For hosts that only speak stdio: docker run -i --rm -v bosun-data:/data --entrypoint bosun bosun stdio --standalone

FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    BOSUN_HOME=/data \
    BOSUN_PORT=8790

RUN useradd --system --uid 10001 --user-group --home-dir /data --create-home --shell /usr/sbin/nologin bosun

WORKDIR /src

# Dependencies first, from pyproject.toml alone, so a source edit does not reinstall them.
COPY pyproject.toml ./
RUN python -c "import tomllib; deps = tomllib.load(open('pyproject.toml', 'rb'))['project']['dependencies']; open('/tmp/requirements.txt', 'w').write(chr(10).join(deps) + chr(10))" \
 && pip install -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

# The project itself (package data: tokenizer files and demo policies travel inside the wheel).
COPY README.md ./
COPY bosun ./bosun
COPY core ./core
COPY store ./store
COPY server ./server
RUN pip install --no-deps . \
 && rm -rf /src/build /src/*.egg-info

USER bosun
WORKDIR /data

# Assemble the model directory under $BOSUN_HOME and load it offline: the build fails unless the
# state is PRESENT (sha256 of every file checked against the pinned digests).
RUN bosun provision

# Declared after provisioning: files written to a VOLUME path by later steps would be discarded.
VOLUME ["/data"]
EXPOSE 8790

# Docker reads exit 0 as healthy and 1 as unhealthy. slim has no curl, so python's urllib probes
# /healthz; start_period covers the background model load (a few seconds; slower on a busy host).
HEALTHCHECK --interval=15s --timeout=5s --start-period=90s --retries=3 \
  CMD ["python", "-c", "import os, sys, urllib.request\ntry:\n    r = urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('BOSUN_PORT', '8790'), timeout=4)\n    sys.exit(0 if r.status == 200 else 1)\nexcept Exception:\n    sys.exit(1)"]

ENTRYPOINT ["bosun", "serve", "--host", "0.0.0.0"]
