// Driver of test/e2e/clients-typescript.test.ts: a job result downloaded through a proxy that cuts the first answer
// mid-body; nsm-client resumes with Range. URL is the proxy, JOB_ID a succeeded job.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import { NsmClient } from 'nsm-client';

const { URL: BASE, TOKEN, JOB_ID, OUT_FILE } = process.env;
const client = new NsmClient(BASE, TOKEN);
const progress = [];
const toFile = await client.jobs.download(JOB_ID, { to: OUT_FILE, onProgress: (n, total) => progress.push([n, total]) });
const inMemory = await client.jobs.download(JOB_ID);
console.log(JSON.stringify({
  file: { bytes: toFile.bytes, resumes: toFile.resumes, sha: createHash('sha256').update(fs.readFileSync(OUT_FILE)).digest('hex'), filename: toFile.filename },
  memory: { bytes: inMemory.bytes, resumes: inMemory.resumes, sha: createHash('sha256').update(inMemory.data).digest('hex') },
  lastProgress: progress.at(-1),
}));
