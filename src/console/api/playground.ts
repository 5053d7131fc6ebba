// The playground's key: ONE per workspace, scoped to denoise, models and live streams (the Live page asks
// POST /stream/tickets with it). Its row is found through a settings entry (not by name, so a key someone named
// "console playground" by hand is never touched). Its clear token lives only in the sessions that asked for it; a
// session that needs the token and does not hold it gets the same row with a new secret (reissueToken), so signing
// in again does not add a key. It expires with the session and is revoked when the session holding the current
// secret ends (../session.ts).
import type express from 'express';
import type { PlaygroundKey, SessionStore } from '../../shared-state/sessions';
import { hashToken } from '../../store/gateway/tokens';
import type { GatewayStore, TokenRecord } from '../../store/gateway/types';
import { handle } from '../respond';
import { signedIn } from '../session';
import { InputError } from '../validation';
import { tokenStatus } from './shapes';

/** Name given to the workspace's playground key. */
export const PLAYGROUND_KEY_NAME = 'console playground';
// (sample: the Live page plays it to show echo cancellation.)
export const PLAYGROUND_SCOPES = ['noise-suppressor:denoise', 'noise-suppressor:models', 'noise-suppressor:stream', 'noise-suppressor:sample'];

/** Settings entry naming the id of a workspace's playground key. */
export const playgroundKeySetting = (workspaceId: string): string => `console.playground_key.${workspaceId}`;

/** The key row whose current secret is `key.token`, or null when another session has been given a newer one. */
async function currentRecord(store: GatewayStore, key: PlaygroundKey): Promise<TokenRecord | null> {
  const rec = await store.findTokenByHash(hashToken(key.token));
  return rec !== null && rec.id === key.tokenId ? rec : null;
}

/**
 * Revokes a playground key when its session ends, unless another session has since been given the row with a new
 * secret (that session's token stays valid).
 */
export async function revokePlaygroundKey(store: GatewayStore, key: PlaygroundKey): Promise<void> {
  if (await currentRecord(store, key)) await store.revokeToken(key.tokenId);
}

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
        const rec = await currentRecord(store, held);
        // A key made before the playground's scopes grew (a session kept in Redis across an upgrade) is reissued.
        const scoped = rec !== null && PLAYGROUND_SCOPES.every((sc) => rec.scopes.includes(sc));
        if (rec && scoped && tokenStatus(rec) === 'active') {
          res.json({ token: held.token, key_id: rec.id, prefix: rec.prefix, expires_at: rec.expiresAt });
          return;
        }
        await sessions.setPlaygroundKey(sessionId, ws.id, null);
      }
      const expiresAt = new Date(session.expiresAt).toISOString();
      const setting = playgroundKeySetting(ws.id);
      const pointed = await store.getSetting(setting);
      const existing = pointed ? await store.getToken(pointed) : null;
      let issued = existing && existing.workspaceId === ws.id ? await store.reissueToken(existing.id, { scopes: PLAYGROUND_SCOPES, expiresAt }) : null;
      if (!issued) {
        issued = await store.createToken({ workspaceId: ws.id, name: PLAYGROUND_KEY_NAME, scopes: PLAYGROUND_SCOPES, allowedIps: [], expiresAt });
        await store.setSetting(setting, issued.record.id);
      }
      const { token, record } = issued;
      await sessions.setPlaygroundKey(sessionId, ws.id, { tokenId: record.id, token });
      res.json({ token, key_id: record.id, prefix: record.prefix, expires_at: record.expiresAt });
    }),
  );
}
