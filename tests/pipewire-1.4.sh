#!/usr/bin/env bash
# Unpacks PipeWire 1.4.2 (Debian's bookworm-backports build, what most users run: Fedora, Arch,
# Ubuntu 24.10+ and Debian 13 have 1.2 or 1.4) under target/pw-1.4/root, so that the live watch
# tests run against it as well as against the system's 0.3.65. Nothing is installed: apt reads a
# private source list and cache under target/pw-1.4, `apt-get download` fetches the packages and
# `dpkg -x` unpacks them; the tests run it from there (LD_LIBRARY_PATH, SPA_PLUGIN_DIR,
# PIPEWIRE_MODULE_DIR, PIPEWIRE_CONFIG_DIR). Runs in seconds; does nothing when it is there.
set -euo pipefail
cd "$(dirname "$0")/.."
top="$PWD/target/pw-1.4"
version="1.4.2-1~bpo12+1"
[ -x "$top/root/usr/bin/pipewire" ] && [ "$(cat "$top/root/.version" 2>/dev/null)" = "$version" ] && exit 0
# The mirror whose stanza (deb822) or line carries the `bookworm` suite itself; a machine may
# have either form of sources, and others (security, a vendor's) beside them.
mirror=$({ cat /etc/apt/sources.list.d/*.sources 2>/dev/null || true; } | awk '
  /^URIs:/ { uri = $2 }
  /^Suites:/ { for (i = 2; i <= NF; i++) if ($i == "bookworm") found = 1 }
  /^$/ { if (found && uri != "") { print uri; exit } found = 0; uri = "" }
  END { if (found && uri != "") print uri }' | head -1)
[ -n "$mirror" ] || mirror=$({ grep -hs '^deb .* bookworm main' /etc/apt/sources.list /etc/apt/sources.list.d/*.list || true; } | head -1 | awk '{print $2}')
[ -n "$mirror" ] || { echo "tests/pipewire-1.4.sh: no Debian mirror in apt's sources" >&2; exit 1; }
rm -rf "$top"
mkdir -p "$top/apt/lists/partial" "$top/apt/cache/archives/partial" "$top/debs" "$top/root"
echo "deb $mirror bookworm-backports main" >"$top/apt/sources.list"
apt_opts=(-o "Dir::Etc::SourceList=$top/apt/sources.list" -o "Dir::Etc::SourceParts=/nonexistent"
  -o "Dir::State::Lists=$top/apt/lists" -o "Dir::Cache=$top/apt/cache" -o "APT::Sandbox::User=root")
apt-get "${apt_opts[@]}" update -q >/dev/null
(cd "$top/debs" && apt-get "${apt_opts[@]}" download -q \
  "pipewire=$version" "pipewire-bin=$version" "libpipewire-0.3-0=$version" \
  "libpipewire-0.3-modules=$version" "libspa-0.2-modules=$version" "pipewire-jack=$version" \
  "libpipewire-0.3-common=$version" >/dev/null)
for deb in "$top"/debs/*.deb; do dpkg -x "$deb" "$top/root"; done
echo "$version" >"$top/root/.version"
echo "tests/pipewire-1.4.sh: PipeWire $version unpacked under $top/root"
