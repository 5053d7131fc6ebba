// The console's request log: GET /requests, filtered by workspace, key, status, error type and endpoint, a page at
// a time (newest first), each row with the key's prefix and name.
import type express from 'express';
import type { GatewayStore } from '../../store/gateway/types';
import { handle } from '../respond';
import { InputError, optionalOffset } from '../validation';
import { requestView } from './shapes';

export function registerRequestLogRoutes(api: express.Router, store: GatewayStore): void {
  api.get(
    '/requests',
    handle(async (req, res) => {
      const q = req.query as Record<string, unknown>;
      const str = (v: unknown) => (typeof v === 'string' && v.trim() ? v.trim() : undefined);
      const statusText = str(q.status);
      let status: number | undefined;
      if (statusText !== undefined) {
        status = Number(statusText);
        if (!Number.isInteger(status) || status < 100 || status > 599) throw new InputError('status must be an HTTP status code');
      }
      const limit = Math.min(200, Math.max(1, Number(q.limit) || 50));
      const offset = optionalOffset(q.offset);
      const workspaceId = str(q.workspace);
      // One row more than asked tells the page whether a next page exists.
      const rows = await store.queryRequests({
        workspaceId,
        tokenId: str(q.key),
        status,
        errorType: str(q.error_type),
        endpoint: str(q.endpoint),
        limit: limit + 1,
        offset,
      });
      const tokens = new Map((await store.listTokens(workspaceId)).map((t) => [t.id, t]));
      res.json({
        requests: rows.slice(0, limit).map((e) => requestView(e, tokens)),
        has_more: rows.length > limit,
        limit,
        offset,
      });
    }),
  );
}
