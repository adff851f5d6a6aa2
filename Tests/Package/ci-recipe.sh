#!/usr/bin/env bash
# docs/ci.md's job, step by step, run against the packaged binary: unpack, start in the
# background, wait for the listening line, credentials with Google's token_uri, eval
# "$(pushemu env)", an unmodified sender (firebase-admin from .venv) through the proxy, the
# report's rejection check (which must pass with none, then fail with one), a clean stop.
# Usage: Tests/Package/ci-recipe.sh TARBALL [PYTHON]   (PYTHON default .venv/bin/python)
set -euo pipefail
tarball=$(realpath "${1:?usage: ci-recipe.sh TARBALL [PYTHON]}")
python=${2:-.venv/bin/python}
python="$(cd "$(dirname "$python")" && pwd)/$(basename "$python")"   # absolute, the venv's link kept
work=$(mktemp -d)
server=""
trap '[ -n "$server" ] && kill -KILL "$server" 2>/dev/null; rm -rf "$work"' EXIT
cd "$work"
fail() { echo "ci-recipe: FAILED: $*" >&2; sed 's/^/  pushemu: /' pushemu.out pushemu.err >&2 2>/dev/null || true; exit 1; }

# 1. Install: the tarball (the runtime libraries are this machine's).
tar -xzf "$tarball"
bin=$(echo "$work"/pushemu-*/bin)
export PATH="$bin:$PATH"

# 2. Start in the background; wait for the listening line. Free ports from the environment
#    (this machine may run another pushemu on 8080).
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
export PUSHEMU_HTTP_PORT=$(free_port) PUSHEMU_HTTPS_PORT=$(free_port)
export PUSHEMU_DATA_DIR="$work/.pushemu"
pushemu serve > pushemu.out 2> pushemu.err &
server=$!
for _ in $(seq 1 100); do grep -q '^pushemu listening ' pushemu.out && break; sleep 0.1; done
grep '^pushemu listening ' pushemu.out || fail "no listening line"

# 3. Credentials that look like production's, registered with the running emulator over its
#    admin API, and the environment for unmodified senders.
pushemu credentials fcm --server "http://127.0.0.1:$PUSHEMU_HTTP_PORT" --project ci-proj --token-uri google \
  --out "$work/service-account.json" >/dev/null
export GOOGLE_APPLICATION_CREDENTIALS="$work/service-account.json"
eval "$(pushemu env)"

# 4. The sender's tests: firebase-admin, unchanged, with the default credentials.
cat > sender.py <<'PY'
import sys, warnings
warnings.simplefilter("ignore")
import firebase_admin
from firebase_admin import messaging
firebase_admin.initialize_app()
token = "c" + "0" * 20 + "1" + ":APA91b" + "Tok001" * 19 + "x"
print(messaging.send(messaging.Message(token=token, notification=messaging.Notification(title="ci", body="recipe"))))
if len(sys.argv) > 1:  # one message FCM rejects: an invalid token
    try:
        messaging.send(messaging.Message(token="not a token", data={"k": "v"}))
    except Exception as e:
        print("rejected as expected:", type(e).__name__)
PY
"$python" sender.py | grep -q '^projects/ci-proj/messages/' || fail "the sender's send"

# 5. No unexpected rejections.
check() {
  curl -s "http://127.0.0.1:$PUSHEMU_HTTP_PORT/emulator/v1/report?format=json" > report.json
  python3 - <<'PY'
import json, sys
totals = json.load(open("report.json"))["totals"]
print("sent:", totals["sent"], "rejected:", totals["rejected"])
sys.exit(1 if totals["rejectedTotal"] else 0)
PY
}
check || fail "the report shows rejections after a clean send"
"$python" sender.py reject | grep -q "rejected as expected" || fail "the rejection was not raised"
if check; then fail "the report check missed a rejection"; fi

# 6. Stop cleanly.
kill -TERM "$server"
rc=0
wait "$server" || rc=$?
server=""
[ "$rc" = 0 ] || fail "exit status $rc after SIGTERM"
echo "ci-recipe: OK"
