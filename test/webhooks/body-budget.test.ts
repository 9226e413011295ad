import { describe, expect, it } from 'vitest';
import { bodyBudget } from '../../src/webhooks/body-budget.js';

describe('bodyBudget', () => {
  let clock = 0;
  const make = () => bodyBudget({ maxBytes: 100, evictAfterMs: 1_000, now: () => clock });

  it('holds what was reserved, refuses what does not fit, and has room again once released', () => {
    clock = 0;
    const budget = make();
    const a = budget.open(() => {});
    const b = budget.open(() => {});
    expect(a.reserve(60)).toBe(true);
    expect(b.reserve(50)).toBe(false);
    expect(budget.held()).toBe(60);
    a.release();
    a.release();
    expect(budget.held()).toBe(0);
    expect(b.reserve(50)).toBe(true);
  });

  it('evicts the oldest body still arriving once it is old enough, never the one asking nor a whole one', () => {
    clock = 0;
    const budget = make();
    const evicted: string[] = [];
    const whole = budget.open(() => evicted.push('whole'));
    whole.reserve(30);
    whole.complete();
    const old = budget.open(() => evicted.push('old'));
    old.reserve(30);
    clock = 500;
    const young = budget.open(() => evicted.push('young'));
    young.reserve(30);
    const asking = budget.open(() => evicted.push('asking'));
    // The oldest arriving body is 500 ms old: too young to give up its room.
    clock = 900;
    expect(asking.reserve(20)).toBe(false);
    clock = 1_000;
    expect(asking.reserve(20)).toBe(true);
    expect(evicted).toEqual(['old']);
    expect(budget.held()).toBe(80);
    // Its own room is freed already; the evicted reader's release changes nothing.
    old.release();
    expect(budget.held()).toBe(80);
    // Next in line, `young` (started at 500), is not old enough at 1,200.
    clock = 1_200;
    expect(asking.reserve(30)).toBe(false);
    expect(evicted).toEqual(['old']);
  });

  it("holds a suspect sender's bodies to their share, and gives their room to any other body whatever their age", () => {
    clock = 0;
    const budget = make();
    const evicted: string[] = [];
    const suspect = budget.open(() => evicted.push('suspect'), true);
    expect(suspect.reserve(30)).toBe(false);
    expect(suspect.reserve(25)).toBe(true);
    const other = budget.open(() => evicted.push('other'));
    expect(other.reserve(70)).toBe(true);
    // Full; the suspect body is young, but gives up its room to a body that is not suspect.
    const asking = budget.open(() => evicted.push('asking'));
    expect(asking.reserve(20)).toBe(true);
    expect(evicted).toEqual(['suspect']);
    expect(budget.held()).toBe(90);
    // The share is free again once the suspect body's room went.
    expect(budget.open(() => {}, true).reserve(10)).toBe(true);
  });
});
