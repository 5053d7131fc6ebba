// Plans (spec part 8): requests per minute per token, credits per calendar month (UTC) per workspace.
import type { PlanId, PlanLimits, Workspace } from '../store/gateway/types';

export const PLANS: Record<PlanId, PlanLimits> = {
  free: { requestsPerMinute: 60, creditsPerMonth: 1_000, concurrentStreams: 2, services: ['noise-suppressor'] },
  starter: { requestsPerMinute: 300, creditsPerMonth: 25_000, concurrentStreams: 10, services: ['noise-suppressor'] },
  scale: { requestsPerMinute: 1_200, creditsPerMonth: 250_000, concurrentStreams: 100, services: ['noise-suppressor'] },
  // Enterprise limits are per workspace (custom_rpm / custom_credits); these apply while unset. Its concurrent
  // streams: STREAMS_ENTERPRISE_MAX (config), applied by the streaming endpoint.
  enterprise: { requestsPerMinute: 1_200, creditsPerMonth: 250_000, concurrentStreams: 1_000, services: ['*'] },
};

/** Limits that apply to a workspace: its plan, with enterprise custom values where set. */
export function limitsFor(workspace: Workspace): PlanLimits {
  const base = PLANS[workspace.plan];
  if (workspace.plan !== 'enterprise') return base;
  return {
    requestsPerMinute: workspace.customRequestsPerMinute ?? base.requestsPerMinute,
    creditsPerMonth: workspace.customCreditsPerMonth ?? base.creditsPerMonth,
    concurrentStreams: base.concurrentStreams,
    services: base.services,
  };
}

/** Whether the workspace's plan includes the service and the workspace has not excluded it. */
export function planAllowsService(workspace: Workspace, service: string): boolean {
  const limits = limitsFor(workspace);
  const included = limits.services.includes('*') || limits.services.includes(service);
  return included && !(workspace.excludedServices ?? []).includes(service);
}
