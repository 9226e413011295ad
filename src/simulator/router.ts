import type { IncomingMessage } from 'node:http';
import type { Account } from './account.js';
import type { Reply } from './respond.js';

export interface RouteRequest {
  req: IncomingMessage;
  url: URL;
  /** Path parameters by name (`:id` -> `params.id`), URL-decoded. */
  params: Record<string, string>;
  /** Under `/api`, the account of the request's key; under `/_sim`, the default account. */
  account: Account;
}

export interface Route {
  method: string;
  /** The pattern, as in `/api/webhooks/:id/test`; with the method, the route's name in the stats. */
  path: string;
  /** `api` routes need a key and get the fault knobs; `control` routes are for loopback clients only. */
  scope: 'api' | 'control';
  /** The body is written with the feed's body faults (slow, truncated, hanging). */
  feedBody?: boolean;
  handle(r: RouteRequest): Promise<Reply> | Reply;
  /** Compiled from `path`. */
  pattern: RegExp;
}

export function route(
  method: string,
  path: string,
  scope: Route['scope'],
  handle: Route['handle'],
  extra: { feedBody?: boolean } = {},
): Route {
  const source = path
    .split('/')
    .map((part) => (part.startsWith(':') ? `(?<${part.slice(1)}>[^/]+)` : part))
    .join('/');
  return { method, path, scope, handle, pattern: new RegExp(`^${source}/?$`), ...extra };
}

export type Match = { route: Route; params: Record<string, string> } | { allowed: string[] } | null;

/** The route for this method and path; `allowed` when only the method is wrong; null when no path matches. */
export function matchRoute(routes: readonly Route[], method: string, pathname: string): Match {
  const allowed: string[] = [];
  for (const r of routes) {
    const m = r.pattern.exec(pathname);
    if (!m) continue;
    if (r.method !== method) {
      allowed.push(r.method);
      continue;
    }
    const params: Record<string, string> = {};
    for (const [name, value] of Object.entries(m.groups ?? {})) params[name] = safeDecode(value);
    return { route: r, params };
  }
  return allowed.length > 0 ? { allowed } : null;
}

function safeDecode(value: string): string {
  try {
    return decodeURIComponent(value);
  } catch {
    return value;
  }
}
