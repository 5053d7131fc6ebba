// Policy 6 of 11, plan: the workspace's plan must include the route's service and the workspace must not have
// excluded it (plans.ts), else 403 plan_forbids_service. Runs after scope, before rate-limit.
import { reject, type AuthenticatedCall, type Policy } from '../call';
import { planAllowsService } from '../plans';

export function planPolicy(): Policy<AuthenticatedCall> {
  return {
    name: 'plan',
    run(call) {
      if (planAllowsService(call.workspace, call.route.service)) return 'continue';
      return reject(call, 'plan_forbids_service', `The ${call.workspace.plan} plan of this workspace does not include "${call.route.service}".`);
    },
  };
}
