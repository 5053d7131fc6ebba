// API keys in the console: the list (newest first), creating one (in a workspace that exists or one made on the
// spot; the clear token is answered once) and revoking one.
import type express from 'express';
import type { GatewayStore, Workspace } from '../../store/gateway/types';
import { handle, sendError } from '../respond';
import { InputError, parseAllowedIps, parseExpiry, parseScopes, requireString, NAME_MAX } from '../validation';
import { tokenView } from './shapes';
import { createWorkspaceFrom } from './workspaces';

export function registerKeyRoutes(api: express.Router, store: GatewayStore): void {
  api.get(
    '/keys',
    handle(async (req, res) => {
      const workspaceId = typeof req.query.workspace === 'string' && req.query.workspace ? req.query.workspace : undefined;
      const workspaces = new Map((await store.listWorkspaces()).map((w) => [w.id, w]));
      const keys = (await store.listTokens(workspaceId))
        .sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0))
        .map((t) => tokenView(t, workspaces));
      res.json({ keys });
    }),
  );

  api.post(
    '/keys',
    handle(async (req, res) => {
      const body = (req.body ?? {}) as Record<string, unknown>;
      const name = requireString(body.name, 'key name', NAME_MAX);
      const scopes = parseScopes(body.scopes);
      const allowedIps = parseAllowedIps(body.allowed_ips);
      const expiresAt = parseExpiry(body.expires_at);
      let ws: Workspace | null;
      if (body.workspace_id) {
        ws = await store.getWorkspace(String(body.workspace_id));
        if (!ws) throw new InputError('no such workspace');
      } else if (body.new_workspace && typeof body.new_workspace === 'object') {
        ws = await createWorkspaceFrom(store, body.new_workspace as Record<string, unknown>);
      } else {
        throw new InputError('pick a workspace or create a new one');
      }
      const { token, record } = await store.createToken({ workspaceId: ws.id, name, scopes, allowedIps, expiresAt });
      const workspaces = new Map([[ws.id, ws]]);
      res.status(201).json({ token, key: tokenView(record, workspaces) });
    }),
  );

  api.post(
    '/keys/:id/revoke',
    handle(async (req, res) => {
      const existing = await store.getToken(String(req.params.id));
      if (!existing) {
        sendError(res, 404, 'not_found', 'no such key');
        return;
      }
      const revoked = (await store.revokeToken(existing.id)) ?? (await store.getToken(existing.id));
      const workspaces = new Map((await store.listWorkspaces()).map((w) => [w.id, w]));
      res.json({ key: revoked ? tokenView(revoked, workspaces) : null });
    }),
  );
}
