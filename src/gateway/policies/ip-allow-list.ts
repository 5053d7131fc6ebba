// Policy 4 of 11, ip-allow-list: a token with allowed IPs or CIDR ranges may be used only from those client
// addresses (403 ip_not_allowed); an empty list allows any. The client address is the one TRUST_PROXY resolves.
// Runs after authentication, before scope.
import { ipAllowed } from '../../http/ip';
import { reject, type AuthenticatedCall, type Policy } from '../call';

export function ipAllowListPolicy(): Policy<AuthenticatedCall> {
  return {
    name: 'ip-allow-list',
    run(call) {
      if (ipAllowed(call.ctx.clientIp, call.token.allowedIps)) return 'continue';
      return reject(call, 'ip_not_allowed', `This access token may not be used from ${call.ctx.clientIp}.`);
    },
  };
}
