// Credits across the job queue (issue 35, item 12): gateway.db and jobs.db are two databases, so a job's charge and
// refund cannot share a transaction with the job. A charge waiting for its job is a row of credit_pending (written in
// the settle's transaction, removed once the job exists); a refund is applied once per job id (credit_refunds: the
// insert that wins the key does the refund, in the same transaction), so replaying one after a crash, or two gateways
// settling the same job, gives nothing twice.
import type { Sql, SqlDatabase } from '../../db/dialect';
import type { GatewayStore, PendingCharge, PendingChargeRecord } from './types';

type CreditOutbox = Pick<GatewayStore, 'confirmCharge' | 'pendingCharges' | 'refundOnce' | 'pruneRefunds'>;

/** Records a pending charge (the key's latest settle wins); run inside the settle's transaction. */
export async function writePendingCharge(tx: Sql, p: PendingCharge, workspaceId: string, period: string, amount: number): Promise<void> {
  await tx.run(
    `INSERT INTO credit_pending (key, workspace_id, period, amount, owner, created_at)
     VALUES (@key, @workspaceId, @period, @amount, @owner, @createdAt)
     ON CONFLICT (key) DO UPDATE SET workspace_id = excluded.workspace_id, period = excluded.period,
       amount = excluded.amount, owner = excluded.owner, created_at = excluded.created_at`,
    { key: p.key, workspaceId, period, amount, owner: p.owner, createdAt: Date.now() },
  );
}

export function creditOutbox(db: SqlDatabase): CreditOutbox {
  const d = db.dialect;
  return {
    async confirmCharge(key) {
      await db.run('DELETE FROM credit_pending WHERE key = @key', { key });
    },
    async pendingCharges(limit) {
      const rows = await db.all('SELECT * FROM credit_pending ORDER BY created_at LIMIT @limit', { limit: Math.max(1, Math.trunc(limit)) });
      return rows.map(
        (r): PendingChargeRecord => ({
          key: String(r.key),
          owner: String(r.owner),
          workspaceId: String(r.workspace_id),
          period: String(r.period),
          amount: Number(r.amount),
          createdAt: Number(r.created_at),
        }),
      );
    },
    async refundOnce(key, workspaceId, amount, period) {
      if (amount <= 0) return false;
      return db.transaction(async (tx) => {
        const fresh =
          (await tx.run(
            `INSERT INTO credit_refunds (key, workspace_id, period, amount, refunded_at)
             VALUES (@key, @workspaceId, @period, @amount, @now) ON CONFLICT (key) DO NOTHING`,
            { key, workspaceId, period, amount, now: Date.now() },
          )) === 1;
        if (fresh) {
          await tx.run(`UPDATE credit_usage SET used = ${d.greatest('used - @amount', '0')} WHERE workspace_id = @workspaceId AND period = @period`, {
            amount,
            workspaceId,
            period,
          });
        }
        await tx.run('DELETE FROM credit_pending WHERE key = @key', { key });
        return fresh;
      });
    },
    async pruneRefunds(before) {
      return db.run('DELETE FROM credit_refunds WHERE refunded_at < @before', { before: before.getTime() });
    },
  };
}
