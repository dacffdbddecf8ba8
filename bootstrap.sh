#!/usr/bin/env bash
# Set up a fresh Debian/Ubuntu host for this project: the tools it runs (docker.io with
# BuildKit, mmdebstrap, docker-registry, redis-server, gpg, git, graphviz), the project
# itself, and a running Docker engine. Safe to run again: it only adds what is missing.
#
#   DOCKERD_ARGS  flags for a dockerd this script starts (default: --bridge=none
#                 --iptables=false, for hosts where dockerd may not make a bridge; the
#                 demo builds with --network=host, so it needs none)
set -euo pipefail
cd "$(dirname "$0")"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo

missing=()
for package in docker.io mmdebstrap docker-registry redis-server gnupg git graphviz; do
  dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "ok installed" || missing+=("$package")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "bootstrap: installing ${missing[*]}"
  $sudo apt-get update -qq
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

python3 -m pip install --quiet --editable '.[dev]'

# docker.io's own client speaks BuildKit without buildx; ask the engine through it.
if ! /usr/bin/docker version >/dev/null 2>&1; then
  mkdir -p .build
  # shellcheck disable=SC2086
  $sudo nohup dockerd ${DOCKERD_ARGS:---bridge=none --iptables=false} >.build/dockerd.log 2>&1 &
  echo $! > .build/dockerd.pid
  for _ in $(seq 60); do /usr/bin/docker version >/dev/null 2>&1 && break; sleep 1; done
  if ! /usr/bin/docker version >/dev/null 2>&1; then
    echo "bootstrap: dockerd did not start; see .build/dockerd.log" >&2
    exit 1
  fi
  echo "bootstrap: started dockerd (pid $(cat .build/dockerd.pid)); stop it with: kill \$(cat .build/dockerd.pid)"
fi
