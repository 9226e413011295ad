// The simulator's dashboard: reads the loopback JSON endpoints under /_sim and
// draws them. Everything shown is set as text, never as HTML: webhook URLs,
// subjects and addresses come from whoever called the API.

const REFRESH_MS = 2000;
const CHOICE_KEY = 'simulator.account';
const $ = (id) => document.getElementById(id);
/** The account shown: at first the one the address names (#acct_…), if any. */
let account = location.hash.slice(1) || null;
/** The simulator's time at the latest refresh: a choice is remembered with it. */
let simulatorNow = null;
let busy = false;
/** Only the latest refresh draws: an older one finishing late would show stale rows. */
let generation = 0;

/** An element with attributes and children (strings become text). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(name, String(value));
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

async function api(method, path, payload = {}) {
  const res = await fetch(path, {
    method,
    headers: method === 'POST' ? { 'content-type': 'application/json' } : {},
    body: method === 'POST' ? JSON.stringify(payload) : undefined,
  });
  const body = await res.json();
  if (!res.ok) throw new Error(body?.error?.message ?? `HTTP ${res.status}`);
  return body;
}

/** `2026-11-23 15:04:05`, in UTC as the service writes its times. */
function when(iso) {
  return iso ? el('span', { title: iso }, iso.replace('T', ' ').slice(0, 19)) : '';
}

/** `1 event`, `1,204 events`. */
function count(n, noun) {
  return `${n.toLocaleString('en')} ${noun}${n === 1 ? '' : 's'}`;
}

function flash(text, isError = false) {
  const box = $('flash');
  box.textContent = text;
  box.className = isError ? 'error' : '';
  box.hidden = false;
}

function httpStatus(delivery) {
  const last = delivery.attempts.at(-1);
  if (!last) return el('span', { class: 'muted' }, '…');
  if (last.status === null)
    return el('span', { class: 'http-bad', title: last.error ?? '' }, last.error ?? 'no answer');
  const ok = last.status >= 200 && last.status < 300;
  return el('span', { class: ok ? 'http-ok' : 'http-bad' }, String(last.status));
}

function deliveryRow(webhook, d) {
  const resend = el('button', { type: 'button', 'data-action': 'resend' }, 'Resend');
  resend.addEventListener('click', () =>
    act(
      resend,
      `/_sim/webhooks/${webhook.id}/deliveries/${d.id}/resend`,
      (r) => `Resent ${d.event_type} as ${r.id}`,
    ),
  );
  return el(
    'tr',
    { 'data-delivery': d.id, 'data-event-type': d.event_type },
    el('td', {}, el('span', { class: `badge ${d.status}`, 'data-field': 'state' }, d.status)),
    el('td', { 'data-field': 'http' }, httpStatus(d)),
    el('td', {}, d.event_type),
    el('td', { class: 'mono' }, d.event_id),
    el('td', {}, String(d.attempts.length)),
    el('td', {}, when(d.created_at)),
    el('td', {}, d.next_attempt_at ? when(d.next_attempt_at) : '—'),
    el('td', {}, resend),
  );
}

function webhookCard(webhook) {
  const test = el('button', { type: 'button', 'data-action': 'send-test' }, 'Send test');
  test.addEventListener('click', () =>
    act(test, `/_sim/webhooks/${webhook.id}/test`, (r) => `Sent webhook.test ${r.event.id}`),
  );
  const rows = webhook.deliveries.map((d) => deliveryRow(webhook, d));
  return el(
    'article',
    { class: 'webhook', 'data-webhook': webhook.id },
    el(
      'div',
      { class: 'webhook-head' },
      el('span', { class: 'webhook-url mono' }, webhook.url),
      el('span', { class: 'mono muted' }, webhook.id),
      el(
        'span',
        {},
        webhook.events.map((type) => el('span', { class: 'chip' }, type)),
      ),
      el('span', { class: 'muted' }, 'created ', when(webhook.created_at)),
      test,
    ),
    rows.length === 0
      ? el('p', { class: 'empty' }, 'No deliveries yet.')
      : el(
          'table',
          {},
          el(
            'thead',
            {},
            el(
              'tr',
              {},
              ['Status', 'HTTP', 'Event', 'Event id', 'Attempts', 'Created', 'Next attempt', ''].map((h) =>
                el('th', {}, h),
              ),
            ),
          ),
          el('tbody', {}, rows),
        ),
  );
}

/** The outcome of an email from its events: every type past `email.sent`. */
function outcome(email) {
  const kinds = [
    ...new Set(email.events.map((e) => e.type.replace('email.', '')).filter((k) => k !== 'sent')),
  ];
  return kinds.map((k) => el('span', { class: `badge ${k}` }, k));
}

function emailRow(email) {
  return el(
    'tr',
    { 'data-email': email.id },
    el('td', {}, when(email.created_at)),
    el('td', { class: 'mono' }, email.id),
    el('td', {}, email.to.join(', ')),
    el('td', {}, email.subject),
    el('td', {}, outcome(email)),
    el(
      'td',
      {},
      email.events.map((e) =>
        el(
          'div',
          { class: 'event-line' },
          el('span', { class: 'mono' }, e.id),
          ' ',
          e.type,
          ' ',
          e.to.join(', '),
        ),
      ),
    ),
  );
}

function eventRow(event) {
  const data = event.data ?? {};
  const about = Array.isArray(data.to) ? data.to.join(', ') : (data.email ?? data.email_id ?? '');
  return el(
    'tr',
    { 'data-event': event.id },
    el('td', { class: 'mono' }, event.id),
    el('td', {}, event.type),
    el('td', {}, when(event.created_at)),
    el('td', {}, String(about)),
  );
}

function recordRow(key, state, eventId, at) {
  return el(
    'tr',
    { 'data-record': key },
    el('td', {}, key),
    el('td', {}, el('span', { class: `badge ${state}` }, state)),
    el('td', { class: 'mono' }, eventId),
    el('td', {}, when(at)),
  );
}

function emptyRow(columns, text) {
  return el('tr', {}, el('td', { colspan: columns, class: 'empty' }, text));
}

/** The account last picked on this page, and the simulator's time then: `{id, at}` or null. */
function rememberedChoice() {
  try {
    const choice = JSON.parse(localStorage.getItem(CHOICE_KEY) ?? 'null');
    return typeof choice?.id === 'string' && typeof choice?.at === 'string' ? choice : null;
  } catch {
    return null;
  }
}

function rememberChoice(id) {
  try {
    localStorage.setItem(CHOICE_KEY, JSON.stringify({ id, at: simulatorNow ?? '' }));
  } catch {
    // Storage refused (a private window's quota): the page still works, it only forgets.
  }
}

/**
 * The account to open on: the one used last, whether picked here (remembered) or
 * changed through the API with its key (an email sent, a webhook registered); else
 * the default one. Times are the simulator's, so the browser's clock does not matter.
 */
function openingAccount(accounts) {
  const active = accounts
    .filter((a) => a.last_activity_at)
    .sort((a, b) => b.last_activity_at.localeCompare(a.last_activity_at))[0];
  const choice = rememberedChoice();
  const chosen = choice && accounts.find((a) => a.id === choice.id);
  if (chosen && (!active || choice.at >= active.last_activity_at)) return chosen.id;
  return (active ?? accounts.find((a) => a.default) ?? accounts[0]).id;
}

function drawAccounts(accounts) {
  const select = $('account');
  if (!accounts.some((a) => a.id === account)) account = openingAccount(accounts);
  select.replaceChildren(
    ...accounts.map((a) =>
      el('option', { value: a.id }, `${a.key_hint}${a.default ? ' (default)' : ''} · ${a.id}`),
    ),
  );
  select.value = account;
  const mine = accounts.find((a) => a.id === account);
  $('summary').textContent = [
    count(mine.events, 'event'),
    `${count(mine.emails_sent, 'email')} sent`,
    count(mine.webhooks, 'webhook'),
  ].join(' · ');
}

async function refresh() {
  const mine = ++generation;
  const { data: accounts, now } = await api('GET', '/_sim/accounts');
  if (mine !== generation) return;
  simulatorNow = now;
  drawAccounts(accounts);
  const base = `/_sim/accounts/${encodeURIComponent(account)}`;
  const [webhooks, emails, events, records] = await Promise.all([
    api('GET', `${base}/webhooks`),
    api('GET', `${base}/emails`),
    api('GET', `${base}/events?limit=50`),
    api('GET', `${base}/records`),
  ]);
  if (mine !== generation) return;
  $('webhook-list').replaceChildren(
    ...(webhooks.data.length === 0
      ? [
          el(
            'p',
            { class: 'empty' },
            'No webhooks yet: register one with POST /api/webhooks and this account’s key.',
          ),
        ]
      : webhooks.data.map(webhookCard)),
  );
  $('email-rows').replaceChildren(
    ...(emails.data.length === 0 ? [emptyRow(6, 'No email sent yet.')] : emails.data.map(emailRow)),
  );
  $('event-rows').replaceChildren(
    ...(events.data.length === 0 ? [emptyRow(4, 'The feed is empty.')] : events.data.map(eventRow)),
  );
  $('suppression-rows').replaceChildren(
    ...(records.suppressions.length === 0
      ? [emptyRow(4, 'No address bounced, complained or unsubscribed.')]
      : records.suppressions.map((s) => recordRow(s.address, s.reason, s.event_id, s.at))),
  );
  $('contact-rows').replaceChildren(
    ...(records.contacts.length === 0
      ? [emptyRow(4, 'No contact event yet.')]
      : records.contacts.map((c) => recordRow(c.email, c.status, c.last_event_id, c.last_event_at))),
  );
}

/** Runs a button's POST, says how it went, and redraws. */
async function act(button, path, describe, body = {}) {
  busy = true;
  button.disabled = true;
  try {
    flash(describe(await api('POST', path, body)));
  } catch (err) {
    flash(err.message, true);
  } finally {
    busy = false;
    await tick();
  }
}

async function tick() {
  try {
    await refresh();
  } catch (err) {
    flash(`Cannot reach the simulator: ${err.message}`, true);
  }
}

$('account').addEventListener('change', (e) => {
  account = e.target.value;
  rememberChoice(account);
  // The choice is remembered; an #acct_… left in the address would win over later use.
  if (location.hash) history.replaceState(null, '', location.pathname);
  $('flash').hidden = true;
  void tick();
});
// A contact event of the account shown, as the service would emit one.
$('contact-form').addEventListener('submit', (e) => {
  e.preventDefault();
  const button = e.submitter;
  const email = $('contact-email').value;
  void act(button, '/_sim/contacts', (r) => `Emitted ${r.type} ${r.id}`, {
    account,
    type: button.value,
    email,
  }).then(() => {
    button.disabled = false;
  });
});
setInterval(() => {
  if ($('live').checked && !busy && document.visibilityState === 'visible') void tick();
}, REFRESH_MS);
void tick();
