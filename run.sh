#!/usr/bin/env bash
# kinema's one entry point for a fresh machine.
#   ./run.sh demo [ARGS...]   install everything, then run the main demo on the bundled sample
#   ./run.sh test [ARGS...]   install everything, then run the whole test suite
#   ./run.sh setup            install only
# Installs Debian packages for headless rendering (when root or sudo is available) and a
# virtual environment in .venv with kinema and all its extras. Re-runs are cheap: the
# environment is rebuilt only when pyproject.toml changes.
set -euo pipefail
cd "$(dirname "$0")"

APT_PACKAGES=(xvfb xauth libgl1-mesa-dri libglx-mesa0 libosmesa6 libegl1 chromium chromium-driver)

log() { printf '\033[1;34m[kinema]\033[0m %s\n' "$*" >&2; }

ensure_system_packages() {
    command -v dpkg >/dev/null 2>&1 || return 0
    local missing=()
    for p in "${APT_PACKAGES[@]}"; do
        dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
    done
    [ ${#missing[@]} -eq 0 ] && return 0
    local sudo=""
    if [ "$(id -u)" -ne 0 ]; then
        if command -v sudo >/dev/null 2>&1; then sudo="sudo"; else
            log "cannot install ${missing[*]} (not root, no sudo): rendering tests need them"; return 0
        fi
    fi
    log "installing system packages: ${missing[*]}"
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

ensure_venv() {
    local py="${PYTHON:-python3}"
    "$py" -c 'import sys; sys.exit(sys.version_info < (3, 11))' || { log "Python >= 3.11 needed"; exit 1; }
    [ -x .venv/bin/python ] || { log "creating .venv"; "$py" -m venv .venv; }
    local stamp=.venv/.kinema-stamp want
    want=$(cat pyproject.toml | sha256sum | cut -c1-16)
    if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
        log "installing kinema and its dependencies into .venv (first run takes a few minutes)"
        # pip's log goes to a file (this machine's pip config prints a warning per package);
        # it is shown in full when the install fails.
        if ! { .venv/bin/python -m pip install -q --upgrade pip && \
               .venv/bin/python -m pip install -q -e ".[all,test]"; } > .venv/pip.log 2>&1; then
            cat .venv/pip.log >&2; log "installation failed (log above, also in .venv/pip.log)"; exit 1
        fi
        echo "$want" > "$stamp"
    fi
}

with_display() {
    # Rendering needs an X display: use the user's, else a virtual one. Mesa wants a private
    # runtime directory (it prints "XDG_RUNTIME_DIR is invalid" without one, e.g. as root).
    if [ -z "${XDG_RUNTIME_DIR:-}" ] || [ ! -d "${XDG_RUNTIME_DIR}" ]; then
        XDG_RUNTIME_DIR="$(mktemp -d)"; export XDG_RUNTIME_DIR
    fi
    if [ -z "${DISPLAY:-}" ] && command -v xvfb-run >/dev/null 2>&1; then
        xvfb-run -a -s "-screen 0 1920x1080x24" "$@"
    else
        "$@"
    fi
}

cmd="${1:-}"; shift || true
case "$cmd" in
    setup) ensure_system_packages; ensure_venv ;;
    demo)
        ensure_system_packages; ensure_venv
        if [ $# -eq 0 ]; then
            # a window when there is a display; otherwise a headless run that writes
            # videos and metrics to out/demo
            if [ -n "${DISPLAY:-}" ]; then set -- locomotion
            else set -- locomotion --headless --frames 600 --out out/demo; fi
        fi
        with_display .venv/bin/kinema demo "$@"
        [ -z "${DISPLAY:-}" ] && log "headless run: results in out/demo (metrics.json, *.mp4)" || true ;;
    test)
        ensure_system_packages; ensure_venv
        with_display .venv/bin/python -m pytest -n 2 -q "$@" ;;
    *) echo "usage: ./run.sh demo|test|setup [ARGS...]" >&2; exit 2 ;;
esac
