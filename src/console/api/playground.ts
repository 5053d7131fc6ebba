// The playground's key: one per session and workspace, scoped to denoise, models and live streams (the Live page asks
// POST /stream/tickets with it). Its clear token lives only in the session (shared state); it expires with the session
// and is revoked when the session ends (../session.ts).
import type express from 'express';
import type { SessionStore } from '../../shared-state/sessions';
import type { GatewayStore } from '../../store/types';
import { handle } from '../respond';
import { signedIn } from '../session';
import { InputError } from '../validation';
import { tokenStatus } from './shapes';

/** Name given to the per-session keys the playground uses. */
export const PLAYGROUND_KEY_NAME = 'console playground';
export const PLAYGROUND_SCOPES = ['noise-suppressor:denoise', 'noise-suppressor:models', 'noise-suppressor:stream'];

export function registerPlaygroundRoutes(api: express.Router, deps: { store: GatewayStore; sessions: SessionStore }): void {
  const { store, sessions } = deps;
  api.post(
    '/playground/key',
    handle(async (req, res) => {
      const { sessionId, session } = signedIn(res);
      const ws = await store.getWorkspace(String(req.body?.workspace_id ?? ''));
      if (!ws) throw new InputError('pick a workspace');
      const held = session.playgroundKeys.get(ws.id);
      if (held) {
        const rec = await store.getToken(held.tokenId);
        // A key made before the playground's scopes grew (a session kept in Redis across an upgrade) is replaced.
        const scoped = rec !== null && PLAYGROUND_SCOPES.every((sc) => rec.scopes.includes(sc));
        if (rec && scoped && tokenStatus(rec) === 'active') {
          res.json({ token: held.token, key_id: rec.id, prefix: rec.prefix, expires_at: rec.expiresAt });
          return;
        }
        if (rec && !scoped && tokenStatus(rec) === 'active') await store.revokeToken(rec.id);
        await sessions.setPlaygroundKey(sessionId, ws.id, null);
      }
      const { token, record } = await store.createToken({
        workspaceId: ws.id,
        name: PLAYGROUND_KEY_NAME,
        scopes: PLAYGROUND_SCOPES,
        allowedIps: [],
        expiresAt: new Date(session.expiresAt).toISOString(),
      });
      await sessions.setPlaygroundKey(sessionId, ws.id, { tokenId: record.id, token });
      res.json({ token, key_id: record.id, prefix: record.prefix, expires_at: record.expiresAt });
    }),
  );
}
