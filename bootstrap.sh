#!/usr/bin/env bash
# Set up a fresh Debian/Ubuntu host for this project: a Docker engine 26+ with buildx, the
# tools it runs (mmdebstrap, docker-registry, redis-server, gpg, git, graphviz, and cmake for
# the tests on upstream's CMake), the project itself, and a running engine. Safe to run again: it only adds what is missing.
#
# The engine: a dockerd whose client has buildx (Docker CE with its buildx plugin, say) is
# used as it is; else the release's own docker.io and docker-buildx (Debian 13, Ubuntu 22.04
# and later); on Debian 12, whose docker.io is 20.10 without buildx, those of Debian 13,
# pinned so that nothing else moves (containerd, runc and libc stay Debian 12's).
#
#   DOCKERD_ARGS  flags for a dockerd this script starts (default: --bridge=none
#                 --iptables=false, for hosts where dockerd may not make a bridge; the
#                 demo builds with --network=host, so it needs none)
set -euo pipefail
cd "$(dirname "$0")"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo=sudo

updated=""
apt_update() { [ -n "$updated" ] || $sudo apt-get update -qq; updated=1; }
installed() { [[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" == *"ok installed" ]]; }
candidate() { apt_update; [[ "$(apt-cache policy "$1" 2>/dev/null)" == *"Candidate: "[0-9]* ]]; }
apt_install() {
  echo "bootstrap: installing $*"
  apt_update
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

# Debian 13's docker.io, docker-cli and docker-buildx, and nothing else of Debian 13.
add_trixie_engine() {
  echo "bootstrap: Debian 12's docker.io is 20.10 without buildx; taking Docker 26 from Debian 13"
  $sudo tee /etc/apt/sources.list.d/rocmgraph-trixie.sources >/dev/null <<'EOF'
Types: deb
URIs: http://deb.debian.org/debian
Suites: trixie
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
EOF
  $sudo tee /etc/apt/preferences.d/rocmgraph-trixie-docker >/dev/null <<'EOF'
Package: docker.io docker-cli docker-buildx
Pin: release n=trixie
Pin-Priority: 990

Package: *
Pin: release n=trixie
Pin-Priority: 100
EOF
}

engine_ready() { command -v dockerd >/dev/null && docker buildx version >/dev/null 2>&1; }

engine=()
if ! engine_ready; then
  # shellcheck disable=SC1091
  . /etc/os-release
  if ! candidate docker-buildx && [ "${ID:-}" = debian ] && [ "${VERSION_ID:-}" = 12 ]; then
    add_trixie_engine
    updated=""
  fi
  if ! candidate docker-buildx; then
    echo "bootstrap: ${PRETTY_NAME:-this host} has no docker-buildx package; install Docker CE" \
      "with its buildx plugin (https://docs.docker.com/engine/install/), then run this again" >&2
    exit 1
  fi
  engine=(docker.io docker-buildx)
  candidate docker-cli && engine+=(docker-cli)  # Debian 13 ships the client on its own
  # Recommends would bring needrestart, which restarts services of its own accord.
  apt_install --no-install-recommends "${engine[@]}"
fi

missing=()
for package in mmdebstrap docker-registry redis-server gnupg git graphviz cmake; do
  installed "$package" || missing+=("$package")
done
[ ${#missing[@]} -eq 0 ] || apt_install "${missing[@]}"

python3 -m pip install --quiet --editable '.[dev]'

if ! docker version >/dev/null 2>&1; then
  mkdir -p .build
  # shellcheck disable=SC2086
  $sudo nohup dockerd ${DOCKERD_ARGS:---bridge=none --iptables=false} >.build/dockerd.log 2>&1 &
  echo $! > .build/dockerd.pid
  for _ in $(seq 60); do docker version >/dev/null 2>&1 && break; sleep 1; done
  if ! docker version >/dev/null 2>&1; then
    echo "bootstrap: dockerd did not start; see .build/dockerd.log" >&2
    exit 1
  fi
  echo "bootstrap: started dockerd (pid $(cat .build/dockerd.pid)); stop it with: kill \$(cat .build/dockerd.pid)"
fi
docker buildx version >/dev/null || { echo "bootstrap: docker has no buildx" >&2; exit 1; }
