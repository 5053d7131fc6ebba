// Policy 5 of 11, scope: the token's scopes must grant the route's scope ('*', '{service}:*' or the exact one),
// else 403 scope_denied. Runs after ip-allow-list, before plan.
import { reject, type AuthenticatedCall, type Policy } from '../call';
import { scopesAllow } from '../routes';

export function scopePolicy(): Policy<AuthenticatedCall> {
  return {
    name: 'scope',
    run(call) {
      if (scopesAllow(call.token.scopes, call.route)) return 'continue';
      return reject(call, 'scope_denied', `This access token lacks the scope "${call.route.scope}".`);
    },
  };
}
