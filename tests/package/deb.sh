#!/usr/bin/env bash
# The Debian package, built and tried as a user gets it: a release build with JACK and PipeWire
# (profile dist: its line tables split off into /usr/lib/debug, the binary at most 15 MB),
# its man pages and completions written by that binary, the book (docs/book, built by test.sh),
# packaged by `cargo deb --no-build`, installed with dpkg, run from /usr/bin (--version, man -w,
# the recorder's systemd unit present, verified and disabled,
# a 2 s run, the dashboard serving its embedded page from another directory), then removed, so
# the machine is left as it was. Needs root or sudo (dpkg), cargo-deb and man-db.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
[ -f docs/book/index.html ] || { echo "tests/package: build the book first (mdbook build docs)" >&2; exit 1; }
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if dpkg -s xrunlab >/dev/null 2>&1; then
  echo "tests/package: a xrunlab package is already installed; remove it first (dpkg -r xrunlab)" >&2
  exit 1
fi

# Profile `dist`: the release build with line tables, which the package splits off (below).
# CARGO_TARGET_DIR is honoured: test.sh builds it in target/pkg, beside the tests (a no-op here).
cargo build --profile dist --locked --features jack,pipewire --bin xrunlab
target_dir="${CARGO_TARGET_DIR:-target}"
bin="$target_dir/dist/xrunlab"
rm -rf target/assets
mkdir -p target/assets
$bin man --dir target/assets/man >/dev/null
for sh in bash zsh fish; do
  $bin completions "$sh" >"target/assets/xrunlab.$sh"
done
# The line tables compressed (zlib, which backtraces read) before cargo-deb splits them into
# /usr/lib/debug/usr/bin/xrunlab.debug and strips the binary, linking it to that file.
objcopy --compress-debug-sections=zlib "$bin"
rm -rf "$target_dir/debian"
cargo deb --no-build --profile dist --separate-debug-symbols
deb="$(ls "$target_dir"/debian/xrunlab_*.deb)"
echo "tests/package: built $deb ($(du -h "$deb" | cut -f1))"

work="$(mktemp -d)"
dash_pid=""
cleanup() {
  [ -n "$dash_pid" ] && kill "$dash_pid" 2>/dev/null || true
  $sudo dpkg -r xrunlab >/dev/null 2>&1 || true
  rm -rf "$work"
}
trap cleanup EXIT
$sudo dpkg -i "$deb"

[ "$(command -v xrunlab)" = /usr/bin/xrunlab ] || { echo "xrunlab is not /usr/bin/xrunlab" >&2; exit 1; }
/usr/bin/xrunlab --version
man -w xrunlab
man -w xrunlab-watch
for f in /usr/share/bash-completion/completions/xrunlab /usr/share/zsh/vendor-completions/_xrunlab \
  /usr/share/fish/vendor_completions.d/xrunlab.fish /usr/share/doc/xrunlab/html/index.html \
  /usr/share/doc/xrunlab/copyright; do
  [ -s "$f" ] || { echo "tests/package: $f is missing from the package" >&2; exit 1; }
done
bash -n /usr/share/bash-completion/completions/xrunlab
# The flight recorder's unit: shipped, well-formed for systemd, least privilege, and disabled.
unit=/usr/lib/systemd/system/xrunlab-record@.service
[ -s "$unit" ] || { echo "tests/package: $unit is missing from the package" >&2; exit 1; }
for line in 'User=%i' 'AmbientCapabilities=CAP_PERFMON' 'CapabilityBoundingSet=CAP_PERFMON' \
  'ProtectSystem=strict' 'NoNewPrivileges=yes' 'StateDirectory=xrunlab/%i'; do
  grep -qxF "$line" "$unit" || { echo "tests/package: $unit lacks $line" >&2; exit 1; }
done
if command -v systemd-analyze >/dev/null; then
  systemd-analyze verify "$unit"
fi
if ls /etc/systemd/system/*.wants/xrunlab-record@* >/dev/null 2>&1; then
  echo "tests/package: installing the package enabled the recorder; it must ship disabled" >&2
  exit 1
fi
# A binary a user can afford: at most 15 MB in /usr/bin, its debug information apart, and
# backtraces that name files and lines where that debug file is installed (and only there).
size=$(stat -c %s /usr/bin/xrunlab)
echo "tests/package: /usr/bin/xrunlab is $((size / 1024 / 1024)) MB; its debug file $(du -h /usr/lib/debug/usr/bin/xrunlab.debug | cut -f1)"
[ "$size" -le $((15 * 1024 * 1024)) ] || { echo "tests/package: /usr/bin/xrunlab is $size bytes, over 15 MB" >&2; exit 1; }
if readelf -SW /usr/bin/xrunlab | grep -q '\.debug_line'; then
  echo "tests/package: /usr/bin/xrunlab still holds its line tables" >&2; exit 1
fi
readelf -SW /usr/bin/xrunlab | grep -q '\.gnu_debuglink' || { echo "tests/package: /usr/bin/xrunlab names no debug file" >&2; exit 1; }
(cd "$work" && /usr/bin/xrunlab debug-backtrace >bt.txt)
grep -qE 'failure\.rs:[0-9]+' "$work/bt.txt" || { echo "tests/package: with the debug file installed, a backtrace names no file and line:" >&2; cat "$work/bt.txt" >&2; exit 1; }
$sudo mv /usr/lib/debug/usr/bin/xrunlab.debug "$work/xrunlab.debug"
(cd "$work" && /usr/bin/xrunlab debug-backtrace >bt-without.txt)
$sudo mv "$work/xrunlab.debug" /usr/lib/debug/usr/bin/xrunlab.debug
# The installed binary is stripped (symbols too, as Debian's are): without the debug file its
# own frames are unnamed, so the names and lines above came from that file.
if grep -qE 'failure\.rs:[0-9]+|print_backtrace' "$work/bt-without.txt"; then
  echo "tests/package: frames named without the debug file: the test proves nothing" >&2; exit 1
fi
echo "tests/package: backtraces name functions, files and lines from the installed debug file"

(cd "$work" && /usr/bin/xrunlab run --duration 2s --json run.json)
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["summary"]["buffers"] > 0, r["summary"]' "$work/run.json"

# The page is compiled into the binary: served from a directory with no source tree in sight.
(cd "$work" && exec /usr/bin/xrunlab dashboard --port 0 --no-token --sines 100 >dash.out 2>dash.err) &
dash_pid=$!
url=""
for _ in $(seq 300); do
  url="$(grep -o 'http://127\.0\.0\.1:[0-9]*/' "$work/dash.out" | head -n1 || true)"
  [ -n "$url" ] && break
  sleep 0.1
done
[ -n "$url" ] || { echo "tests/package: the dashboard printed no URL: $(cat "$work/dash.err")" >&2; exit 1; }
python3 - "$url" <<'PY'
import sys, urllib.request
base = sys.argv[1]
for path, needle in [("", b"<html"), ("static/app.js", b"import"), ("static/style.css", b"{")]:
    body = urllib.request.urlopen(base + path, timeout=10).read()
    assert needle in body, f"{base}{path}: {body[:200]!r}"
    print(f"tests/package: the installed dashboard serves /{path} ({len(body)} bytes)")
PY
kill -TERM "$dash_pid"
wait "$dash_pid"
dash_pid=""
$sudo dpkg -r xrunlab
[ ! -e /usr/bin/xrunlab ] || { echo "tests/package: dpkg -r left /usr/bin/xrunlab" >&2; exit 1; }
echo "tests/package: the package installs, runs from /usr/bin and is removed"
