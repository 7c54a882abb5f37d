#!/usr/bin/env bash
# Browser tests of the dashboard (and the histogram interchange with hdr-histogram-js): installs the npm packages (npm ci, from the committed lock),
# type-checks the page's JS with tsc, and drives Debian's chromium with playwright-core against
# the real binary (target/debug/xrunlab, or $XRUNLAB_BIN). Never downloads a browser.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
cd "$here"
export PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1
if ! command -v chromium >/dev/null 2>&1 && [ ! -x /usr/bin/chromium ]; then
  echo "tests/browser: installing Debian's chromium" >&2
  apt-get update -qq && apt-get install -y -qq chromium >/dev/null
fi
npm ci --no-audit --no-fund --loglevel=error
npx tsc --noEmit -p tsconfig.json
echo "tsc: the page's JS type-checks"
by_hand=
if [ -z "${XRUNLAB_BIN:-}" ]; then
  by_hand=1
  (cd "$root" && cargo build --quiet --bin xrunlab)
  export XRUNLAB_BIN="$root/target/debug/xrunlab"
fi
# The History view's test reads a history written by the history's own writer (an example of
# the dash crate; `cargo test --workspace` has built it already when test.sh runs this).
fixture="$root/target/debug/examples/history_fixture"
if [ -z "${XRUNLAB_HISTORY_FIXTURE:-}" ]; then
  if [ -n "$by_hand" ] || [ ! -x "$fixture" ]; then
    (cd "$root" && cargo build --quiet -p xrunlab-dash --example history_fixture)
  fi
  export XRUNLAB_HISTORY_FIXTURE="$fixture"
fi
mkdir -p artifacts
node --test --test-concurrency=1 dashboard.test.js token.test.js explain.test.js report.test.js trace.test.js history.test.js interchange.test.js
