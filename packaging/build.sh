#!/usr/bin/env bash
# Builds the one-folder Linux bundle of Conversation Workbench with PyInstaller:
#
#   dist/conversation-workbench/
#     workbench        the program: the desktop window with no arguments, the CLI otherwise
#     _internal/       Python, Qt, the workbench and its resources
#     share/           menu entry, icons and AppStream metadata (as under /usr/share)
#     install.sh       installs for the current user, or with PREFIX= anywhere
#     uninstall.sh
#   dist/conversation-workbench-VERSION-linux-ARCH.tar.gz   the folder, to hand out
#
# Usage: packaging/build.sh [--no-tarball]
# PYTHON names the interpreter that has the workbench and PyInstaller installed
# (default: .venv/bin/python, as `make package` sets it up).
set -euo pipefail

cd "$(dirname "${BASH_SOURCE[0]}")/.."
python="${PYTHON:-.venv/bin/python}"
name=conversation-workbench
bundle="dist/$name"
tarball=1
for arg in "$@"; do
  case "$arg" in
    --no-tarball) tarball=0 ;;
    *) echo "usage: $0 [--no-tarball]" >&2; exit 2 ;;
  esac
done

if ! "$python" -c 'import PyInstaller' 2>/dev/null; then
  echo "error: PyInstaller is not installed for $python;" \
    "run 'make package' or: $python -m pip install -e '.[package]'" >&2
  exit 1
fi

start=$SECONDS
"$python" -m PyInstaller --noconfirm --log-level WARN \
  --distpath dist --workpath build/pyinstaller packaging/workbench.spec
bash packaging/stage-desktop-files.sh "$bundle"

# Every library a bundled Qt plugin needs must be inside the bundle, unless it belongs to
# the desktop itself. PyInstaller silently leaves out a library that the build machine
# lacks, and the platform plugins need a few that are not always installed
# (libxcb-cursor0, ...). What the desktop provides, and PyInstaller deliberately does not
# bundle, is the graphics stack (GL, EGL, DRM, libxcb, Wayland's client libraries) and
# GTK, used by the GTK theme plugin when the desktop has it.
desktop_libs='^(libE?(Open)?GLX?[A-Za-z0-9_]*|libdrm|libxcb|libxcb-dri[0-9]*|libwayland-(client|cursor|egl|server)|libgtk-3|libgdk-3)\.so'
internal="$bundle/_internal"
missing=""
while IFS= read -r -d '' plugin; do
  lost=$(LD_LIBRARY_PATH="$internal:$internal/PySide6/Qt/lib" ldd "$plugin" 2>/dev/null \
    | awk '/not found/ {print $1}' | grep -Ev "$desktop_libs" | sort -u || true)
  if [ -n "$lost" ]; then
    missing+="  ${plugin#"$internal"/}: $(echo "$lost" | tr '\n' ' ')"$'\n'
  fi
done < <(find "$internal/PySide6/Qt/plugins" -name '*.so' -print0)
if [ -n "$missing" ]; then
  echo "error: libraries that Qt plugins need are missing from the bundle:" >&2
  printf '%s' "$missing" >&2
  echo "Install them (Debian: the libxcb-* and libxkbcommon-x11-0 packages that" \
    "scripts/ensure-system-libs.sh lists for 'run') and build again." >&2
  exit 1
fi

version=$("$bundle/workbench" --version | awk '{print $2}')
if [ "$tarball" = 1 ]; then
  archive="dist/$name-$version-linux-$(uname -m).tar.gz"
  tar -C dist -czf "$archive" "$name"
fi

echo "Built $bundle (workbench $version): $(du -sh "$bundle" | cut -f1)" \
  "in $((SECONDS - start)) s"
if [ "$tarball" = 1 ]; then
  echo "Archive: $archive ($(du -sh "$archive" | cut -f1))"
fi
