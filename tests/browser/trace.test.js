// Browser test of "Save trace": the real binary with an injected stall; clicking the toolbar's save control downloads the last seconds as a Perfetto (Chrome JSON) trace with render slices and the stalled dropout, and a span out of range is refused with its allowed range. Runs in node's test runner with Debian's chromium.
// @ts-check

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ARTIFACTS, openDashboard } from './harness.js';

/** @type {import('./harness.js').Server} */
let server;
/** @type {() => Promise<void>} */
let close;
/** @type {import('playwright-core').Page} */
let page;
/** @type {string[]} */
let pageErrors = [];

before(async () => {
  ({ server, page, pageErrors, close } = await openDashboard(['--stall', '8ms', '--stall-every', '400ms']));
});

after(async () => {
  await close?.();
});

test('the save control downloads the last 2 s as a trace with renders and the stalled dropout', async () => {
  // More than the 2 s asked for, so the trace can cover all of them.
  await page.waitForTimeout(2500);
  await page.fill('[data-testid="trace-seconds"]', '2');
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('[data-testid="save-trace"]')]);
  assert.match(download.suggestedFilename(), /^xrunlab-trace-\d{4}-\d\d-\d\dT\d\d-\d\d-\d\dZ\.json$/);
  const path = join(ARTIFACTS, download.suggestedFilename());
  await download.saveAs(path);
  const doc = JSON.parse(readFileSync(path, 'utf8'));
  /** @type {Array<Record<string, any>>} */
  const events = doc.traceEvents;
  assert.equal(doc.otherData.xrunlab_requested_seconds, 2);
  assert.ok(doc.otherData.xrunlab_covered_seconds > 1.5, JSON.stringify(doc.otherData));
  const renders = events.filter((e) => e.ph === 'X' && e.name === 'render');
  assert.ok(renders.length > 300, `${renders.length} render slices in 2 s`);
  assert.ok(
    events.some((e) => e.ph === 'M' && e.name === 'thread_name' && String(e.args.name).startsWith('driver (tid ')),
    'the driver track is named',
  );
  const stalled = events.filter(
    (e) => e.name === 'dropout' && (e.args.detail.notes ?? []).some((/** @type {string} */ n) => n.startsWith('injected stall')),
  );
  assert.ok(stalled.length >= 2, `${stalled.length} injected-stall dropouts in 2 s of stalls every 400 ms`);
  await page.waitForSelector('#message.ok');
  assert.match((await page.textContent('#message')) ?? '', /Trace saved: xrunlab-trace-.*the last \d\.\d s of the 2 asked/);
  assert.deepEqual(pageErrors, []);
});

test('a span out of range is refused with the allowed range', async () => {
  await page.fill('[data-testid="trace-seconds"]', '61');
  await page.click('[data-testid="save-trace"]');
  await page.waitForSelector('#message.bad');
  const text = (await page.textContent('#message')) ?? '';
  assert.match(text, /Trace refused: .*seconds.*1\.\.=60/);
  await page.screenshot({ path: join(ARTIFACTS, 'trace-refused.png') });
  assert.deepEqual(pageErrors, []);
});
