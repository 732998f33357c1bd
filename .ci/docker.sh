#!/usr/bin/env bash
# Make a working Docker daemon and offline `python:3.11-slim` and `python:3.13-slim` stand-ins
# available.
#
# Idempotent: every step checks first and does nothing when already done, so CI and the README's
# test command can run it every time. Why stand-ins: these machines reach no image registry
# (no Docker Hub), so `FROM python:3.11-slim` only resolves from a local image of that tag, which
# we build once from Debian's packages (debootstrap, then `docker import`) and keep in
# /var/lib/docker; build_base_image below is the whole recipe. Everything is built on 3.11
# (Debian bookworm); 3.13 (Debian trixie) is for the one image whose package needs a newer
# Python (the openhands agent: openhands-sdk requires 3.12 or later).
#
# Variables: DOCKERD_LOG (default /tmp/agentenv-dockerd.log), DOCKERD_WAIT (seconds, default 60),
# BASE_IMAGE (default python:3.11-slim), BASE_IMAGE_NEW (default python:3.13-slim; empty: not
# built), DEBIAN_MIRROR (default http://deb.debian.org/debian),
# BASE_ALIASES (space-separated extra tags for the same image, e.g. "python:3.12-slim", so
# Dockerfiles naming another slim tag also resolve offline; the Python inside stays 3.11).
set -euo pipefail

DOCKERD_LOG="${DOCKERD_LOG:-/tmp/agentenv-dockerd.log}"
DOCKERD_WAIT="${DOCKERD_WAIT:-60}"
BASE_IMAGE="${BASE_IMAGE:-python:3.11-slim}"
BASE_IMAGE_NEW="${BASE_IMAGE_NEW-python:3.13-slim}"
DEBIAN_MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
BASE_ALIASES="${BASE_ALIASES:-}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

say() { printf '[docker.sh] %s\n' "$*"; }
die() { printf '[docker.sh] error: %s\n' "$*" >&2; exit 1; }

APT_UPDATED=0
apt_install() {
    # Install the named Debian packages, running `apt-get update` at most once per run.
    if [ "$APT_UPDATED" -eq 0 ]; then
        say "apt-get update"
        $SUDO apt-get update -qq >/dev/null
        APT_UPDATED=1
    fi
    say "apt-get install $*"
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "$@" >/dev/null
}

ensure_packages() {
    local missing=()
    command -v dockerd >/dev/null 2>&1 || missing+=(docker.io)
    command -v debootstrap >/dev/null 2>&1 || missing+=(debootstrap)
    command -v docker-registry >/dev/null 2>&1 || missing+=(docker-registry)
    if [ "${#missing[@]}" -gt 0 ]; then
        apt_install "${missing[@]}"
    fi
}

start_daemon() {
    if docker info >/dev/null 2>&1; then
        say "docker daemon already running"
        return
    fi
    ensure_packages
    if ! pgrep -x dockerd >/dev/null 2>&1; then
        say "starting dockerd (log: $DOCKERD_LOG)"
        # setsid: the daemon must outlive this script and its process group.
        $SUDO setsid dockerd >"$DOCKERD_LOG" 2>&1 < /dev/null &
    else
        say "dockerd is starting already; waiting for it"
    fi
    local waited=0
    until docker info >/dev/null 2>&1; do
        if [ "$waited" -ge "$DOCKERD_WAIT" ]; then
            printf '[docker.sh] error: dockerd did not answer on /var/run/docker.sock within %ss; last log lines:\n' \
                "$DOCKERD_WAIT" >&2
            tail -n 30 "$DOCKERD_LOG" >&2 || true
            exit 1
        fi
        sleep 1
        waited=$((waited + 1))
    done
    say "docker daemon ready after ${waited}s ($(docker version --format '{{.Server.Version}}' 2>/dev/null))"
}

build_base_image() {
    # $1: the image tag; $2: the Debian release whose python3 it carries.
    local image=$1 suite=$2
    if docker image inspect "$image" >/dev/null 2>&1; then
        say "base image $image present"
        return
    fi
    # The registry binary is wanted by the image-store tests even when the daemon was up.
    ensure_packages
    local started rootfs
    started=$(date +%s)
    rootfs=$(mktemp -d /tmp/agentenv-rootfs.XXXXXX)
    # shellcheck disable=SC2064
    trap "$SUDO rm -rf '$rootfs'" EXIT
    say "building $image from Debian $suite packages (debootstrap, about a minute)"
    $SUDO debootstrap --variant=minbase \
        --include=python3,python3-pip,python3-venv,python-is-python3,ca-certificates \
        "$suite" "$rootfs" "$DEBIAN_MIRROR" >/tmp/agentenv-debootstrap.log 2>&1 || {
        tail -n 30 /tmp/agentenv-debootstrap.log >&2
        die "debootstrap failed (full log: /tmp/agentenv-debootstrap.log)"
    }
    # The official image lets pip install into the system Python; Debian's marker refuses it.
    $SUDO rm -f "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
    # Containers reach the package registries through the same path as the host, so they need
    # the host's CA bundle to trust it.
    if [ -f /etc/ssl/certs/ca-certificates.crt ]; then
        $SUDO cp /etc/ssl/certs/ca-certificates.crt "$rootfs/etc/ssl/certs/ca-certificates.crt"
    fi
    # Keep the image small: package caches and lists are not needed at run time.
    $SUDO rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
    say "importing rootfs as $image"
    $SUDO tar -C "$rootfs" -c . | docker import \
        -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        -c 'ENV LANG=C.UTF-8' \
        -c 'CMD ["python3"]' \
        - "$image" >/dev/null
    $SUDO rm -rf "$rootfs"
    trap - EXIT
    say "built $image in $(( $(date +%s) - started ))s"
}

tag_aliases() {
    local alias
    for alias in $BASE_ALIASES; do
        if ! docker image inspect "$alias" >/dev/null 2>&1; then
            docker tag "$BASE_IMAGE" "$alias"
            say "tagged $BASE_IMAGE as $alias"
        fi
    done
}

# Images agent-env built (content-hash tags: every change to an env or agent makes new ones) pile
# up run after run on a machine that keeps its daemon; those unused for three days go, so the
# disk does not fill. The base image and anything else not built by agent-env stay.
prune_stale_images() {
    local freed
    freed=$(docker image prune -a -f --filter "label=agentenv.builder=agent-env" \
        --filter "until=72h" 2>/dev/null | tail -n 1)
    say "stale agent-env images pruned (${freed:-nothing})"
}

start_daemon
build_base_image "$BASE_IMAGE" bookworm
if [ -n "$BASE_IMAGE_NEW" ]; then build_base_image "$BASE_IMAGE_NEW" trixie; fi
tag_aliases
prune_stale_images
command -v docker-registry >/dev/null 2>&1 || ensure_packages
say "ready"
