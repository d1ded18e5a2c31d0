#!/usr/bin/env bash
# The Docker sidecar built and run for real; prints one markdown table (and writes it to --out).
#
#   sudo bash bench/docker_check.sh [--cold] [--worktree] [--out bench/results/docker.md]
#
# 1. A Docker engine: the running one, else (root only) `dockerd` started here and stopped at the end.
# 2. The base image python:3.11-slim: present, else pulled, else (root only, Docker Hub unreachable) a
#    stand-in built with debootstrap from Debian's packages and imported under that name (the table
#    says which, and how the stand-in differs).
# 3. The image, built with BuildKit from the committed tree (`git archive HEAD`; --worktree: the
#    working tree as it is), --cold: without the layer cache; then a source-only rebuild.
# 4. Runs: a named volume (health, real MCP calls with the token from an env file, restart, a new
#    container, docker kill, docker stop time); a root-owned bind mount (must exit 2 with one line);
#    the same folder chowned to 10001; a folder of another user with --user.
# The MCP calls use the repo venv's python (bench/docker_mcp.py). Host port: $BOSUN_CHECK_PORT (18790).
# A CA bundle for pip inside the build: $BOSUN_BUILD_CA, else $PIP_CERT when set (a BuildKit secret).
set -euo pipefail
cd "$(dirname "$0")/.."
repo="$PWD"
out="" cold=0 worktree=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out="$2"; shift 2 ;;
    --cold) cold=1; shift ;;
    --worktree) worktree=1; shift ;;
    *) echo "usage: $0 [--cold] [--worktree] [--out FILE]" >&2; exit 2 ;;
  esac
done
port="${BOSUN_CHECK_PORT:-18790}"
image="bosun:check"
work="$(mktemp -d /tmp/bosun-docker-check.XXXXXX)"
chmod 755 "$work"
py="$repo/.venv/bin/python"
rows=()
row() { rows+=("| $1 | $2 |"); printf '  %-44s %s\n' "$1" "$2" >&2; }
now() { date +%s.%N; }
since() { python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.1f}')" "$1" "$(now)"; }
say() { printf '== %s\n' "$*" >&2; }

# ---- 1. the engine -------------------------------------------------------------------------------
started_engine=""
cleanup() {
  for c in bosun-check-vol bosun-check-bind bosun-check-user; do docker rm -f "$c" >/dev/null 2>&1 || true; done
  docker volume rm bosun-check-data >/dev/null 2>&1 || true
  rm -rf "$work"
  if [ -n "$started_engine" ]; then kill "$started_engine" 2>/dev/null || true; fi
}
trap cleanup EXIT
if ! docker info >/dev/null 2>&1; then
  if [ "$(id -u)" != 0 ]; then
    echo "no Docker engine answers, and starting one (dockerd) needs root: run this as root or start Docker" >&2
    exit 1
  fi
  command -v dockerd >/dev/null || { echo "no dockerd: apt-get install -y docker.io" >&2; exit 1; }
  say "starting dockerd (log: $work/dockerd.log)"
  dockerd >"$work/dockerd.log" 2>&1 &
  started_engine=$!
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
  docker info >/dev/null 2>&1 || { tail -20 "$work/dockerd.log" >&2; exit 1; }
fi
engine="$(docker version --format '{{.Server.Version}} (API {{.Server.APIVersion}})')"
row "engine" "Docker $engine${started_engine:+, started by this script}; load average $(cut -d' ' -f1-3 /proc/loadavg), $(nproc) cores"

# A CLI that builds with BuildKit (secrets need it): buildx, else the engine's built-in BuildKit.
build() {
  if docker buildx version >/dev/null 2>&1; then docker buildx build --load "$@"
  elif [ -x /usr/bin/docker ] && /usr/bin/docker version --format '{{.Client.Version}}' 2>/dev/null | grep -q '^2[0-2]\.'; then
    DOCKER_BUILDKIT=1 /usr/bin/docker build "$@"  # Debian's docker.io CLI: BuildKit without buildx
  else DOCKER_BUILDKIT=1 docker build "$@"
  fi
}

# ---- 2. the base image ---------------------------------------------------------------------------
base="python:3.11-slim"
standin_note="Debian bookworm minbase (debootstrap) + Debian's python3.11 3.11.2 in /usr/bin (python -> /usr/local/bin/python symlink), no system pip (ensurepip via python3.11-venv), EXTERNALLY-MANAGED marker present; the real image has CPython 3.11.x built from source in /usr/local and pip"
if docker image inspect "$base" >/dev/null 2>&1; then
  if docker image inspect "$base" --format '{{.Comment}}' | grep -q stand-in; then
    row "base image" "stand-in already imported: $standin_note"
  else
    row "base image" "$base (present)"
  fi
elif timeout 120 docker pull "$base" >/dev/null 2>&1; then
  row "base image" "$base (pulled)"
else
  [ "$(id -u)" = 0 ] && command -v debootstrap >/dev/null \
    || { echo "$base cannot be pulled; a stand-in needs root and debootstrap" >&2; exit 1; }
  say "building a stand-in for $base with debootstrap"
  t=$(now)
  rootfs="$work/rootfs"
  debootstrap --variant=minbase \
    --include=python3.11,python3.11-venv,python3-distutils,python3-lib2to3,python3-minimal,python3,libpython3-stdlib,python3-pip-whl,python3-setuptools-whl,ca-certificates \
    bookworm "$rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
  ln -sf /usr/bin/python3.11 "$rootfs/usr/local/bin/python"
  ln -sf /usr/bin/python3.11 "$rootfs/usr/local/bin/python3"
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs/debootstrap"
  tar -C "$rootfs" -c . | docker import \
    --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' --change 'CMD ["python3"]' \
    --message "stand-in for $base: Debian bookworm (debootstrap minbase) + Debian python3.11" - "$base" >/dev/null
  rm -rf "$rootfs"
  row "base image" "stand-in built in $(since "$t") s: $standin_note"
fi
row "base image size" "$(docker image inspect "$base" --format '{{.Size}}' | awk '{printf "%.0f MB", $1/1e6}')"

# ---- 3. the image --------------------------------------------------------------------------------
ca="${BOSUN_BUILD_CA:-${PIP_CERT:-}}"
secret=()
[ -n "$ca" ] && [ -s "$ca" ] && secret=(--secret "id=ca,src=$ca")
context="$work/context"
mkdir -p "$context"
if [ "$worktree" = 1 ]; then
  cp -r Dockerfile .dockerignore pyproject.toml constraints.txt README.md bosun core store server "$context/"
  what="working tree"
else
  git archive HEAD | tar -x -C "$context"
  what="commit $(git rev-parse --short HEAD)"
fi
say "building $image from the $what"
t=$(now)
nocache=()
[ "$cold" = 1 ] && nocache=(--no-cache)
build "${nocache[@]}" "${secret[@]}" --progress=plain -t "$image" "$context" >"$work/build.log" 2>&1 \
  || { tail -30 "$work/build.log" >&2; exit 1; }
row "build of the $what ($([ "$cold" = 1 ] && echo "cold, --no-cache" || echo "layer cache as found"))" "$(since "$t") s${secret:+ (pip CA bundle as a BuildKit secret)}"
src="$work/context-src"
cp -r "$context" "$src"
echo "# source-only change $(now)" >>"$src/server/__init__.py"
t=$(now)
build "${secret[@]}" --progress=plain -t bosun:check-src "$src" >"$work/build-src.log" 2>&1 \
  || { tail -30 "$work/build-src.log" >&2; exit 1; }
row "source-only rebuild" "$(since "$t") s (dependency layers reused: $(grep -c ' CACHED' "$work/build-src.log") steps cached)"
docker rmi bosun:check-src >/dev/null 2>&1 || true
row "image size" "$(docker image inspect "$image" --format '{{.Size}}' | awk '{printf "%.0f MB", $1/1e6}')"
facts="$(docker run --rm --entrypoint sh "$image" -c '
  dots=$(ls -A /data | grep "^\." | tr "\n" " "); secrets=$(ls -A /run/secrets 2>/dev/null | tr "\n" " ")
  printf "%s; /data %s; dotfiles in /data: %s; /src: %s; /run/secrets: %s; HOME=%s" "$(id)" \
    "$(stat -c "%u:%g %A" /data)" "${dots:-none}" "$(test -e /src && echo present || echo absent)" \
    "${secrets:-empty}" "$HOME"')"
row "image user and layout" "$facts"
leak="none"
docker history --no-trunc "$image" | grep -q -i -e PIP_INDEX_URL -e PIP_CERT -e 'BEGIN CERT' && leak="FOUND in history"
docker image inspect "$image" --format '{{json .Config.Env}}' | grep -q -e PIP_INDEX_URL -e PIP_CERT && leak="FOUND in env"
row "index URL / CA secret in the final image" "$leak"

# ---- 4. runs -------------------------------------------------------------------------------------
(umask 077 && echo "BOSUN_TOKEN=$(openssl rand -hex 24)" >"$work/bosun.env")
set -a; . "$work/bosun.env"; set +a
url="http://127.0.0.1:$port/mcp"

cpu_s() {  # CPU seconds the container has used so far (cgroup v1 or v2), or "?"
  local id ns
  id=$(docker inspect -f '{{.Id}}' "$1")
  for f in "/sys/fs/cgroup/cpuacct/docker/$id/cpuacct.usage" "/sys/fs/cgroup/cpu,cpuacct/docker/$id/cpuacct.usage"; do
    [ -r "$f" ] && { python3 -c "import sys; print(f'{int(sys.argv[1]) / 1e9:.2f}')" "$(cat "$f")"; return; }
  done
  for f in "/sys/fs/cgroup/system.slice/docker-$id.scope/cpu.stat" "/sys/fs/cgroup/docker/$id/cpu.stat"; do
    [ -r "$f" ] && { ns=$(awk '/^usage_usec/ {print $2 * 1000}' "$f"); python3 -c "import sys; print(f'{float(sys.argv[1]) / 1e9:.2f}')" "$ns"; return; }
  done
  echo "?"
}
# $1 container, $2 start time -> "<s to /healthz 200> <s to Docker healthy> <CPU s used by then>"
wait_healthy() {
  local c="$1" t="$2" ready="" status
  for _ in $(seq 600); do
    if [ -z "$ready" ] && python3 -c "import urllib.request, sys; sys.exit(urllib.request.urlopen('http://127.0.0.1:$port/healthz', timeout=2).status != 200)" 2>/dev/null; then
      ready=$(since "$t")
    fi
    status=$(docker inspect -f '{{.State.Status}} {{if .State.Health}}{{.State.Health.Status}}{{end}}' "$c")
    case "$status" in
      "running healthy") echo "${ready:-?} $(since "$t") $(cpu_s "$c")"; return 0 ;;
      exited*|dead*) echo "FAILED: exited with $(docker inspect -f '{{.State.ExitCode}}' "$c")"; return 1 ;;
    esac
    sleep 0.2
  done
  echo "FAILED: not healthy after 120 s"; return 1
}
healthy_in() {  # $1 container, $2 start time -> one phrase for the table
  local r
  r=$(wait_healthy "$1" "$2") || { echo "$r"; return 0; }
  set -- $r
  echo "healthy after $2 s (container CPU $3 s)"
}
mcp() { "$py" bench/docker_mcp.py "$url" "$1" "$work/state.json"; }
run_vol() { docker run -d --name bosun-check-vol --env-file "$work/bosun.env" -p "127.0.0.1:$port:8790" -v bosun-check-data:/data "$image" >/dev/null; }

say "named volume"
docker volume rm bosun-check-data >/dev/null 2>&1 || true
t=$(now); run_vol
if r=$(wait_healthy bosun-check-vol "$t"); then
  read -r ready healthy cpu <<<"$r"
  row "named volume: /healthz 200 / Docker healthy" "${ready} s / ${healthy} s after docker run (container CPU by then: ${cpu} s)"
else
  row "named volume: /healthz 200 / Docker healthy" "$r; $(docker logs bosun-check-vol 2>&1 | tail -1)"
fi
row "MCP calls with the token (write)" "$(mcp write || true)"
code=$(python3 - "$url" <<'PY'
import sys, urllib.error, urllib.request
request = urllib.request.Request(sys.argv[1], data=b"{}", headers={"Content-Type": "application/json"})
try:
    print(urllib.request.urlopen(request, timeout=5).status)
except urllib.error.HTTPError as exc:
    print(exc.code)
except OSError as exc:
    print(f"no answer ({exc})")
PY
)
row "MCP without the token" "HTTP $code"
row "no dotfiles or caches written to the volume" "$(docker exec bosun-check-vol sh -c 'ls -A /data | tr "\n" " "')"
c0=$(cpu_s bosun-check-vol); sleep 30; c1=$(cpu_s bosun-check-vol)
row "idle CPU over 30 s (health probes every 5 s)" "$(python3 -c "import sys; print(f'{float(sys.argv[2]) - float(sys.argv[1]):.2f} s = {(float(sys.argv[2]) - float(sys.argv[1])) / 30 * 100:.1f}% of a core')" "$c0" "$c1" 2>/dev/null || echo '?')"
t=$(now); docker stop bosun-check-vol >/dev/null
row "docker stop (SIGTERM to exit)" "$(since "$t") s, exit code $(docker inspect -f '{{.State.ExitCode}}' bosun-check-vol)"
t=$(now); docker start bosun-check-vol >/dev/null; h=$(healthy_in bosun-check-vol "$t")
row "stop + start: data kept" "$h; $(mcp verify || true)"
docker rm -f bosun-check-vol >/dev/null
t=$(now); run_vol; h=$(healthy_in bosun-check-vol "$t")
row "new container, same volume" "$h; $(mcp verify || true)"
docker kill bosun-check-vol >/dev/null
t=$(now); docker start bosun-check-vol >/dev/null; h=$(healthy_in bosun-check-vol "$t")
row "after docker kill (SIGKILL)" "$h; $(mcp verify || true)"
docker rm -f bosun-check-vol >/dev/null

say "bind mount owned by root"
bind="$work/data"
mkdir -m 755 "$bind"
chown 0:0 "$bind" 2>/dev/null || true
docker run -d --name bosun-check-bind --env-file "$work/bosun.env" -p "127.0.0.1:$port:8790" -v "$bind:/data" "$image" >/dev/null
docker wait bosun-check-bind >"$work/exit" 2>/dev/null || true
logs="$(docker logs bosun-check-bind 2>&1)"
row "bind mount owned by $(stat -c %u:%g "$bind"): serve" "exit $(cat "$work/exit"), $(grep -c . <<<"$logs") line(s), traceback: $(grep -q Traceback <<<"$logs" && echo yes || echo no): $(tr '`' "'" <<<"$logs" | head -3)"
docker rm -f bosun-check-bind >/dev/null
set +e
plog="$(docker run --rm --env-file "$work/bosun.env" -v "$bind:/data" --entrypoint bosun "$image" provision 2>&1)"; pcode=$?
set -e
row "bind mount owned by $(stat -c %u:%g "$bind"): provision" "exit $pcode, $(grep -c . <<<"$plog") line(s), traceback: $(grep -q Traceback <<<"$plog" && echo yes || echo no)"

say "bind mount chowned to 10001:10001"
chown 10001:10001 "$bind"
t=$(now)
docker run -d --name bosun-check-bind --env-file "$work/bosun.env" -p "127.0.0.1:$port:8790" -v "$bind:/data" "$image" >/dev/null
h=$(healthy_in bosun-check-bind "$t")
row "bind mount chowned 10001:10001 (empty: model re-assembled)" "$h; $(mcp write || true)"
docker rm -f bosun-check-bind >/dev/null
t=$(now)
docker run -d --name bosun-check-bind --env-file "$work/bosun.env" -p "127.0.0.1:$port:8790" -v "$bind:/data" "$image" >/dev/null
h=$(healthy_in bosun-check-bind "$t")
row "bind mount, new container" "$h; $(mcp verify || true); bosun.db owned by $(stat -c %u:%g "$bind/bosun.db")"
docker rm -f bosun-check-bind >/dev/null

say "bind mount of another user, --user"
ubind="$work/data-user"
mkdir -m 755 "$ubind"; chown 1000:1000 "$ubind"
t=$(now)
docker run -d --name bosun-check-user --user 1000:1000 --env-file "$work/bosun.env" -p "127.0.0.1:$port:8790" \
  -v "$ubind:/data" "$image" >/dev/null
h=$(healthy_in bosun-check-user "$t")
row "folder of 1000:1000 with --user 1000:1000" "$h; $(mcp write || true); bosun.db owned by $(stat -c %u:%g "$ubind/bosun.db" 2>/dev/null || echo missing)"
docker rm -f bosun-check-user >/dev/null

{
  echo "| check | result |"
  echo "| --- | --- |"
  printf '%s\n' "${rows[@]}"
} | tee "${out:-/dev/null}"
