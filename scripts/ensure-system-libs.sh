#!/usr/bin/env bash
# Makes sure the Debian packages the workbench needs are installed.
#
#   scripts/ensure-system-libs.sh venv   python3's venv/ensurepip (Debian splits it out)
#   scripts/ensure-system-libs.sh test   libraries Qt needs on the offscreen platform, the
#                                        validators of the desktop entry and metainfo, and
#                                        the PostgreSQL server the team-store tests start
#   scripts/ensure-system-libs.sh run    the above plus the xcb set when an X display is set
#   scripts/ensure-system-libs.sh package  the above plus the xcb set always: the bundle
#                                          carries the libraries its Qt plugins need
#
# As root, missing packages are installed with apt-get (one `apt-get update` first, only when
# something is missing). Otherwise the script names what is missing and how to install it.
# Only `venv` fails when it cannot fix things: without venv nothing else can work, whereas Qt
# may still start with the libraries that are there.
set -euo pipefail

mode="${1:-test}"

qt_offscreen=(libegl1 libgl1 libx11-6 libdbus-1-3 libfontconfig1 libfreetype6 libglib2.0-0
  libxkbcommon0)
qt_xcb=(libxcb-cursor0 libxcb-icccm4 libxcb-image0 libxcb-keysyms1 libxcb-randr0
  libxcb-render-util0 libxcb-shape0 libxcb-xinerama0 libxcb-xkb1 libxkbcommon-x11-0)

is_installed() {
  [ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null || true)" = "install ok installed" ]
}

can_apt() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1
}

apt_install() {
  echo "Installing system packages: $*"
  export DEBIAN_FRONTEND=noninteractive
  # stdin from /dev/null: CI has none, and apt must never wait for an answer.
  apt-get update -q </dev/null
  apt-get install -y -q --no-install-recommends "$@" </dev/null
}

case "$mode" in
  venv)
    python="${PYTHON:-python3}"
    if "$python" -c 'import ensurepip, venv' 2>/dev/null; then
      exit 0
    fi
    if can_apt; then
      apt_install python3-venv
      exit 0
    fi
    echo "error: '$python -m venv' is unavailable (ensurepip is missing)." >&2
    echo "       Install it first, e.g.: sudo apt-get install python3-venv" >&2
    exit 1
    ;;
  test)
    wanted=("${qt_offscreen[@]}" desktop-file-utils appstream postgresql)
    ;;
  run)
    wanted=("${qt_offscreen[@]}")
    # Wayland-only sessions need no xcb; X (and XWayland) sessions do.
    if [ -n "${DISPLAY:-}" ]; then
      wanted+=("${qt_xcb[@]}")
    fi
    ;;
  package)
    wanted=("${qt_offscreen[@]}" "${qt_xcb[@]}")
    ;;
  *)
    echo "usage: $0 venv|test|run|package" >&2
    exit 2
    ;;
esac

if ! command -v dpkg-query >/dev/null 2>&1; then
  # Not a Debian-like system: nothing we can check here.
  exit 0
fi

missing=()
for pkg in "${wanted[@]}"; do
  is_installed "$pkg" || missing+=("$pkg")
done
[ "${#missing[@]}" -eq 0 ] && exit 0

if can_apt; then
  apt_install "${missing[@]}"
else
  echo "warning: system libraries Qt needs are missing: ${missing[*]}" >&2
  echo "         install them with: sudo apt-get install ${missing[*]}" >&2
fi
