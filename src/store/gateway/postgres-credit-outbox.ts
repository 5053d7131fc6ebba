// Credits across the job queue on the PostgreSQL store (issue 35, item 12): a charge waiting for its job is a row of
// credit_pending (written in the settle's statement, removed once the job exists); a refund is applied once per job
// id (credit_refunds: the insert that wins the key does the refund, in the same statement), so replaying one after a
// crash, or two gateways settling the same job, gives nothing twice.
import type { Pool } from 'pg';
import type { GatewayStore, PendingChargeRecord } from './types';

type CreditOutbox = Pick<GatewayStore, 'confirmCharge' | 'pendingCharges' | 'refundOnce' | 'pruneRefunds'>;

export function postgresCreditOutbox(pool: Pool): CreditOutbox {
  return {
    async confirmCharge(key) {
      await pool.query('DELETE FROM credit_pending WHERE key = $1', [key]);
    },
    async pendingCharges(limit) {
      const { rows } = await pool.query<Record<string, string>>('SELECT * FROM credit_pending ORDER BY created_at LIMIT $1', [
        Math.max(1, Math.trunc(limit)),
      ]);
      return rows.map(
        (r): PendingChargeRecord => ({
          key: r.key,
          owner: r.owner,
          workspaceId: r.workspace_id,
          period: r.period,
          amount: Number(r.amount),
          createdAt: Number(r.created_at),
        }),
      );
    },
    async refundOnce(key, workspaceId, amount, period) {
      if (amount <= 0) return false;
      const { rows } = await pool.query<{ applied: string }>(
        `WITH ins AS (
           INSERT INTO credit_refunds (key, workspace_id, period, amount, refunded_at) VALUES ($1, $2, $3, $4, $5)
           ON CONFLICT (key) DO NOTHING RETURNING amount
         ), upd AS (
           UPDATE credit_usage SET used = GREATEST(used - $4, 0)
           WHERE workspace_id = $2 AND period = $3 AND EXISTS (SELECT 1 FROM ins) RETURNING 1
         ), gone AS (
           DELETE FROM credit_pending WHERE key = $1 RETURNING 1
         )
         SELECT COUNT(*) AS applied FROM ins`,
        [key, workspaceId, period, amount, Date.now()],
      );
      return Number(rows[0].applied) === 1;
    },
    async pruneRefunds(before) {
      const r = await pool.query('DELETE FROM credit_refunds WHERE refunded_at < $1', [before.getTime()]);
      return r.rowCount ?? 0;
    },
  };
}
