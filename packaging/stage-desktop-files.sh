#!/usr/bin/env bash
# Copies the desktop integration files into a bundle folder, laid out as under /usr/share:
#   BUNDLE/share/applications/APP_ID.desktop
#   BUNDLE/share/icons/hicolor/{scalable,256x256}/apps/APP_ID.{svg,png}
#   BUNDLE/share/metainfo/APP_ID.metainfo.xml
# plus install.sh and uninstall.sh at the top of BUNDLE.
#
# Usage: packaging/stage-desktop-files.sh BUNDLE
set -euo pipefail

[ $# -eq 1 ] || { echo "usage: $0 BUNDLE" >&2; exit 2; }
bundle="$1"
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
app_id=io.github.conversation_workbench.Workbench

install -Dm644 "$root/resources/$app_id.desktop" "$bundle/share/applications/$app_id.desktop"
install -Dm644 "$root/resources/icons/$app_id.svg" \
  "$bundle/share/icons/hicolor/scalable/apps/$app_id.svg"
install -Dm644 "$root/resources/icons/$app_id.png" \
  "$bundle/share/icons/hicolor/256x256/apps/$app_id.png"
install -Dm644 "$root/packaging/$app_id.metainfo.xml" \
  "$bundle/share/metainfo/$app_id.metainfo.xml"
install -m755 "$root/packaging/install.sh" "$root/packaging/uninstall.sh" "$bundle/"
