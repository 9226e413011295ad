/**
 * Email address fields as the service's specification writes them: `from` is a
 * bare address (`app@example.com`) or a display name and an address in angle
 * brackets (`Acme <app@example.com>`, `"Acme, Inc." <app@example.com>`).
 * The checks are deliberately plain: they catch a missing or mistyped field
 * before a request, and leave the finer rules of RFC 5322 to the service.
 */
const ADDRESS = /^[^\s@<>",;:()[\]\\]+@[^\s@<>",;:()[\]\\]+$/;
const QUOTED_NAME = /^"(?:[^"\\\r\n]|\\.)*"$/;
const PLAIN_NAME = /^[^"<>@,;:\r\n]+$/;

/** `local@domain`, with no spaces, brackets or separators. */
export function isAddress(value: string): boolean {
  return ADDRESS.test(value);
}

/** A bare address, or `Display Name <address>` (the name may be quoted). */
export function isFromField(value: string): boolean {
  const trimmed = value.trim();
  if (isAddress(trimmed)) return true;
  const m = /^(.*?)\s*<([^<>]*)>$/.exec(trimmed);
  if (!m) return false;
  const [, name = '', address = ''] = m;
  const nameOk = name === '' || QUOTED_NAME.test(name) || PLAIN_NAME.test(name);
  return nameOk && isAddress(address);
}
