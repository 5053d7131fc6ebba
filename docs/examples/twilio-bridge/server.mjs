#!/usr/bin/env node
// The bridge as a program (see bridge.mjs and README.md):
//
//   NSM_URL=http://localhost:8080 NSM_TOKEN=mw_live_... AGENT_URL=ws://agent.internal:9000/media \
//     PORT=8765 node server.mjs
//
// Optional: NSM_MODEL (nsm-2), NSM_STREAM_ENCODING (mulaw; pcm_s16le for a server without μ-law streams), HOST (127.0.0.1),
// BRIDGE_PATH (/twilio). Twilio reaches it through a TLS proxy as wss://your-host/twilio (<Connect><Stream url=...>).
import { startBridge } from './bridge.mjs';

const env = process.env;
for (const name of ['NSM_TOKEN', 'AGENT_URL']) {
  if (!env[name]) {
    console.error(`${name} is not set (see README.md)`);
    process.exit(2);
  }
}
const bridge = await startBridge({
  nsmUrl: env.NSM_URL ?? 'http://localhost:8080',
  token: env.NSM_TOKEN,
  agentUrl: env.AGENT_URL,
  model: env.NSM_MODEL ?? 'nsm-2',
  encoding: env.NSM_STREAM_ENCODING ?? 'mulaw',
  host: env.HOST ?? '127.0.0.1',
  port: Number(env.PORT ?? 8765),
  path: env.BRIDGE_PATH ?? '/twilio',
});
console.log(`twilio bridge listening on ${bridge.url}`);
for (const signal of ['SIGINT', 'SIGTERM']) process.once(signal, () => bridge.close().then(() => process.exit(0)));
