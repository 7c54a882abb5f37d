// Browser test of the History view: the real binary started on a real history database (written by the history's own writer with real watch cards: crates/dash/examples/history_fixture.rs); the timeline shows every xrun coloured by kind, the drift events and the server's gap; the filters narrow the list and the marks; clicking an xrun opens its card; a node named like a script shows as text and runs nothing; a dashboard without a history says how to start recording. Runs in node's test runner with Debian's chromium.
// @ts-check

import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { ARTIFACTS, openDashboard } from './harness.js';

const here = dirname(fileURLToPath(import.meta.url));
const FIXTURE = process.env.XRUNLAB_HISTORY_FIXTURE ?? join(here, '../../target/debug/examples/history_fixture');
const SCRIPT_NODE = '<script>window.pwned=1</script><img src=x onerror=window.pwned=2>';

/** @type {import('playwright-core').Page} */
let page;
/** @type {string[]} */
let pageErrors = [];
/** @type {() => Promise<void>} */
let close;
/** @type {string[]} */
const dialogs = [];
const dir = mkdtempSync(join(tmpdir(), 'xrunlab-history-'));

/** @param {import('playwright-core').Page} p */
async function showHistory(p) {
  await p.check('[data-testid="show-history"]');
  await p.waitForSelector('#history-panel:not([hidden])');
}

/** The list's rows, as the node column shows them. */
async function listedNodes() {
  return page.$$eval('#history-list tbody tr[data-id] td.node', (tds) => tds.map((td) => td.textContent ?? ''));
}

/** @param {number} n */
async function waitForRows(n) {
  await page.waitForFunction((n) => document.querySelectorAll('#history-list tbody tr[data-id]').length === n, n);
}

before(async () => {
  const db = join(dir, 'history.db');
  // 300 more xruns over the month before: the list pages them.
  execFileSync(FIXTURE, [db, '300']);
  ({ page, pageErrors, close } = await openDashboard(['--history', db]));
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
  await showHistory(page);
  // The last hour: the fixture's xruns are minutes apart, so each mark stands alone.
  await page.selectOption('[data-testid="history-span"]', '1h');
  await waitForRows(12);
});

after(async () => {
  await close?.();
  rmSync(dir, { recursive: true, force: true });
});

test('the timeline marks every xrun by kind, the drift events and the gap', async () => {
  assert.equal(await page.locator('[data-testid="xrun-mark"]').count(), 12);
  assert.equal(await page.locator('[data-testid="drift-mark"]').count(), 2);
  assert.equal(await page.locator('[data-testid="history-gap"]').count(), 1);
  /** @type {Record<string, string[]>} */
  const fills = await page.$$eval('[data-testid="xrun-mark"]', (marks) => {
    /** @type {Record<string, string[]>} */
    const by = {};
    for (const m of marks) (by[m.getAttribute('data-kind') ?? ''] ??= []).push(m.getAttribute('fill') ?? '');
    return by;
  });
  assert.deepEqual(Object.keys(fills).sort(), ['driver_woke_late', 'node_ran_long', 'node_woke_late', 'unexplained']);
  for (const [kind, f] of Object.entries(fills)) assert.equal(new Set(f).size, 1, `one colour per kind: ${kind} ${f}`);
  assert.equal(new Set(Object.values(fills).map((f) => f[0])).size, 4, 'a colour of its own for each kind');
  // Marks stand in time order, left to right.
  const xs = await page.$$eval('[data-testid="xrun-mark"]', (marks) => marks.map((m) => Number(m.getAttribute('x'))));
  assert.deepEqual(xs, [...xs].sort((a, b) => a - b));
  const status = (await page.textContent('[data-testid="history-status"]')) ?? '';
  assert.match(status, /^12 xruns, 2 drift events, 1 time the server was away; from \//, status);
  await page.screenshot({ path: join(ARTIFACTS, 'history.png'), fullPage: true });
});

test('the filters, filled from the data, narrow the list and the marks', async () => {
  const culprits = await page.$$eval('[data-testid="history-culprit"] option', (os) => os.map((o) => o.textContent));
  assert.deepEqual(culprits, ['all', 'busyhog (3)', 'xhci_hcd (3)']);
  await page.selectOption('[data-testid="history-node"]', 'synth');
  await waitForRows(6);
  assert.deepEqual(new Set(await listedNodes()), new Set(['synth']));
  assert.equal(await page.locator('[data-testid="xrun-mark"]').count(), 6);
  await page.selectOption('[data-testid="history-kind"]', 'node_ran_long');
  await waitForRows(3);
  const kinds = await page.$$eval('[data-testid="xrun-mark"]', (ms) => ms.map((m) => m.getAttribute('data-kind')));
  assert.deepEqual(kinds, ['node_ran_long', 'node_ran_long', 'node_ran_long']);
  // The other choices stay offered while a filter is on.
  const nodes = await page.$$eval('[data-testid="history-node"] option', (os) => os.map((o) => o.textContent));
  assert.equal(nodes.length, 4, `all, synth, the script node, reverb: ${nodes}`);
  await page.selectOption('[data-testid="history-node"]', '');
  await page.selectOption('[data-testid="history-kind"]', '');
  await page.selectOption('[data-testid="history-culprit"]', 'xhci_hcd');
  await waitForRows(3);
  await page.selectOption('[data-testid="history-culprit"]', '');
  await waitForRows(12);
});

test('clicking an xrun opens its card; clicking a drift mark shows what changed', async () => {
  await page.click('[data-testid="xrun-mark"][data-kind="driver_woke_late"] >> nth=0');
  const verdict = page.locator('[data-testid="history-card"] [data-testid="verdict"]');
  await verdict.waitFor();
  assert.match((await verdict.textContent()) ?? '', /^xrun 2 \(cycle 2000\): "synth" \(pid 4242\) finished late: .*the driver "alsa_output\.pci" woke 2\.00 ms late, behind irq xhci_hcd on CPU0$/);
  let card = (await page.textContent('[data-testid="history-card"]')) ?? '';
  assert.match(card, /Xrun 2 at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d on pipewire: driver_woke_late, culprit xhci_hcd/, card);
  assert.match(card, /root: the driver "alsa_output\.pci"/, card);
  assert.match(card, /took its time: irq xhci_hcd on CPU0 1\.90 ms/, card);
  assert.equal(await page.locator('[data-testid="xrun-mark"].selected').getAttribute('data-id'), '2');
  // From the list: the xrun recorded after the demotion says so.
  await page.click('#history-list tbody tr[data-id="6"]');
  await page.waitForFunction(() => document.querySelector('[data-testid="history-card"]')?.textContent?.includes('Xrun 6 '));
  card = (await page.textContent('[data-testid="history-card"]')) ?? '';
  assert.match(card, /has run SCHED_OTHER since 14:02:11/, card);
  // The first one has a trace on file.
  await page.click('#history-list tbody tr[data-id="1"]');
  await page.waitForFunction(() => document.querySelector('[data-testid="history-card"]')?.textContent?.includes('xrunlab history --trace 1 FILE'));
  card = (await page.textContent('[data-testid="history-card"]')) ?? '';
  assert.match(card, /took its time: busyhog \(pid 7466, SCHED_FIFO 95\) on CPU1 4\.80 ms/, card);
  await page.click('[data-testid="drift-mark"] >> nth=0');
  await page.waitForFunction(() => document.querySelector('[data-testid="history-card"]')?.textContent?.startsWith('Drift at'));
  card = (await page.textContent('[data-testid="history-card"]')) ?? '';
  assert.match(card, /lost SCHED_FIFO 83: now SCHED_OTHER/, card);
  assert.match(card, /before: SCHED_FIFO 83; after: SCHED_OTHER/, card);
});

test('a node named like a script shows as text and runs nothing', async () => {
  const nodes = await listedNodes();
  assert.equal(nodes.filter((n) => n === SCRIPT_NODE).length, 3, `${nodes}`);
  await page.click('#history-list tbody tr[data-id="3"]');
  const verdict = page.locator('[data-testid="history-card"] [data-testid="verdict"]');
  await page.waitForFunction(() => document.querySelector('[data-testid="history-card"]')?.textContent?.includes('Xrun 3 '));
  assert.ok(((await verdict.textContent()) ?? '').includes(`"${SCRIPT_NODE}" (pid 4242) woke late`));
  const options = await page.$$eval('[data-testid="history-node"] option', (os) => os.map((o) => o.textContent));
  assert.ok(options.includes(`${SCRIPT_NODE} (3)`), `${options}`);
  assert.equal(await page.evaluate(() => /** @type {any} */ (window).pwned), undefined, 'no script of the name ran');
  assert.equal(await page.locator('#history-panel script, #history-panel img').count(), 0);
  assert.deepEqual(dialogs, []);
  assert.deepEqual(pageErrors, []);
});

test('a long span lists 200 xruns at a time, the timeline marks them all', async () => {
  assert.equal(await page.isHidden('[data-testid="history-more"]'), true, 'the last hour fits');
  await page.selectOption('[data-testid="history-span"]', '');
  await waitForRows(200);
  assert.equal(await page.locator('[data-testid="xrun-mark"]').count(), 312);
  const more = page.locator('[data-testid="history-more"]');
  assert.equal(await more.textContent(), 'Show 112 more (112 older in this answer)');
  await more.click();
  await waitForRows(312);
  assert.equal(await more.isHidden(), true);
  assert.match((await page.textContent('[data-testid="history-status"]')) ?? '', /^312 xruns, /);
  await page.selectOption('[data-testid="history-span"]', '1h');
  await waitForRows(12);
});

test('without a history the view says how to start recording, and the dashboard goes on', async () => {
  const missing = join(dir, 'none', 'history.db');
  const other = await openDashboard(['--history', missing]);
  try {
    await showHistory(other.page);
    const status = other.page.locator('[data-testid="history-status"]');
    await other.page.waitForFunction(() => document.querySelector('[data-testid="history-status"]')?.textContent?.startsWith('No history to show.'));
    const text = (await status.textContent()) ?? '';
    assert.ok(text.includes(`no history at ${missing}`), text);
    assert.match(text, /To record one: start the flight recorder with `xrunlab record`/, text);
    assert.equal(await other.page.locator('[data-testid="xrun-mark"]').count(), 0);
    assert.equal(await other.page.textContent('#conn'), 'live');
    assert.deepEqual(other.pageErrors, []);
  } finally {
    await other.close();
  }
});
