// Driver of test/clients-typescript.test.ts: every HTTP operation of nsm-client against the real server, from an
// installed package (`import 'nsm-client'`). Prints one JSON report as its last line.
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';
import { NsmClient, NsmError, InvalidRequestError, AuthenticationError, NotFoundError, GoneError } from 'nsm-client';

const { URL: BASE, TOKEN, FIXTURE, OUT } = process.env;
const sha = (b) => createHash('sha256').update(b).digest('hex');
const client = new NsmClient(BASE, TOKEN);
const report = {};
const caught = async (fn) => {
  try {
    await fn();
    return null;
  } catch (e) {
    return { class: e.constructor.name, isNsmError: e instanceof NsmError, type: e.type, status: e.status, request_id: e.request_id, message: e.message };
  }
};

const models = await client.models();
report.models = { default: models.default, ids: models.models.map((m) => m.id) };
report.sample = { bytes: (await client.sample()).length };
report.health = { status: (await client.health()).status };

const one = await client.denoise(FIXTURE, { model: 'nsm-1', output_format: 'flac', keep_input_sample_rate: false });
report.denoise = { bytes: one.audio.length, magic: new TextDecoder().decode(one.audio.subarray(0, 4)), filename: one.filename, contentType: one.contentType, stats: one.stats, requestId: one.requestId, rateLimit: one.rateLimit };
const wav = await client.denoise({ data: fs.readFileSync(FIXTURE), filename: 'from-bytes.wav' }, { model: 'nsm-1' });
fs.writeFileSync(path.join(OUT, 'ts-denoise.wav'), wav.audio);
report.denoiseBytes = { filename: wav.filename, sha: sha(wav.audio), model: wav.stats.model };

const zip = await client.denoiseBatch([FIXTURE, { data: fs.readFileSync(FIXTURE), filename: 'second.wav' }], { model: 'nsm-1' });
fs.writeFileSync(path.join(OUT, 'ts-batch.zip'), zip.zip);
report.batchZip = { bytes: zip.zip.length, summary: zip.summary };
const manifest = await client.denoiseBatch([FIXTURE, new Blob([new Uint8Array([1, 2, 3])])], { model: 'nsm-1', response: 'json' });
report.batchJson = {
  succeeded: manifest.manifest.succeeded,
  failed: manifest.manifest.failed,
  statuses: manifest.manifest.items.map((i) => i.status),
  audioSha: sha(Buffer.from(manifest.manifest.items[0].audio_base64, 'base64')),
  summary: manifest.summary,
};

report.errors = {
  badModel: await caught(() => client.denoise(FIXTURE, { model: 'nsm-9' })),
  badToken: await caught(() => new NsmClient(BASE, 'mw_live_' + 'x'.repeat(32)).models()),
  noJob: await caught(() => client.jobs.get('job_doesnotexist000000000000')),
};
report.errorClasses = {
  badModel: (await caught(() => client.denoise(FIXTURE, { model: 'nsm-9' })))?.class === InvalidRequestError.name,
  auth: AuthenticationError.name,
  notFound: NotFoundError.name,
};

const progress = [];
const job = await client.jobs.submit(FIXTURE, { model: 'nsm-1' });
const finished = await client.jobs.wait(job.id, { intervalMs: 250, onProgress: (j) => progress.push(j.status) });
const toFile = path.join(OUT, 'ts-job.wav');
const dl = await client.jobs.download(job.id, { to: toFile });
const inMemory = await client.jobs.download(job.id);
const page = await client.jobs.list({ limit: 1 });
const all = [];
for await (const j of client.jobs.listAll({ limit: 1 })) all.push(j.id);
const deleted = await client.jobs.cancel(job.id);
report.jobs = {
  submitted: { id: job.id, status: job.status },
  finished: { status: finished.status, bytes: finished.result?.bytes },
  progress,
  download: { bytes: dl.bytes, resumes: dl.resumes, filename: dl.filename, fileSha: sha(fs.readFileSync(toFile)), memorySha: sha(inMemory.data) },
  list: { count: page.jobs.length, has_more: page.has_more, first: page.jobs[0]?.id },
  listAll: all,
  deleted: { status: deleted.status, result_deleted_at: deleted.result_deleted_at !== null },
  afterDelete: await caught(() => client.jobs.download(job.id)),
  goneClass: GoneError.name,
};
const running = await client.jobs.submit({ url: process.env.STALL_URL }, { model: 'nsm-1' });
const canceled = await client.jobs.cancel(running.id);
report.jobs.cancel = { status: canceled.status, source: running.input.source };
report.jobs.notFinished = await caught(() => client.jobs.download(running.id));

// The echo reference option (the fixture as its own far end: every sample of it is echo).
const echoed = await client.denoise(FIXTURE, { model: 'nsm-1', echoReference: { data: fs.readFileSync(FIXTURE), filename: 'far.wav' } });
const echoJob = await client.jobs.submit(FIXTURE, { model: 'nsm-1', echoReference: FIXTURE });
const echoDone = await client.jobs.wait(echoJob.id, { intervalMs: 250 });
report.echo = {
  denoise: { reference: echoed.stats.echo_reference, active: echoed.stats.echo_reference_active, bytes: echoed.audio.length },
  job: { reference: echoJob.input.echo_reference, status: echoDone.status, active: echoDone.stats?.echo_reference_active },
};

const ticket = await client.streams.ticket();
report.ticket = { prefix: ticket.ticket.slice(0, 3), ttl_s: ticket.ttl_s };
console.log(JSON.stringify(report));
