import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { decodeUtf8, hasMarkedBytes, quarantineForm } from '../../src/api/utf8.js';

/** The bytes a text in quarantineForm stands for: the form's own rules, read back. */
function bytesOf(form: string): Buffer {
  const parts: Buffer[] = [];
  let text = '';
  for (let i = 0; i < form.length; i++) {
    if (form[i] === '\\' && form[i + 1] === '\\') {
      text += '\\';
      i++;
    } else if (form[i] === '\\' && form[i + 1] === 'x') {
      parts.push(Buffer.from(text), Buffer.from([Number.parseInt(form.slice(i + 2, i + 4), 16)]));
      text = '';
      i += 3;
    } else {
      text += form[i];
    }
  }
  parts.push(Buffer.from(text));
  return Buffer.concat(parts);
}

describe('decodeUtf8 and quarantineForm', () => {
  it('decode UTF-8 as it is, a byte order mark kept', () => {
    expect(decodeUtf8(Buffer.from('\ufeffcaf\u00e9 \u{1f600}'))).toEqual({
      text: '\ufeffcaf\u00e9 \u{1f600}',
      valid: true,
    });
  });

  it('tell apart bytes that Buffer#toString would merge into U+FFFD', () => {
    const ff = decodeUtf8(Buffer.from([0x69, 0xff]));
    const fe = decodeUtf8(Buffer.from([0x69, 0xfe]));
    expect(ff.valid).toBe(false);
    expect(ff.text).not.toBe(fe.text);
    expect([quarantineForm(ff.text), quarantineForm(fe.text)]).toEqual(['i\\xFF', 'i\\xFE']);
    // Truncated and overlong sequences, an encoded surrogate: each byte on its own.
    expect(
      quarantineForm(decodeUtf8(Buffer.from([0xe2, 0x82, 0x41, 0xc0, 0xaf, 0xed, 0xa0, 0x80])).text),
    ).toBe('\\xE2\\x82A\\xC0\\xAF\\xED\\xA0\\x80');
  });

  it('are lossless: any bytes come back from the quarantine form, and only marked bytes are marked', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const { text, valid } = decodeUtf8(bytes);
        expect(bytesOf(quarantineForm(text)).equals(Buffer.from(bytes))).toBe(true);
        expect(hasMarkedBytes(text)).toBe(!valid);
      }),
      { numRuns: 2000 },
    );
  });
});
