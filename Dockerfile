# bosun as an HTTP sidecar: one warm daemon that every agent harness reaches over streamable HTTP.
#
#   docker build -t bosun .                      # needs BuildKit (RUN --mount): the default builder since Docker 23
#                                                # when the buildx plugin is installed (Debian: docker-buildx);
#                                                # DOCKER_BUILDKIT=1 on Docker 20.10. The legacy builder fails
#                                                # with "the --mount option requires BuildKit".
#   umask 077; echo "BOSUN_TOKEN=$(openssl rand -hex 24)" > bosun.env   # keep the token: the host entry needs it
#   docker run -d --name bosun -p 127.0.0.1:8790:8790 --env-file bosun.env -v bosun-data:/data bosun
#   -> MCP endpoint http://127.0.0.1:8790/mcp (header "Authorization: Bearer $BOSUN_TOKEN"),
#      liveness/readiness at http://127.0.0.1:8790/healthz (503 while the model loads, then 200 JSON).
#
# Behind a TLS-intercepting proxy, hand pip your CA bundle as a build secret (never stored in a
# layer) and, if you use a mirror, its index URL as a build argument (only the build stage sees it):
#   docker build --secret id=ca,src=/etc/ssl/certs/ca-certificates.crt \
#                --build-arg PIP_INDEX_URL=https://pypi.example.internal/simple -t bosun .
#
# The container binds 0.0.0.0, so bosun refuses to start without BOSUN_TOKEN (a bearer secret).
# /data is $BOSUN_HOME: the SQLite store (bosun.db) and the model directory, owned by uid:gid
# 10001:10001. A named volume starts as a copy of the image's /data (model included). A bind mount
# must be writable by 10001 (`chown 10001:10001 ./data`) or the container run as the folder's owner
# (`--user "$(id -u):$(id -g)"`); otherwise bosun exits 2 with one line saying so. An empty writable
# bind mount gets the model re-assembled at start from the installed weights (copy + sha256, no network).
# Change the port with -e BOSUN_PORT=N (the entry point and the health check both read it).
# Several sidecars, one state: -e BOSUN_DATABASE_URL=postgresql://... puts the store in PostgreSQL
# (compose.postgres.yaml; docs/deployment.md says what stays in /data and what to back up).
# For hosts that only speak stdio: docker run -i --rm -v bosun-data:/data --entrypoint bosun bosun stdio --standalone

# ---- the runtime dependency list, alone: editing anything else in pyproject.toml (dev extras, tool
# settings) then leaves it byte-identical, and the dependency layer below stays cached. The postgres
# extra (psycopg) is in: one image serves BOSUN_DATABASE_URL=postgresql://... (compose.postgres.yaml)
# as well as SQLite in /data ------------------------------------------------------------------------
FROM python:3.11-slim AS requirements
COPY pyproject.toml /tmp/
RUN python -c "import tomllib; p = tomllib.load(open('/tmp/pyproject.toml', 'rb'))['project']; deps = p['dependencies'] + p['optional-dependencies']['postgres']; open('/requirements.txt', 'w').write(chr(10).join(deps) + chr(10))"

# ---- build stage: a virtualenv at /opt/bosun, installed from the lock (constraints.txt) ----------
FROM python:3.11-slim AS build

ENV PYTHONDONTWRITEBYTECODE=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1
# A package index of your own (mirror or proxy). Declared in this stage only: the final image's
# history and environment do not carry it.
ARG PIP_INDEX_URL=https://pypi.org/simple

WORKDIR /src
RUN python -m venv /opt/bosun

# Dependencies first (pyproject's list, pinned by constraints.txt), so a source edit does not
# reinstall them. The optional secret "ca" is a PEM bundle for pip (mounted for this step only).
COPY --from=requirements /requirements.txt ./
COPY constraints.txt ./
RUN --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export PIP_CERT=/run/secrets/ca; fi \
 && /opt/bosun/bin/pip install -c constraints.txt -r requirements.txt setuptools wheel

# The project itself, built without network (setuptools and wheel come from the lock above); package
# data (tokenizer files, demo policies) travels inside the wheel. /src stays in this stage.
COPY pyproject.toml README.md ./
COPY bosun ./bosun
COPY core ./core
COPY store ./store
COPY server ./server
RUN /opt/bosun/bin/pip install --no-deps --no-build-isolation . \
 && /opt/bosun/bin/pip uninstall -y setuptools wheel pip

# ---- the image: Python, the virtualenv, an unprivileged user, the verified model ----------------
FROM python:3.11-slim

# XDG_CACHE_HOME: onnxruntime writes a device id under $XDG_CACHE_HOME/Microsoft (else ~/.cache):
# keep it out of the volume. HF_HUB_DISABLE_TELEMETRY / DO_NOT_TRACK: no usage pings.
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PATH=/opt/bosun/bin:$PATH \
    XDG_CACHE_HOME=/tmp/.cache \
    HF_HUB_DISABLE_TELEMETRY=1 \
    DO_NOT_TRACK=1 \
    BOSUN_HOME=/data \
    BOSUN_PORT=8790

# Pinned ids (a host sees the same owner on every machine); an ordinary account above UID_MIN, so no
# SYS_UID_MAX warning; no home directory (nothing copied into /data; $HOME is /nonexistent).
RUN groupadd --gid 10001 bosun \
 && useradd --uid 10001 --gid 10001 --no-create-home --home-dir /nonexistent --no-log-init \
            --shell /usr/sbin/nologin bosun \
 && install -d -o 10001 -g 10001 -m 0700 /data

COPY --from=build /opt/bosun /opt/bosun

USER 10001:10001
WORKDIR /data

# Assemble the model directory under $BOSUN_HOME and load it offline: the build fails unless the
# state is PRESENT (sha256 of every file checked against the pinned digests).
RUN bosun provision

# Declared after provisioning: files written to a VOLUME path by later steps would be discarded.
VOLUME ["/data"]
EXPOSE 8790

# Docker reads exit 0 as healthy and 1 as unhealthy. slim has no curl; the probe is python with a
# bare socket (GET /healthz, status 200 or not): 34 ms CPU per probe against 78 ms with urllib, which
# matters at one probe every 5 s. The first probe comes one --interval after start. There is no
# --start-interval here: Docker Engine < 25 refuses to build a Dockerfile that has one ("Unknown
# flag: start-interval"); on Engine >= 25 add `--health-start-interval=1s` to docker run, or
# `start_interval` in compose. start_period covers the background model load (slower on a busy host).
HEALTHCHECK --interval=5s --timeout=4s --start-period=90s --retries=3 \
  CMD ["python", "-c", "import os, socket, sys\ntry:\n    s = socket.create_connection(('127.0.0.1', int(os.environ.get('BOSUN_PORT', '8790'))), timeout=3)\n    s.sendall(b'GET /healthz HTTP/1.0\\r\\nHost: 127.0.0.1\\r\\n\\r\\n')\n    head = b''\n    while b'\\r\\n' not in head and len(head) < 64:\n        chunk = s.recv(64)\n        if not chunk:\n            break\n        head += chunk\n    sys.exit(0 if head.split(b' ')[1:2] == [b'200'] else 1)\nexcept Exception:\n    sys.exit(1)"]

ENTRYPOINT ["bosun", "serve", "--host", "0.0.0.0"]
