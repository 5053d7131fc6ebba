// Plan limits as the console displays them: the gateway's own table (src/gateway/plans.ts),
// so the page shows exactly what the gateway enforces.
import { PLANS, limitsFor } from '../gateway/plans';
import type { PlanId, Workspace } from '../store/gateway/types';

const PLAN_LABELS: Record<PlanId, string> = { free: 'Free', starter: 'Starter', scale: 'Scale', enterprise: 'Enterprise' };

export interface DisplayLimits {
  planLabel: string;
  requestsPerMinute: number;
  creditsPerMonth: number;
}

export function displayLimits(ws: Workspace): DisplayLimits {
  const limits = limitsFor(ws);
  return {
    planLabel: PLAN_LABELS[ws.plan] ?? ws.plan,
    requestsPerMinute: limits.requestsPerMinute,
    creditsPerMonth: limits.creditsPerMonth,
  };
}

export const PLAN_OPTIONS = (Object.keys(PLANS) as PlanId[]).map((id) => ({
  id,
  label: PLAN_LABELS[id],
  requestsPerMinute: PLANS[id].requestsPerMinute,
  creditsPerMonth: PLANS[id].creditsPerMonth,
  // Enterprise numbers are defaults that custom limits replace.
  custom: id === 'enterprise',
}));
