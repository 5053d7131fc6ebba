// The request log of the SQLite store: one row per call, or one row per aggregate key (refusals of one key in one
// minute, counted in `calls`), the console's filtered pages, counts and per-day series that add the rows' calls up,
// and retention pruning in batches.
import type Database from 'better-sqlite3';
import { fillDays, pageOf, seriesStart } from './common';
import { toLogEntry, whereClause, type LogRow } from './sqlite-rows';
import type { GatewayStore } from './types';

type RequestLog = Pick<GatewayStore, 'logRequest' | 'queryRequests' | 'countRequests' | 'pruneRequests' | 'requestsPerDay'>;

export function sqliteRequestLog(db: Database.Database): RequestLog {
  const stmt = {
    // A new row, or, for an aggregate key already present, one more call on that row (its bytes added).
    insert: db.prepare(
      `INSERT INTO request_log (request_id, client_request_id, time, token_id, workspace_id, method, service, endpoint,
         status, error_type, credits_charged, bytes_in, bytes_out, upstream_ms, total_ms, client_ip, error_message,
         calls, aggregate_key)
       VALUES (@requestId, @clientRequestId, @time, @tokenId, @workspaceId, @method, @service, @endpoint,
         @status, @errorType, @creditsCharged, @bytesIn, @bytesOut, @upstreamMs, @totalMs, @clientIp, @errorMessage,
         1, @aggregateKey)
       ON CONFLICT (aggregate_key) DO UPDATE SET calls = calls + 1, bytes_in = bytes_in + excluded.bytes_in,
         bytes_out = bytes_out + excluded.bytes_out, credits_charged = credits_charged + excluded.credits_charged`,
    ),
    prune: db.prepare('DELETE FROM request_log WHERE id IN (SELECT id FROM request_log WHERE time < ? ORDER BY time LIMIT ?)'),
    perDay: db.prepare(
      `SELECT substr(time, 1, 10) AS day, SUM(calls) AS count, SUM(CASE WHEN status >= 400 THEN calls ELSE 0 END) AS errors
       FROM request_log WHERE workspace_id = ? AND time >= ? GROUP BY day`,
    ),
  };
  return {
    async logRequest(entry) {
      stmt.insert.run({
        ...entry,
        clientRequestId: entry.clientRequestId ?? null,
        errorMessage: entry.errorMessage ?? null,
        aggregateKey: entry.aggregateKey ?? null,
      });
    },
    async queryRequests(filter) {
      const { sql, params } = whereClause(filter);
      const { limit, offset } = pageOf(filter);
      const rows = db
        .prepare(`SELECT * FROM request_log ${sql} ORDER BY time DESC, id DESC LIMIT ? OFFSET ?`)
        .all(...params, limit, offset) as LogRow[];
      return rows.map(toLogEntry);
    },
    async countRequests(filter) {
      const { sql, params } = whereClause(filter);
      const row = db.prepare(`SELECT COALESCE(SUM(calls), 0) AS n FROM request_log ${sql}`).get(...params) as { n: number };
      return row.n;
    },
    async pruneRequests(before, maxRows) {
      return stmt.prune.run(before, Math.max(1, Math.trunc(maxRows))).changes;
    },
    async requestsPerDay(workspaceId, days) {
      const { start, n } = seriesStart(days);
      const rows = stmt.perDay.all(workspaceId, start.toISOString()) as Array<{ day: string; count: number; errors: number }>;
      return fillDays(start, n, rows);
    },
  };
}
