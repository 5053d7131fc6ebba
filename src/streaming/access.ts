// A stream's key, checked again while the stream runs (a stream may last hours; the gateway's policies ran once, at
// the upgrade). The session calls this every renewal period (CREDIT_RESERVATION_TTL_MS / 3): the key must still be
// known, not revoked and not expired (else close 4401), its workspace must exist and its plan still include the
// service, its scopes the stream's scope and its IP list the client's address (else 4403). Same messages as the
// policies' refusals before the upgrade.
import { planAllowsService } from '../gateway/plans';
import { scopesAllow } from '../gateway/routes';
import type { EndpointSpec } from '../gateway/types';
import { ipAllowed } from '../http/ip';
import type { GatewayStore } from '../store/gateway/types';
import { CLOSE, StreamFault } from '../live-protocol/close';

/** Resolves with the fault that ends the stream now, or null while it may go on. */
export type AccessCheck = () => Promise<StreamFault | null>;

export function accessCheck(
  store: Pick<GatewayStore, 'getToken' | 'getWorkspace'>,
  call: { tokenId: string; clientIp: string; route: EndpointSpec },
  now: () => number,
): AccessCheck {
  const key = (type: string, message: string): StreamFault => new StreamFault(type, `${message} The stream ends here.`, CLOSE.keyRefused);
  const forbidden = (type: string, message: string): StreamFault => new StreamFault(type, `${message} The stream ends here.`, CLOSE.forbidden);
  return async () => {
    const token = await store.getToken(call.tokenId);
    const workspace = token ? await store.getWorkspace(token.workspaceId) : null;
    if (!token || !workspace) return key('invalid_token', 'The access token is not recognised any more.');
    if (token.revokedAt) return key('key_revoked', 'This access token has been revoked.');
    if (token.expiresAt && Date.parse(token.expiresAt) <= now()) return key('key_expired', `This access token expired at ${token.expiresAt}.`);
    if (!ipAllowed(call.clientIp, token.allowedIps)) return forbidden('ip_not_allowed', `This access token may not be used from ${call.clientIp}.`);
    if (!scopesAllow(token.scopes, call.route)) return forbidden('scope_denied', `This access token lacks the scope "${call.route.scope}".`);
    if (!planAllowsService(workspace, call.route.service)) {
      return forbidden('plan_forbids_service', `The ${workspace.plan} plan of this workspace does not include "${call.route.service}".`);
    }
    return null;
  };
}
