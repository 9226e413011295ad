import type { Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Browser, launchChromium } from '../support/browser.js';
import { TEST_API_KEY, useSimulator } from '../support/simulator.js';
import { call, EMAIL } from './http.js';
import { type Receiver, startReceiver } from './receiver.js';

// Retries a minute away: a failed delivery stays failed on the page while the test looks at it.
const sim = useSimulator({ backlog: 5, timeScale: 12 });
const OTHER_KEY = 'sim_test_other_account_0002';
const WAIT = { timeout: 20_000 };

let receiver: Receiver;
let browser: Browser;
let page: Page;
beforeAll(async () => {
  receiver = await startReceiver();
  browser = await launchChromium();
  page = await browser.context.newPage();
}, 90_000);
afterAll(async () => {
  await browser?.close();
  await receiver?.close();
});

/** The delivery rows of a webhook, newest first, as the page shows them. */
async function rows(webhookId: string) {
  const cells = page.locator(`[data-webhook="${webhookId}"] tr[data-delivery]`);
  return cells.evaluateAll((trs) =>
    trs.map((tr) => ({
      id: tr.getAttribute('data-delivery'),
      type: tr.getAttribute('data-event-type'),
      state: tr.querySelector('[data-field="state"]')?.textContent,
      http: tr.querySelector('[data-field="http"]')?.textContent,
    })),
  );
}

describe('the dashboard in a real browser', () => {
  it('shows deliveries, sends a test, resends, and shows emails and events per account', async () => {
    const reg = await call(sim(), 'POST', '/api/webhooks', {
      body: { url: receiver.url, events: ['email.delivered'] },
    });
    expect(reg.status).toBe(200);
    const webhookId: string = reg.body.id;
    const sent = await call(sim(), 'POST', '/api/emails', {
      body: { ...EMAIL, subject: 'Welcome', to: ['ada@example.test', 'bounced@example.test'] },
    });
    await receiver.waitFor(1);
    await call(sim(), 'POST', '/api/emails', {
      key: OTHER_KEY,
      body: { ...EMAIL, subject: 'Elsewhere', to: ['grace@example.test'] },
    });

    // Named in the address: the page would otherwise open on the account that sent last.
    await page.goto(`${sim().origin}/#${sim().account(TEST_API_KEY).id}`);
    const card = page.locator(`[data-webhook="${webhookId}"]`);
    await card.waitFor(WAIT);
    expect(await card.locator('.webhook-url').textContent()).toBe(receiver.url);
    await expect
      .poll(() => rows(webhookId), WAIT)
      .toEqual([expect.objectContaining({ type: 'email.delivered', state: 'succeeded', http: '200' })]);

    // Send test: the receiver answers 503, the row says so and waits for its retry.
    receiver.plan([503]);
    await card.getByRole('button', { name: 'Send test' }).click();
    await expect.poll(() => rows(webhookId), WAIT).toHaveLength(2);
    const [test] = await rows(webhookId);
    expect(test).toMatchObject({ type: 'webhook.test', state: 'pending', http: '503' });
    expect(await page.locator('#flash').textContent()).toMatch(/^Sent webhook\.test evt_test_\w+$/);
    expect(receiver.received).toHaveLength(2);
    const testEvent = JSON.parse(receiver.received[1]!.body.toString());
    expect(testEvent).toMatchObject({ type: 'webhook.test', data: { webhook_id: webhookId } });

    // Resend the failed one: a new delivery of the same event, accepted this time.
    await card.locator(`tr[data-delivery="${test!.id}"]`).getByRole('button', { name: 'Resend' }).click();
    await expect.poll(() => rows(webhookId), WAIT).toHaveLength(3);
    const [resent, failed] = await rows(webhookId);
    expect(resent).toMatchObject({ type: 'webhook.test', state: 'succeeded', http: '200' });
    expect(resent!.id).not.toBe(test!.id);
    expect(failed).toMatchObject({ id: test!.id, http: '503' });
    expect(JSON.parse(receiver.received[2]!.body.toString()).id).toBe(testEvent.id);

    // The email with its outcome and events, and the feed's newest events with their ids.
    const email = page.locator(`tr[data-email="${sent.body.id}"]`);
    await email.waitFor(WAIT);
    expect(await email.locator('.badge').allTextContents()).toEqual(['delivered', 'bounced']);
    expect(await email.textContent()).toContain('Welcome');
    const feed = (await call(sim(), 'GET', '/api/events?limit=1000')).body.data as { id: string }[];
    const shown = await page
      .locator('#event-rows tr[data-event]')
      .evaluateAll((trs) => trs.map((tr) => tr.getAttribute('data-event')));
    expect(shown).toEqual(feed.map((e) => e.id).reverse());

    // The other account: its own email, no webhook; the same first event id as this one.
    const other = sim().account(OTHER_KEY).id;
    await page.locator('#account').selectOption(other);
    await page.locator('#email-rows').getByText('Elsewhere').waitFor(WAIT);
    expect(await page.locator('[data-webhook]').count()).toBe(0);
    expect(await page.locator('#email-rows').textContent()).not.toContain('Welcome');
    expect(await page.locator('#event-rows tr[data-event]').last().getAttribute('data-event')).toBe(
      feed[0]!.id,
    );

    await page.locator('#account').selectOption(sim().account(TEST_API_KEY).id);
    await card.waitFor(WAIT);

    // Records: the bounce above is suppressed; the form emits contact events that show up too.
    const records = () =>
      page
        .locator('#records tr[data-record]')
        .evaluateAll((trs) =>
          trs.map((tr) => [tr.getAttribute('data-record'), tr.querySelector('.badge')?.textContent]),
        );
    await expect.poll(records, WAIT).toContainEqual(['bounced@example.test', 'bounced']);
    await page.locator('#contact-email').fill('Ada@Example.test');
    await page.getByRole('button', { name: 'Unsubscribe' }).click();
    await expect.poll(records, WAIT).toContainEqual(['ada@example.test', 'unsubscribed']);
    expect(await page.locator('#flash').textContent()).toMatch(/^Emitted contact\.unsubscribed evt_\d+$/);
    await page.getByRole('button', { name: 'Subscribe', exact: true }).click();
    await expect.poll(records, WAIT).toContainEqual(['ada@example.test', 'subscribed']);
    expect(await page.locator('#suppression-rows').textContent()).not.toContain('ada@example.test');
    // DASHBOARD_SCREENSHOT=docs/dashboard.png refreshes the picture in the docs.
    const screenshot = process.env.DASHBOARD_SCREENSHOT;
    if (screenshot) await page.screenshot({ path: screenshot, fullPage: true });
  }, 90_000);

  it('answers loopback pages only: another origin is refused', async () => {
    const res = await call(sim(), 'GET', '/_sim/accounts', {
      key: null,
      headers: { origin: 'https://elsewhere.example' },
    });
    expect(res.status).toBe(403);
    const rebound = await call(sim(), 'GET', '/', { key: null, headers: { host: 'rebound.example:80' } });
    expect(rebound.status).toBe(403);
    const own = await call(sim(), 'GET', '/', { key: null });
    expect(own.status).toBe(200);
    expect(own.headers['content-security-policy']).toContain("script-src 'self'");
  });
});
