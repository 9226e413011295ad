const LOOPBACK_HOSTS = new Set(['localhost', '127.0.0.1', '[::1]', '::1']);

/** True for a host that never leaves this machine. */
export function isLoopbackHost(hostname: string): boolean {
  return LOOPBACK_HOSTS.has(hostname) || /^127\.\d+\.\d+\.\d+$/.test(hostname);
}

/**
 * Why a base URL is refused, or null when it is fine: it must end in `/api`, and
 * plain http is only allowed to a loopback host (the key would travel in clear).
 */
export function checkBaseUrl(value: string): string | null {
  let url: URL;
  try {
    url = new URL(value);
  } catch {
    return 'not a valid URL';
  }
  if (!url.pathname.replace(/\/+$/, '').endsWith('/api')) return 'must end in /api';
  if (url.search || url.hash) return 'must not have a query or fragment';
  if (url.username || url.password) return 'must not hold credentials';
  if (url.protocol === 'https:') return null;
  if (url.protocol === 'http:') {
    return isLoopbackHost(url.hostname) ? null : 'http:// is only allowed to a loopback host; use https://';
  }
  return 'must start with https://';
}
