import { domainToASCII, domainToUnicode } from 'node:url';

/**
 * The mailboxes a recipient value names, each with its domain folded as mail is routed
 * (docs/DATA.md, Addresses): what the apply statement keys contact_status and
 * suppressions by, and what `send` and `suppressions remove` look up. The schema's
 * address_key() then does the rest on both sides alike (white space and format
 * characters, NFC, lower case), so the two cannot disagree.
 *
 * `value` is a string or an array of them (other values name nothing). Each string
 * may hold several addresses, separated by commas or semicolons (or only by white
 * space), each bare or as `Name <address>`; comments in parentheses are left out.
 */
export function mailboxesOf(value: unknown): string[] {
  const strings = typeof value === 'string' ? [value] : Array.isArray(value) ? value : [];
  const out: string[] = [];
  for (const s of strings) {
    if (typeof s !== 'string') continue;
    // Most values are one plain ASCII address: the same result without the scan and UTS-46.
    const plain = PLAIN.exec(s);
    if (plain !== null && !/(^|\.)xn--/i.test(plain[2]!)) {
      out.push(`${plain[1]}@${plain[2]!.toLowerCase()}`);
      continue;
    }
    for (const address of addressesIn(s)) {
      const folded = foldDomain(address.replace(IGNORED, ''));
      if (folded !== '') out.push(folded);
    }
  }
  return out;
}

/**
 * The forms of `address` to look up: its mailboxes, and for a domain in punycode also
 * its Unicode spelling, which is how a row keyed before schema version 14 holds an
 * internationalised domain (migrations/0014 could not encode it).
 */
export function lookupForms(address: string): string[] {
  const forms = new Set<string>();
  for (const mailbox of mailboxesOf(address)) {
    forms.add(mailbox);
    const at = mailbox.lastIndexOf('@');
    const domain = mailbox.slice(at + 1);
    if (at >= 0 && /(^|\.)xn--/.test(domain)) {
      const unicode = domainToUnicode(domain);
      if (unicode !== '') forms.add(`${mailbox.slice(0, at)}@${unicode}`);
    }
  }
  return [...forms];
}

/**
 * One address of ASCII letters, digits and the local part's other atom characters, whose
 * domain's labels hold letters, digits and hyphens, the last one starting with a letter
 * (so that UTS-46 does nothing but lower its case, and the WHATWG host parser reads no
 * IPv4 number in it); trailing dots apart.
 */
const PLAIN = /^([A-Za-z0-9.!#$%&'*+/=?^_`{|}~-]+)@((?:[A-Za-z0-9-]+\.)*[A-Za-z][A-Za-z0-9-]*)\.*$/;

/** What address_key() removes as well (Unicode White_Space and Cf): removed first, so a domain can fold. */
const IGNORED = /[\p{White_Space}\p{Cf}]/gu;

/**
 * `local@domain` with the domain as the mail system routes it: UTS-46 to ASCII
 * (fullwidth letters, U+3002 as a dot, ignorable marks removed, lower case, punycode),
 * without a trailing dot. A domain UTS-46 refuses stays as written (less the dot).
 */
function foldDomain(address: string): string {
  const at = address.lastIndexOf('@');
  if (at < 0) return address;
  const written = address.slice(at + 1);
  let domain = folded.get(written);
  if (domain === undefined) {
    domain = (domainToASCII(written) || written).replace(/[.\u3002\uff0e\uff61]+$/, '');
    // Few domains recur across a page: the fold is the costly part of a mailbox.
    if (folded.size >= FOLDED_MAX) folded.clear();
    folded.set(written, domain);
  }
  return `${address.slice(0, at)}@${domain}`;
}

const folded = new Map<string, string>();
const FOLDED_MAX = 1000;

/**
 * The addresses of one recipient string, as RFC 5322 writes an address list: split at
 * commas and semicolons outside quotes, angle brackets and comments; of each part, the
 * address in its last `<…>`, else the part without its comments. A part that holds
 * several words with an `@` each is that many addresses.
 */
function addressesIn(text: string): string[] {
  const parts: { plain: string; angle: string | null }[] = [];
  let plain = '';
  let angle: string | null = null;
  let inAngle = false;
  let quoted = false;
  let comment = 0;
  const end = () => {
    parts.push({ plain, angle });
    plain = '';
    angle = null;
  };
  for (let i = 0; i < text.length; i++) {
    const c = text[i]!;
    if (comment > 0) {
      if (c === '\\') i++;
      else if (c === '(') comment++;
      else if (c === ')') comment--;
      continue;
    }
    let kept = c;
    if (quoted) {
      if (c === '\\' && i + 1 < text.length) kept = c + text[++i]!;
      else if (c === '"') quoted = false;
    } else if (c === '"') {
      quoted = true;
    } else if (c === '(') {
      comment = 1;
      continue;
    } else if (c === '<' && !inAngle) {
      inAngle = true;
      angle = '';
      continue;
    } else if (c === '>' && inAngle) {
      inAngle = false;
      continue;
    } else if ((c === ',' || c === ';') && !inAngle) {
      end();
      continue;
    }
    if (inAngle) angle += kept;
    else plain += kept;
  }
  end();
  return parts.flatMap(({ plain, angle }) => {
    if (angle !== null) return [angle];
    const words = plain.split(/\s+/).filter((w) => w !== '');
    return words.filter((w) => w.includes('@')).length > 1 ? words.filter((w) => w.includes('@')) : [plain];
  });
}
