import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Browser, launchChromium } from '../support/browser.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { call, EMAIL } from './http.js';

const sim = useSimulator();
const SENDER_KEY = 'sim_test_sender_account_01';
const LATER_KEY = 'sim_test_later_account_02';
const WAIT = { timeout: 20_000 };
/** Run in the page: what it remembers of the choice (the tests' types have no DOM). */
const REMEMBERED = "localStorage.getItem('simulator.account')";

let browser: Browser;
let page: Page;
/** Every request of the page answered 400 or more, and every console error. */
const failures: string[] = [];
beforeAll(async () => {
  browser = await launchChromium();
  page = await browser.context.newPage();
  page.on('response', (res) => {
    if (res.status() >= 400) failures.push(`${res.status()} ${new URL(res.url()).pathname}`);
  });
  page.on('console', (msg) => {
    if (msg.type() === 'error') failures.push(msg.text());
  });
}, 90_000);
afterAll(async () => {
  await browser?.close();
});

/** Opens the page afresh and answers the account its picker shows once drawn. */
async function open(hash = ''): Promise<string> {
  // From elsewhere: a change of the hash alone would not load the page again.
  await page.goto('about:blank');
  await page.goto(`${sim().origin}/${hash}`);
  await page
    .locator('#account option')
    .first()
    .waitFor({ state: 'attached', ...WAIT });
  return page.locator('#account').inputValue();
}

async function send(key: string, subject: string) {
  const res = await call(sim(), 'POST', '/api/emails', {
    key,
    body: { ...EMAIL, subject, to: ['ada@example.test'] },
  });
  expect(res.status).toBe(200);
}

describe('the dashboard opens on the account used last', () => {
  it('the one that sent last, then the one picked, then one used after the pick', async () => {
    // The default account exists (the worker's key would read its feed) but sent nothing.
    expect((await call(sim(), 'GET', '/api/events')).status).toBe(200);
    await send(SENDER_KEY, 'From the sender');
    const sender = sim().account(SENDER_KEY).id;
    expect(await open()).toBe(sender);
    await page.locator('#email-rows').getByText('From the sender').waitFor(WAIT);

    // A choice is remembered over a reload, and reading a feed is not using an account.
    const defaultAccount = sim().account(TEST_API_KEY).id;
    await page.locator('#account').selectOption(defaultAccount);
    await expect.poll(() => page.evaluate(REMEMBERED), WAIT).toContain(defaultAccount);
    expect((await call(sim(), 'GET', '/api/events', { key: SENDER_KEY })).status).toBe(200);
    expect(await open()).toBe(defaultAccount);

    // An account used through the API after the choice wins over it.
    await new Promise((resolve) => setTimeout(resolve, 5));
    await send(LATER_KEY, 'Later');
    expect(await open()).toBe(sim().account(LATER_KEY).id);
    await page.locator('#email-rows').getByText('Later').waitFor(WAIT);

    // An account named in the address wins over both.
    expect(await open(`#${sender}`)).toBe(sender);
  }, 90_000);

  it('serves its icon: the browser meets no 404 and no error', async () => {
    await open();
    const icon = await call(sim(), 'GET', '/favicon.ico', { key: null });
    expect(icon.status).toBe(200);
    expect(icon.headers['content-type']).toBe('image/svg+xml');
    expect(failures).toEqual([]);
  });
});
