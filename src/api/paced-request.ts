import type { AccountBudget } from '../budget/account-budget.js';
import type { RequestBudgets } from '../budget/request-budgets.js';
import type { RequestFn } from './http.js';

/**
 * A request function paced by `budget`: each request waits for its slot first. The
 * answers' headers are read by the transport (`onHeaders`), which sees refusals too;
 * a request function of a test's own is read here, on success.
 */
export function pacedRequest(
  request: RequestFn,
  budgets: RequestBudgets,
  budget: AccountBudget,
  readsHeaders: boolean,
): RequestFn {
  return async (req) => {
    await budget.take(req.signal);
    if (readsHeaders) return request(req);
    try {
      const res = await request(req);
      budgets.answered(budget, res.status, res.headers);
      return res;
    } catch (err) {
      const status = (err as { status?: unknown }).status;
      if (status === 429) budgets.answered(budget, status, undefined);
      throw err;
    }
  };
}
