import { domainToASCII } from 'node:url';
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { lookupForms, mailboxesOf } from '../../src/store/mailboxes.js';

describe('mailboxesOf', () => {
  it.each<[unknown, string[]]>([
    ['person@example.com', ['person@example.com']],
    ['Person@EXAMPLE.com.', ['Person@example.com']],
    ['p@\uff25\uff38\uff21\uff2d\uff30\uff2c\uff25\u3002com', ['p@example.com']],
    ['p@exa\u034fmple\uff0ecom\uff61', ['p@example.com']],
    ['idn@B\u00fccher.example', ['idn@xn--bcher-kva.example']],
    ['Bob <bob@example.com>', ['bob@example.com']],
    ['"Doe, Jo" <jo@example.com> (home), ann@example.com;  ', ['jo@example.com', 'ann@example.com']],
    ['a@x.example b@y.example', ['a@x.example', 'b@y.example']],
    [' bo b@example.com\u00a0', ['bob@example.com']],
    [
      ['a@example.com', 7, 'Al <al@example.com>'],
      ['a@example.com', 'al@example.com'],
    ],
    ['no-at-sign', ['no-at-sign']],
    ['p@[192.0.2.1]', ['p@[192.0.2.1]']],
    [42, []],
    [' , ', []],
  ])('%j names %j', (value, expected) => {
    expect(mailboxesOf(value)).toEqual(expected);
  });

  it('looks a punycode domain up in its Unicode spelling too, as rows keyed before version 14 hold it', () => {
    expect(lookupForms('idn@xn--bcher-kva.example')).toEqual([
      'idn@xn--bcher-kva.example',
      'idn@b\u00fccher.example',
    ]);
    expect(lookupForms('idn@b\u00fccher.example.')).toEqual([
      'idn@xn--bcher-kva.example',
      'idn@b\u00fccher.example',
    ]);
  });
});

describe('the plain ASCII path', () => {
  it('folds as UTS-46 does', () => {
    const label = fc.stringMatching(/^[A-Za-z0-9-]{1,8}$/);
    const address = fc.record({
      local: fc.stringMatching(/^[A-Za-z0-9.+_-]{1,10}$/),
      labels: fc.array(label, { minLength: 1, maxLength: 3 }),
      last: fc.stringMatching(/^[A-Za-z][A-Za-z0-9-]{0,6}$/),
      dots: fc.constantFrom('', '.', '..'),
    });
    fc.assert(
      fc.property(address, ({ local, labels, last, dots }) => {
        const domain = `${[...labels, last].join('.')}`;
        const ascii = domainToASCII(domain) || domain;
        expect(mailboxesOf(`${local}@${domain}${dots}`)).toEqual([`${local}@${ascii}`]);
      }),
      { numRuns: 2000 },
    );
  });
});
