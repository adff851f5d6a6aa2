#!/usr/bin/env bash
# Builds the container image from Docker/Dockerfile with podman, offline, and runs it as a user
# would, checking what the README promises:
#   - /healthz on both published ports; the image's HEALTHCHECK reports healthy;
#   - an APNs push (a key made and a JWT signed by the image's own CLI) and an FCM send from the
#     host, through the published TLS port under the real host names;
#   - `pushemu notifications latest` inside the container finds them;
#   - a new container on the same named volume still has them (the journal) and the key (the
#     state): the same JWT is accepted again;
#   - pushemu runs as a non-root user and exits 0 on `podman stop` within its drain time;
#   - the image's size, printed;
#   - then Docker/compose.yaml with podman-compose: up, the same push and read checks, down, up
#     again on the project's volume (the push still there), down with the volume;
#   - then Docker/compose-cluster.yaml (redis, HAProxy, three nodes): three healthy nodes, the push
#     and the send through HAProxy, and another node's `notifications latest` finds the push.
# The cluster's redis:7 and haproxy:2.6 cannot be pulled here either: one image with Debian's
# redis-server and haproxy stands in for both. Containers find each other by name through the
# CNI dnsname plugin (golang-github-containernetworking-plugin-dnsname).
# The base image the Dockerfile names (debian:bookworm-slim) cannot be pulled here: it is made
# locally from Debian's packages (mmdebstrap --variant=minbase bookworm, cached) and tagged with
# that name. The Swift build stage is replaced by the release tarball given
# (--target prebuilt, the Dockerfile's `prebuilt` stage).
# Needs root, podman, runc and mmdebstrap. Usage: Tests/Package/container.sh dist/pushemu-*.tar.gz
set -euo pipefail
tarball=${1:?usage: Tests/Package/container.sh TARBALL}
[ -f "$tarball" ] || { echo "container: no tarball $tarball" >&2; exit 2; }
tarball=$(realpath "$tarball")
for t in podman runc mmdebstrap curl podman-compose; do
  command -v $t >/dev/null || { echo "container: needs $t (apt-get install podman runc mmdebstrap curl podman-compose)" >&2; exit 2; }
done
cd "$(dirname "$0")/../.."
work=$(mktemp -d)
name="pushemu-ci-$$"
volume="pushemu-ci-data-$$"
image="localhost/pushemu:ci-$$"
# This machine's limits cannot be copied into containers (setrlimit RLIMIT_NOFILE is refused)
# and its hybrid cgroups suit runc, not Debian's default crun.
printf '[containers]\ndefault_ulimits = []\n[engine]\nruntime = "runc"\n' >"$work/containers.conf"
export CONTAINERS_CONF="$work/containers.conf"
project="pushemu-ci-compose-$$"
cproject="pushemu-ci-cluster-$$"
cleanup() {
  podman-compose -p "$project" -f Docker/compose.yaml down -v >/dev/null 2>&1 || true
  podman-compose -p "$cproject" -f Docker/compose-cluster.yaml down -v >/dev/null 2>&1 || true
  podman rm -f "$name" >/dev/null 2>&1 || true
  podman volume rm -f "$volume" >/dev/null 2>&1 || true
  podman rmi -f "$image" >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
# podman says on every start and stop that it cannot reach systemd to time the healthcheck (there
# is no systemd here; `podman healthcheck run` runs it): those lines are left out.
quiet() { podman "$@" 2> >(grep -v 'systemd connection' >&2); }
fail() {
  echo "container: FAILED: $*" >&2
  podman logs "$name" 2>&1 | tail -20 | sed 's/^/  log: /' >&2 || true
  exit 1
}

# The base image, from Debian's packages (this machine's apt sources, when in deb822 form).
cache=${PUSHEMU_ROOTFS_CACHE:-/var/cache/pushemu}
base="$cache/debian-bookworm-minbase.tar"
if [ ! -s "$base" ]; then
  echo "== mmdebstrap --variant=minbase bookworm (cached in $base)"
  mkdir -p "$cache"
  sources=()
  [ -f /etc/apt/sources.list.d/debian.sources ] && sources=(/etc/apt/sources.list.d/debian.sources)
  # (the name must end in .tar for mmdebstrap to write a tarball)
  mmdebstrap --quiet --variant=minbase bookworm "$base.tmp.tar" "${sources[@]}"
  mv "$base.tmp.tar" "$base"
fi
if ! podman image exists docker.io/library/debian:bookworm-slim; then
  podman import --quiet "$base" docker.io/library/debian:bookworm-slim >/dev/null
fi

# The image: the Dockerfile as users build it, with the tarball in place of the Swift stage.
rm -rf "$work/ctx"
mkdir -p "$work/ctx/Docker" "$work/ctx/dist"
cp Docker/Dockerfile "$work/ctx/Docker/"
cp .dockerignore "$work/ctx/"
cp "$tarball" "$work/ctx/dist/"
echo "== podman build -f Docker/Dockerfile --target prebuilt"
podman build --quiet --pull=never --format docker -f Docker/Dockerfile --target prebuilt -t "$image" "$work/ctx" \
  >"$work/build.log" 2>&1 || { cat "$work/build.log" >&2; fail "podman build"; }
size=$(podman image inspect "$image" --format '{{.Size}}')
echo "== image size: $((size / 1000000)) MB"

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
http=$(port)
https=$(port)
podman volume create "$volume" >/dev/null
run() {
  # --health-interval=disable: no systemd here to run the timer; `podman healthcheck run` runs it.
  quiet run -d --name "$name" --health-interval=disable -p "127.0.0.1:$http:8080" -p "127.0.0.1:$https:8443" \
    -v "$volume:/data" "$image" >/dev/null || fail "podman run"
  for _ in $(seq 1 100); do
    podman logs "$name" 2>/dev/null | grep -q "^pushemu listening " && return 0
    sleep 0.1
  done
  fail "no listening line"
}
# The checks both the container and the compose stack go through; $1 is the container's name.
healthz() {
  for _ in $(seq 1 100); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "http://127.0.0.1:$http/healthz")" = 200 ] && break
    sleep 0.1
  done
  [ "$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 "http://127.0.0.1:$http/healthz")" = 200 ] \
    || fail "healthz on the published http port"
  [ -s "$work/ca.pem" ] || podman exec "$1" pushemu ca >"$work/ca.pem" || fail "pushemu ca"
  [ "$(curl -sS -o /dev/null -w '%{http_code}' --max-time 10 --cacert "$work/ca.pem" "https://localhost:$https/healthz")" = 200 ] \
    || fail "healthz on the published https port"
  podman healthcheck run "$1" >/dev/null 2>&1 || fail "the image's HEALTHCHECK"
}
# A key made and a JWT signed by the image's own CLI (sets kid and jwt).
sign_in() {
  key=$(podman exec "$1" pushemu credentials apns --out /data --server http://127.0.0.1:8080) || fail "credentials apns"
  kid=$(echo "$key" | sed -n 's/.*"keyId":"\([^"]*\)".*/\1/p')
  local team
  team=$(echo "$key" | sed -n 's/.*"teamId":"\([^"]*\)".*/\1/p')
  jwt=$(podman exec "$1" pushemu token apns --key "/data/AuthKey_$kid.p8" --key-id "$kid" --team-id "$team") || fail "token apns"
}
device=$(printf 'cd%.0s' $(seq 1 32))
# An APNs push with alert $1 from the host, under Apple's sandbox host name.
push() {
  local code
  code=$(curl -sS --http2 -o "$work/apns" -w '%{http_code}' --max-time 10 --cacert "$work/ca.pem" \
    --resolve "api.sandbox.push.apple.com:$https:127.0.0.1" -H "authorization: bearer $jwt" -H "apns-topic: com.example.app" \
    -d "{\"aps\":{\"alert\":\"$1\"}}" "https://api.sandbox.push.apple.com:$https/3/device/$device") || fail "APNs push ($1)"
  [ "$code" = 200 ] || fail "APNs push ($1) answered $code: $(cat "$work/apns")"
}
# An FCM send from the host, under Google's host name.
send() {
  local msg code
  msg='{"message":{"token":"Y29udGFpbmVyZmlkMTIz:APA91bHPRgkF3JUikC4ENAHEeMrd41Zxv3hVZjC9KtT8OvPVGJ-hMMoZRqdU8pAhZ0J0Y8m3kR3c2gVwq5xJb7TzYc4lZrfGw9x0k1R8S0pVv3yQe6xA2NcD9uJtWm5bZkKqLhE7oF1rYs6gP3iN8aM4vXwQ2dT","notification":{"title":"from the host"}}}'
  code=$(curl -sS --http2 -o "$work/fcm" -w '%{http_code}' --max-time 10 --cacert "$work/ca.pem" \
    --resolve "fcm.googleapis.com:$https:127.0.0.1" -H "authorization: Bearer container" -H "content-type: application/json" \
    -d "$msg" "https://fcm.googleapis.com:$https/v1/projects/container/messages:send") || fail "FCM send"
  [ "$code" = 200 ] || fail "FCM send answered $code: $(cat "$work/fcm")"
}
# Whether the container $1 finds the APNs push with alert $2 (`notifications latest`).
finds() {
  podman exec "$1" pushemu notifications latest --provider apns --token "$device" --json | grep -q "\"$2\"" \
    || fail "${3:-notifications latest (APNs) inside the container}"
}

run
healthz "$name"
[ "$(podman inspect "$name" --format '{{.State.Health.Status}}')" = healthy ] || fail "the engine does not report the container healthy"
uid=$(podman exec "$name" id -u)
[ "$uid" != 0 ] || fail "pushemu runs as root"
echo "== healthz on both ports, HEALTHCHECK healthy, running as uid $uid"

# APNs: the key and the JWT from the image's own CLI, the push from the host; an FCM send.
sign_in "$name"
push "from the host"
send
finds "$name" "from the host"
podman exec "$name" pushemu notifications latest --provider fcm --json | grep -q '"projects/container/messages/' \
  || fail "notifications latest (FCM) inside the container"
echo "== an APNs push and an FCM send from the host, found by pushemu notifications latest inside"

# Stop: SIGTERM drains and exits 0, well within the drain time (10 s) podman gives before SIGKILL.
t0=$(date +%s%N)
quiet stop -t 20 "$name" >/dev/null || fail "podman stop"
ms=$((($(date +%s%N) - t0) / 1000000))
rc=$(podman inspect "$name" --format '{{.State.ExitCode}}')
[ "$rc" = 0 ] || fail "exit status $rc on podman stop"
[ "$ms" -lt 10000 ] || fail "podman stop took $ms ms"
echo "== podman stop: exit 0 in $ms ms"

# A new container on the same volume: the journal and the state are there.
quiet rm "$name" >/dev/null
run
finds "$name" "from the host" "the APNs push is gone after a new container on the same volume"
curl -sS --max-time 10 "http://127.0.0.1:$http/emulator/v1/apns/keys" | grep -q "\"keyId\":\"$kid\"" || fail "the key is gone"
push "after the restart"
echo "== a new container on the same volume: the journal's push and the key are there, the JWT accepted"
quiet stop -t 20 "$name" >/dev/null

# The compose stack (single node), on the image just built.
http=$(port)
https=$(port)
export PUSHEMU_IMAGE="$image" PUSHEMU_HTTP_PORT=$http PUSHEMU_HTTPS_PORT=$https
compose() { podman-compose -p "$project" -f Docker/compose.yaml "$@" > "$work/compose.log" 2>&1 || { cat "$work/compose.log" >&2; fail "podman-compose $*"; }; }
compose up -d
cname=$(podman ps --filter "label=io.podman.compose.project=$project" --format '{{.Names}}' | head -1)
[ -n "$cname" ] || fail "no container for the compose project"
healthz "$cname"
sign_in "$cname"
push "through compose"
send
finds "$cname" "through compose"
compose down
compose up -d
cname=$(podman ps --filter "label=io.podman.compose.project=$project" --format '{{.Names}}' | head -1)
healthz "$cname"
finds "$cname" "through compose" "compose: the push is gone after down and up (the project's volume)"
push "through compose again"
compose down -v
echo "== compose: up, healthz, HEALTHCHECK, APNs and FCM from the host, notifications latest; down and up keep them on the volume"

# The cluster stack: redis, HAProxy (TCP mode, TLS passed through) and three nodes of the image.
if ! podman image exists docker.io/library/redis:7 || ! podman image exists docker.io/library/haproxy:2.6; then
  mkdir -p "$work/tools"
  printf 'FROM debian:bookworm-slim\nRUN apt-get update && apt-get install -y --no-install-recommends redis-server haproxy && rm -rf /var/lib/apt/lists/*\n' \
    >"$work/tools/Dockerfile"
  podman build --quiet --pull=never -t docker.io/library/redis:7 "$work/tools" >"$work/tools.log" 2>&1 \
    || { cat "$work/tools.log" >&2; fail "the redis and haproxy stand-in image"; }
  podman tag docker.io/library/redis:7 docker.io/library/haproxy:2.6
fi
http=$(port)
https=$(port)
export PUSHEMU_HTTP_PORT=$http PUSHEMU_HTTPS_PORT=$https
ccompose() {
  podman-compose -p "$cproject" -f Docker/compose-cluster.yaml "$@" >"$work/ccompose.log" 2>&1 \
    || { cat "$work/ccompose.log" >&2; fail "podman-compose (cluster) $*"; }
}
cnode() {
  podman ps --filter "label=io.podman.compose.project=$cproject" --filter "label=com.docker.compose.service=node-$1" \
    --format '{{.Names}}' | head -1
}
ccompose up -d
healthy=0
for _ in $(seq 1 150); do
  healthy=$(curl -s --max-time 2 "http://127.0.0.1:$http/emulator/v1/cluster" | grep -o '"healthy":true' | wc -l || true)
  [ "$healthy" = 3 ] && break
  sleep 0.2
done
[ "$healthy" = 3 ] || fail "compose cluster: $healthy of 3 nodes healthy in /emulator/v1/cluster through HAProxy"
healthz "$(cnode 1)"
sign_in "$(cnode 1)"
sleep 0.5 # the key reaches every node
push "through the compose cluster"
send
finds "$(cnode 2)" "through the compose cluster" "compose cluster: node-2's notifications latest (the whole cluster's)"
ccompose down -v
echo "== compose cluster: redis, HAProxy and three nodes; APNs and FCM through HAProxy, found from another node"
echo "== container: OK ($((size / 1000000)) MB image; healthz, HEALTHCHECK, APNs, FCM, notifications latest, non-root, clean stop, a volume that keeps the journal and the state)"
