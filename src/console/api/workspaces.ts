// Workspaces in the console: the list with this month's credits, creating one, changing its plan (enterprise with
// custom limits) and its requests per day. createWorkspaceFrom is shared with key creation ("new workspace").
import type express from 'express';
import type { GatewayStore, Workspace } from '../../store/gateway/types';
import { handle, sendError } from '../respond';
import { InputError, optionalCustomLimit, parsePlan, requireString, NAME_MAX } from '../validation';
import { workspaceView } from './shapes';

/** Checks a new workspace's fields (name unique, plan, enterprise limits) and creates it. */
export async function createWorkspaceFrom(store: GatewayStore, body: Record<string, unknown>): Promise<Workspace> {
  const name = requireString(body.name, 'workspace name', NAME_MAX);
  if (await store.getWorkspaceByName(name)) throw new InputError(`a workspace named "${name}" already exists`);
  const plan = parsePlan(body.plan);
  const custom = {
    requestsPerMinute: optionalCustomLimit(body.requests_per_minute, 'requests_per_minute'),
    creditsPerMonth: optionalCustomLimit(body.credits_per_month, 'credits_per_month'),
  };
  return await store.createWorkspace(name, plan, plan === 'enterprise' ? custom : undefined);
}

export function registerWorkspaceRoutes(api: express.Router, store: GatewayStore): void {
  api.get(
    '/workspaces',
    handle(async (_req, res) => {
      const now = new Date();
      const workspaces = await store.listWorkspaces();
      res.json({ workspaces: await Promise.all(workspaces.map((ws) => workspaceView(store, ws, now))) });
    }),
  );

  api.post(
    '/workspaces',
    handle(async (req, res) => {
      const ws = await createWorkspaceFrom(store, req.body ?? {});
      res.status(201).json({ workspace: await workspaceView(store, ws, new Date()) });
    }),
  );

  api.post(
    '/workspaces/:id/plan',
    handle(async (req, res) => {
      const ws = await store.getWorkspace(String(req.params.id));
      if (!ws) {
        sendError(res, 404, 'not_found', 'no such workspace');
        return;
      }
      const plan = parsePlan(req.body?.plan);
      const custom = {
        requestsPerMinute: optionalCustomLimit(req.body?.requests_per_minute, 'requests_per_minute'),
        creditsPerMonth: optionalCustomLimit(req.body?.credits_per_month, 'credits_per_month'),
      };
      const updated = await store.setPlan(ws.id, plan, plan === 'enterprise' ? custom : undefined);
      res.json({ workspace: await workspaceView(store, updated, new Date()) });
    }),
  );

  api.get(
    '/workspaces/:id/usage',
    handle(async (req, res) => {
      const ws = await store.getWorkspace(String(req.params.id));
      if (!ws) {
        sendError(res, 404, 'not_found', 'no such workspace');
        return;
      }
      const days = Math.min(90, Math.max(1, Number(req.query.days) || 30));
      res.json({
        workspace: await workspaceView(store, ws, new Date()),
        days: await store.requestsPerDay(ws.id, days),
      });
    }),
  );
}
