// Credits across the job queue on the SQLite store (issue 35, item 12): gateway.db and jobs.db are two databases, so
// a job's charge and refund cannot share a transaction with the job. A charge waiting for its job is a row of
// credit_pending (written with the settle, removed once the job exists); a refund is applied once per job id
// (credit_refunds), so replaying one after a crash gives nothing twice.
import type Database from 'better-sqlite3';
import type { GatewayStore, PendingCharge, PendingChargeRecord } from './types';

type CreditOutbox = Pick<GatewayStore, 'confirmCharge' | 'pendingCharges' | 'refundOnce' | 'pruneRefunds'>;

/** Records a pending charge; called inside the settle's transaction. */
export function pendingChargeWriter(db: Database.Database): (p: PendingCharge, workspaceId: string, period: string, amount: number) => void {
  const insert = db.prepare(
    'INSERT OR REPLACE INTO credit_pending (key, workspace_id, period, amount, owner, created_at) VALUES (?, ?, ?, ?, ?, ?)',
  );
  return (p, workspaceId, period, amount) => void insert.run(p.key, workspaceId, period, amount, p.owner, Date.now());
}

export function sqliteCreditOutbox(db: Database.Database): CreditOutbox {
  const stmt = {
    confirm: db.prepare('DELETE FROM credit_pending WHERE key = ?'),
    pending: db.prepare('SELECT * FROM credit_pending ORDER BY created_at LIMIT ?'),
    record: db.prepare('INSERT INTO credit_refunds (key, workspace_id, period, amount, refunded_at) VALUES (?, ?, ?, ?, ?) ON CONFLICT (key) DO NOTHING'),
    refund: db.prepare('UPDATE credit_usage SET used = MAX(used - ?, 0) WHERE workspace_id = ? AND period = ?'),
    prune: db.prepare('DELETE FROM credit_refunds WHERE refunded_at < ?'),
  };
  const refundTx = db.transaction((key: string, workspaceId: string, amount: number, period: string): boolean => {
    const fresh = stmt.record.run(key, workspaceId, period, amount, Date.now()).changes === 1;
    if (fresh) stmt.refund.run(amount, workspaceId, period);
    stmt.confirm.run(key);
    return fresh;
  });
  return {
    async confirmCharge(key) {
      stmt.confirm.run(key);
    },
    async pendingCharges(limit) {
      const rows = stmt.pending.all(Math.max(1, Math.trunc(limit))) as Array<Record<string, string | number>>;
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
      return refundTx.immediate(key, workspaceId, amount, period);
    },
    async pruneRefunds(before) {
      return stmt.prune.run(before.getTime()).changes;
    },
  };
}
