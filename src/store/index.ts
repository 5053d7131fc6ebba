// Persistence: the two stores, each one contract over the toolkit in src/db (dialect, migrations, engines):
//   gateway/   GatewayStore: workspaces, keys, credits and holds, the request log, settings (DATA_DIR/gateway.db or
//              PostgreSQL), its upkeep (maintenance.ts) and the move of a single box to PostgreSQL
//   jobs/      JobStore: jobs, webhook secrets, webhook deliveries (DATA_DIR/jobs.db or PostgreSQL)
// Short-lived shared state (rate-limit windows, console sessions) is src/shared-state, not here.
export { describeStore, migrateStore, openStore, type GatewayStore, type StoreConfig } from './gateway';
export { openJobStore, type JobStoreConfig } from './jobs';
