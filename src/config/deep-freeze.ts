/** The value frozen through and through: the configuration is read once and never changed. */
export function deepFreeze<T>(value: T): T {
  // What is frozen here was frozen whole: a turn's configForSource need not walk every source again.
  if (value && typeof value === 'object' && !Object.isFrozen(value)) {
    for (const inner of Object.values(value)) deepFreeze(inner);
    Object.freeze(value);
  }
  return value;
}
