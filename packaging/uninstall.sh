#!/usr/bin/env bash
# Removes an installation made by install.sh: the application folder this script sits in,
# the `workbench` command, the menu entry, the icons and the AppStream data.
#
# Your conversations and settings are not touched; the script prints where they are.
set -euo pipefail

app_id=io.github.conversation_workbench.Workbench
app_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prefix="$(dirname "$(dirname "$app_dir")")"
share="$prefix/share"

# Never delete a folder that is not an installed bundle (e.g. the script copied elsewhere).
if [ "$(basename "$app_dir")" != conversation-workbench ] || [ ! -x "$app_dir/workbench" ] \
  || [ ! -d "$app_dir/_internal" ]; then
  echo "error: $app_dir does not look like an installed Conversation Workbench" >&2
  exit 1
fi

link="$prefix/bin/workbench"
if [ -L "$link" ] && [ "$(readlink "$link")" = "$app_dir/workbench" ]; then
  rm -f "$link"
fi
rm -f "$share/applications/$app_id.desktop" \
  "$share/icons/hicolor/scalable/apps/$app_id.svg" \
  "$share/icons/hicolor/256x256/apps/$app_id.png" \
  "$share/metainfo/$app_id.metainfo.xml"
rm -rf "$app_dir"

if command -v update-desktop-database >/dev/null 2>&1 && [ -d "$share/applications" ]; then
  update-desktop-database -q "$share/applications" || true
fi
if command -v gtk-update-icon-cache >/dev/null 2>&1 && [ -f "$share/icons/hicolor/index.theme" ]; then
  gtk-update-icon-cache -q -t "$share/icons/hicolor" || true
fi

data="${XDG_DATA_HOME:-$HOME/.local/share}/conversation-workbench"
config="${XDG_CONFIG_HOME:-$HOME/.config}/conversation-workbench"
cache="${XDG_CACHE_HOME:-$HOME/.cache}/conversation-workbench"
echo "Removed Conversation Workbench from $app_dir"
echo "Your data was kept. To remove it as well:"
echo "  rm -r '$data'     (the database: your conversations)"
echo "  rm -r '$config'   (window layout and other settings)"
echo "  rm -r '$cache'    (token encodings, rebuilt when needed)"
echo "(If you set WORKBENCH_HOME or WORKBENCH_DB, the database and settings are there instead.)"
echo "API keys saved by the workbench are in your system keyring, service 'conversation-workbench'."
