// GET /meta: the tables the console's forms are built from (scopes, default scopes, plans) and the playground key's
// name, so the pages hold no copy of them.
import type express from 'express';
import { DEFAULT_KEY_SCOPES } from '../../gateway/routes';
import { PLAN_OPTIONS } from '../plans';
import { CONSOLE_SCOPES } from '../validation';
import { PLAYGROUND_KEY_NAME } from './playground';

export function registerMeta(api: express.Router): void {
  api.get('/meta', (_req, res) => {
    res.json({
      scopes: CONSOLE_SCOPES,
      default_scopes: DEFAULT_KEY_SCOPES,
      plans: PLAN_OPTIONS,
      playground_key_name: PLAYGROUND_KEY_NAME,
    });
  });
}
