#!/usr/bin/env bash
# Installs this Conversation Workbench bundle.
#
#   ./install.sh                          for the current user, under ~/.local
#   sudo PREFIX=/usr/local ./install.sh   for everyone
#
# The application goes to PREFIX/lib/conversation-workbench, the `workbench` command to
# PREFIX/bin, the menu entry, icon and AppStream data to PREFIX/share. Running it again
# replaces an earlier installation. PREFIX/lib/conversation-workbench/uninstall.sh
# removes it all again (your conversations stay; see that script).
set -euo pipefail

app_id=io.github.conversation_workbench.Workbench
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
prefix="${PREFIX:-$HOME/.local}"
app_dir="$prefix/lib/conversation-workbench"
bin_dir="$prefix/bin"
share="$prefix/share"

for part in workbench _internal uninstall.sh share; do
  if [ ! -e "$here/$part" ]; then
    echo "error: $here/$part is missing; run install.sh from an unpacked bundle" >&2
    exit 1
  fi
done
if [ "$here" = "$app_dir" ]; then
  echo "error: this bundle is already installed at $app_dir" >&2
  exit 1
fi

# Copy next to the target first, so a failed copy leaves an earlier installation intact.
mkdir -p "$prefix/lib" "$bin_dir"
staging="$app_dir.new.$$"
trap 'rm -rf "$staging"' EXIT
mkdir "$staging"
cp -a "$here/workbench" "$here/_internal" "$here/uninstall.sh" "$staging/"
rm -rf "$app_dir"
mv "$staging" "$app_dir"
trap - EXIT

ln -sfn "$app_dir/workbench" "$bin_dir/workbench"

# The menu entry names the installed program by its full path: PREFIX/bin may not be on
# the PATH that the desktop session starts programs with.
mkdir -p "$share/applications"
sed -e "s|^Exec=.*|Exec=$app_dir/workbench|" -e "s|^TryExec=.*|TryExec=$app_dir/workbench|" \
  "$here/share/applications/$app_id.desktop" > "$share/applications/$app_id.desktop"
chmod 644 "$share/applications/$app_id.desktop"
install -Dm644 "$here/share/icons/hicolor/scalable/apps/$app_id.svg" \
  "$share/icons/hicolor/scalable/apps/$app_id.svg"
install -Dm644 "$here/share/icons/hicolor/256x256/apps/$app_id.png" \
  "$share/icons/hicolor/256x256/apps/$app_id.png"
install -Dm644 "$here/share/metainfo/$app_id.metainfo.xml" \
  "$share/metainfo/$app_id.metainfo.xml"

# Refresh the menu and icon caches where the tools exist; desktops also notice on their own.
if command -v update-desktop-database >/dev/null 2>&1; then
  update-desktop-database -q "$share/applications" || true
fi
if command -v gtk-update-icon-cache >/dev/null 2>&1 && [ -f "$share/icons/hicolor/index.theme" ]; then
  gtk-update-icon-cache -q -t "$share/icons/hicolor" || true
fi

echo "Installed Conversation Workbench in $app_dir"
echo "  command:    $bin_dir/workbench"
echo "  menu entry: $share/applications/$app_id.desktop"
echo "  uninstall:  $app_dir/uninstall.sh"
case ":$PATH:" in
  *":$bin_dir:"*) ;;
  *) echo "Note: $bin_dir is not on your PATH; start it from the menu or as $bin_dir/workbench" ;;
esac
