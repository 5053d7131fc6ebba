// Quality benchmark: every model (and any experimental chain) on the shared evaluation kit.
//   npm run bench -- --quality [--json [FILE]] [options]        (or node dist/scripts/bench/quality.js [options])
// Real recordings (dns3-real + dns-real-extra, 29 clips) and noisy/clean pairs (dns3-synthetic + pairs, 15): mean
// DNSMOS P.835 SIG/BAK/OVRL with 95 % bootstrap CIs, SI-SDR on the pairs; for each step of the model ladder the paired
// OVRL difference (same clips) with its CI and the share of clips the higher model wins, on all real clips and on the
// tune / held-out halves; peers' published outputs scored beside ours on exactly the clips where they exist; the
// full-band figures of every model on fullband/ (scripts/bench/fullband.ts).
// Options:
//   --models nsm-1,nsm-2        which models (default nsm-1..nsm-4; "none" for only the --system chains)
//   --system NAME=SPEC          an experimental 16 kHz chain (scripts/lib/chain-dsl.ts), repeatable
//   --compare A:B               also print the paired difference B - A, repeatable
//   --split tune|holdout|all    real clips to score (default all); pairs are always scored unless --no-pairs
//   --no-pairs, --no-peers, --no-fullband, --fullband-only
//   --float                     score the chains' float output (default: as the API's default 16-bit WAV delivers it)
//   --rtf                       also time each system in this thread (60 s of the real clips in 1 s chunks, median of
//                               3; the engine's figure, with worker messaging, is `npm run bench`'s speed table)
// DNSMOS scores are cached by content (scripts/lib/metrics.ts), so a rerun only scores outputs that changed.
import fs from 'node:fs';
import os from 'node:os';
import { loadConfig } from '../../src/config';
import { buildChain } from '../../src/inference/models/chains';
import { MODEL_CHAINS, type ChainSpec } from '../../src/inference/models/specs';
import { DtlnGraphs } from '../../src/inference/models/dtln';
import { denoiseBuffer } from '../../src/inference/models/offline';
import { loadGraphs } from '../../src/inference/runtime/sessions';
import { concatAll } from '../../src/dsp/concat';
import { AlignedStream } from '../../src/inference/models/aligned-stream';
import type { ModelId } from '../../src/inference/types';
import { asInt16, decodeAudio } from '../lib/audio-io';
import { parseChainSpec } from '../lib/chain-dsl';
import { listClips, type Clip } from '../lib/eval-kit';
import { dnsmosCached, dnsmosCacheStats, evalDir, siSdr } from '../lib/metrics';
import { bootstrapMean, mean, pairedDiff, type MeanCi, type PairedDiff } from '../lib/stats';
import { fullBandAll, printFullBand } from './fullband';

export const LADDER: ModelId[] = ['nsm-1', 'nsm-2', 'nsm-3', 'nsm-4'];

export interface SystemDef {
  name: string;
  /** A model id, 'unprocessed', or a chain description. */
  model?: ModelId | 'unprocessed';
  spec?: ChainSpec;
  specText?: string;
}

interface ClipScore {
  SIG: number;
  BAK: number;
  OVRL: number;
  si_sdr_db?: number;
}

type Group = 'real' | 'tune' | 'holdout' | 'pairs';
const GROUPS: Group[] = ['real', 'tune', 'holdout', 'pairs'];

interface SystemResult {
  name: string;
  spec?: string;
  clips: Record<string, ClipScore>;
  summary: Partial<Record<Group, { SIG: MeanCi; BAK: MeanCi; OVRL: MeanCi; si_sdr_db?: MeanCi }>>;
}

interface StepResult {
  from: string;
  to: string;
  /** Paired OVRL difference (to - from) per group, and SIG on the real clips. */
  ovrl: Partial<Record<Group, PairedDiff>>;
  sig_real?: PairedDiff;
  si_sdr_pairs?: PairedDiff;
}

interface PeerRow {
  peer: string;
  group: 'real' | 'pairs';
  clips: string[];
  peer_scores: { SIG: number; BAK: number; OVRL: number; si_sdr_db?: number };
  /** Our systems' mean OVRL on exactly these clips. */
  ours_ovrl: Record<string, number>;
  ours_si_sdr_db?: Record<string, number>;
}

export interface QualityReport {
  date: string;
  machine: { cpus: number; cpu: string | undefined; node: string };
  clips: { real: number; tune: number; holdout: number; pairs: number };
  systems: SystemResult[];
  steps: StepResult[];
  peers: PeerRow[];
  targets?: { check: string; ok: boolean; detail: string }[];
  fullband?: unknown;
  rtf_in_thread?: Record<string, number>;
  dnsmos_cache: { hits: number; misses: number };
}

async function runSpec(graphs: DtlnGraphs, spec: ChainSpec, x: Float32Array): Promise<Float32Array> {
  const s = new AlignedStream(buildChain(spec, 1, graphs), 0);
  return concatAll([(await s.push([x.slice()]))[0], (await s.end())[0]]);
}

/** In-thread real-time factor of a chain on `x` in 1 s chunks: median of 3 timed runs after a warm-up. */
export async function chainRtf(graphs: DtlnGraphs, spec: ChainSpec, x: Float32Array): Promise<number> {
  const once = async () => {
    const s = new AlignedStream(buildChain(spec, 1, graphs), 0);
    const t0 = process.hrtime.bigint();
    for (let pos = 0; pos < x.length; pos += 16000) await s.push([x.slice(pos, pos + 16000)]);
    await s.end();
    return Number(process.hrtime.bigint() - t0) / 1e9 / (x.length / 16000);
  };
  await once();
  const runs = [await once(), await once(), await once()].sort((a, b) => a - b);
  return runs[1];
}

function groupOf(c: Clip): Group[] {
  return c.kind === 'pair' ? ['pairs'] : ['real', c.split as Group];
}

export async function runQuality(argv: string[]): Promise<QualityReport | null> {
  const dir = evalDir();
  if (!dir) {
    console.log('NOTE: ../shared/eval is missing: quality figures are skipped.');
    return null;
  }
  const opt = (name: string) => {
    const i = argv.indexOf(name);
    return i >= 0 && argv[i + 1] && !argv[i + 1].startsWith('--') ? argv[i + 1] : null;
  };
  const all = (name: string) => argv.flatMap((a, i) => (a === name && argv[i + 1] ? [argv[i + 1]] : []));
  const modelsArg = opt('--models');
  const systems: SystemDef[] = [{ name: 'unprocessed', model: 'unprocessed' }];
  const models = modelsArg === 'none' ? [] : modelsArg ? (modelsArg.split(',') as ModelId[]) : LADDER;
  for (const m of models) {
    if (!LADDER.includes(m)) throw new Error(`--models takes 16 kHz models (${LADDER.join(', ')}); nsm-2-hd is measured in the full-band part`);
    systems.push({ name: m, model: m });
  }
  for (const s of all('--system')) {
    const eq = s.indexOf('=');
    if (eq <= 0) throw new Error(`--system takes NAME=SPEC, got "${s}"`);
    systems.push({ name: s.slice(0, eq), spec: parseChainSpec(s.slice(eq + 1)), specText: s.slice(eq + 1) });
  }
  const split = opt('--split') ?? 'all';
  const withPairs = !argv.includes('--no-pairs');
  const withPeers = !argv.includes('--no-peers');
  const fullbandOnly = argv.includes('--fullband-only');
  const withFullband = !argv.includes('--no-fullband') && (fullbandOnly || !modelsArg || modelsArg !== 'none');

  const config = loadConfig();
  const graphs = await loadGraphs(config.modelsDir);
  const kit = listClips(dir);
  const real = kit.real.filter((c) => split === 'all' || c.split === split);
  const clips = [...real, ...(withPairs ? kit.pairs : [])];
  const report: QualityReport = {
    date: new Date().toISOString(),
    machine: { cpus: os.cpus().length, cpu: os.cpus()[0]?.model, node: process.version },
    clips: {
      real: real.length,
      tune: real.filter((c) => c.split === 'tune').length,
      holdout: real.filter((c) => c.split === 'holdout').length,
      pairs: withPairs ? kit.pairs.length : 0,
    },
    systems: [],
    steps: [],
    peers: [],
    dnsmos_cache: dnsmosCacheStats,
  };

  const floatOutputs = argv.includes('--float');
  if (!fullbandOnly) {
    const audio = new Map<string, { x: Float32Array; clean?: Float32Array }>();
    for (const c of clips) audio.set(c.id, { x: decodeAudio(c.noisy, 16000)[0], clean: c.clean ? decodeAudio(c.clean, 16000)[0] : undefined });
    const t0 = Date.now();
    for (const sys of systems) {
      const res: SystemResult = { name: sys.name, spec: sys.specText, clips: {}, summary: {} };
      for (const c of clips) {
        const { x, clean } = audio.get(c.id)!;
        let y =
          sys.model === 'unprocessed'
            ? x
            : sys.model
              ? (await denoiseBuffer(graphs, sys.model, [x.slice()]))[0]
              : await runSpec(graphs, sys.spec!, x);
        // Scored as the API returns it by default (16-bit WAV: dithered, then rounded by encodeInt16), unless --float.
        if (!floatOutputs && sys.model !== 'unprocessed') y = asInt16(y);
        const s = await dnsmosCached(y);
        res.clips[c.id] = { SIG: s.SIG, BAK: s.BAK, OVRL: s.OVRL, ...(clean ? { si_sdr_db: siSdr(y, clean) } : {}) };
      }
      summarise(res, clips);
      report.systems.push(res);
      process.stderr.write(`  scored ${sys.name} (${((Date.now() - t0) / 1000).toFixed(0)} s so far)\n`);
    }
    if (argv.includes('--rtf')) {
      report.rtf_in_thread = {};
      const speech = concatAll(real.map((c) => audio.get(c.id)!.x)).subarray(0, 60 * 16000);
      for (const sys of systems) {
        if (sys.model === 'unprocessed') continue;
        const spec = sys.spec ?? (sys.model && sys.model !== 'nsm-2-hd' ? MODEL_CHAINS[sys.model as keyof typeof MODEL_CHAINS] : null);
        if (spec) report.rtf_in_thread[sys.name] = await chainRtf(graphs, spec, speech);
      }
    }
    report.steps = steps(report.systems, clips, all('--compare'));
    if (withPeers) report.peers = await peers(report.systems, clips);
    report.targets = targets(report);
    printQuality(report);
  }
  if (withFullband) {
    const fb = await fullBandAll(config, dir, graphs);
    report.fullband = fb;
    printFullBand(fb);
  }
  return report;
}

function summarise(res: SystemResult, clips: Clip[]): void {
  for (const g of GROUPS) {
    const ids = clips.filter((c) => groupOf(c).includes(g)).map((c) => c.id);
    if (ids.length === 0) continue;
    const col = (k: keyof ClipScore) => ids.map((id) => res.clips[id][k] as number);
    res.summary[g] = {
      SIG: bootstrapMean(col('SIG')),
      BAK: bootstrapMean(col('BAK')),
      OVRL: bootstrapMean(col('OVRL')),
      ...(g === 'pairs' ? { si_sdr_db: bootstrapMean(col('si_sdr_db')) } : {}),
    };
  }
}

function steps(systems: SystemResult[], clips: Clip[], compares: string[]): StepResult[] {
  const byName = new Map(systems.map((s) => [s.name, s]));
  const pairs: [string, string][] = [];
  const ladder = LADDER.filter((m) => byName.has(m));
  for (let i = 1; i < ladder.length; i++) pairs.push([ladder[i - 1], ladder[i]]);
  // nsm-2 -> nsm-4 as well: the issue's step-size target is against nsm-2.
  if (ladder.length === LADDER.length) pairs.push(['nsm-2', 'nsm-4']);
  for (const c of compares) {
    const [a, b] = c.split(':');
    if (!byName.has(a) || !byName.has(b)) throw new Error(`--compare ${c}: both systems must be evaluated`);
    pairs.push([a, b]);
  }
  return pairs.map(([a, b]) => {
    const A = byName.get(a)!;
    const B = byName.get(b)!;
    const step: StepResult = { from: a, to: b, ovrl: {} };
    for (const g of GROUPS) {
      const ids = clips.filter((c) => groupOf(c).includes(g)).map((c) => c.id);
      if (ids.length) step.ovrl[g] = pairedDiff(ids.map((id) => A.clips[id].OVRL), ids.map((id) => B.clips[id].OVRL));
    }
    const realIds = clips.filter((c) => c.kind === 'real').map((c) => c.id);
    if (realIds.length) step.sig_real = pairedDiff(realIds.map((id) => A.clips[id].SIG), realIds.map((id) => B.clips[id].SIG));
    const pairIds = clips.filter((c) => c.kind === 'pair').map((c) => c.id);
    if (pairIds.length) {
      step.si_sdr_pairs = pairedDiff(pairIds.map((id) => A.clips[id].si_sdr_db!), pairIds.map((id) => B.clips[id].si_sdr_db!));
    }
    return step;
  });
}

async function peers(systems: SystemResult[], clips: Clip[]): Promise<PeerRow[]> {
  const rows: PeerRow[] = [];
  for (const kind of ['real', 'pairs'] as const) {
    const set = clips.filter((c) => (kind === 'real' ? c.kind === 'real' : c.kind === 'pair'));
    const names = [...new Set(set.flatMap((c) => Object.keys(c.peers)))].sort();
    for (const peer of names) {
      const with_ = set.filter((c) => c.peers[peer]);
      const scores: ClipScore[] = [];
      for (const c of with_) {
        const y = decodeAudio(c.peers[peer], 16000)[0];
        const s = await dnsmosCached(y);
        const clean = c.clean ? decodeAudio(c.clean, 16000)[0] : null;
        scores.push({ SIG: s.SIG, BAK: s.BAK, OVRL: s.OVRL, ...(clean ? { si_sdr_db: siSdr(y, clean) } : {}) });
      }
      const ids = with_.map((c) => c.id);
      const row: PeerRow = {
        peer,
        group: kind,
        clips: ids,
        peer_scores: {
          SIG: mean(scores.map((s) => s.SIG)),
          BAK: mean(scores.map((s) => s.BAK)),
          OVRL: mean(scores.map((s) => s.OVRL)),
          ...(kind === 'pairs' ? { si_sdr_db: mean(scores.map((s) => s.si_sdr_db!)) } : {}),
        },
        ours_ovrl: Object.fromEntries(systems.map((s) => [s.name, mean(ids.map((id) => s.clips[id].OVRL))])),
      };
      if (kind === 'pairs') row.ours_si_sdr_db = Object.fromEntries(systems.map((s) => [s.name, mean(ids.map((id) => s.clips[id].si_sdr_db!))]));
      rows.push(row);
    }
  }
  return rows;
}

/** The issue-8 targets, checked on the figures of this run (only those whose systems were scored). */
function targets(r: QualityReport): { check: string; ok: boolean; detail: string }[] {
  const by = new Map(r.systems.map((s) => [s.name, s]));
  const step = (a: string, b: string) => r.steps.find((s) => s.from === a && s.to === b);
  const out: { check: string; ok: boolean; detail: string }[] = [];
  for (let i = 1; i < LADDER.length; i++) {
    const s = step(LADDER[i - 1], LADDER[i])?.ovrl.real;
    if (!s) continue;
    out.push({
      check: `${LADDER[i]} > ${LADDER[i - 1]} on the real clips: paired CI above 0, won on >= 70 %`,
      ok: s.lo > 0 && s.winShare >= 0.7,
      detail: `${sgn(s.mean)} [${sgn(s.lo)}, ${sgn(s.hi)}], ${pct(s.winShare)}`,
    });
  }
  const ovrl = (m: string) => by.get(m)?.summary.real?.OVRL.mean;
  const sig = (m: string) => by.get(m)?.summary.real?.SIG.mean;
  const sdr = (m: string) => by.get(m)?.summary.pairs?.si_sdr_db?.mean;
  for (const [m, need] of [['nsm-3', 0.08], ['nsm-4', 0.15]] as const) {
    const a = ovrl('nsm-2');
    const b = ovrl(m);
    if (a !== undefined && b !== undefined) out.push({ check: `${m} OVRL >= nsm-2 + ${need}`, ok: b - a >= need, detail: sgn(b - a) });
    const sa = sig('nsm-2');
    const sb = sig(m);
    if (sa !== undefined && sb !== undefined) out.push({ check: `${m} SIG >= nsm-2 SIG - 0.03`, ok: sb >= sa - 0.03, detail: sgn(sb - sa) });
    const da = sdr('nsm-2');
    const dbb = sdr(m);
    if (da !== undefined && dbb !== undefined) out.push({ check: `${m} SI-SDR >= nsm-2 - 0.5 dB`, ok: dbb >= da - 0.5, detail: `${sgn(dbb - da, 2)} dB` });
  }
  return out;
}

const f3 = (v: number) => (Number.isFinite(v) ? v.toFixed(3) : '  -  ');
const sgn = (v: number, d = 3) => (v >= 0 ? '+' : '') + v.toFixed(d);
const pct = (v: number) => `${Math.round(100 * v)} %`;
const ci = (m: MeanCi, d = 3) => `${m.mean.toFixed(d)} [${m.lo.toFixed(d)}, ${m.hi.toFixed(d)}]`;

export function printQuality(r: QualityReport): void {
  const w = Math.max(12, ...r.systems.map((s) => s.name.length + 1));
  const head = (g: Group) =>
    ({
      real: `Real recordings: ${r.clips.real} clips (dns3-real + dns-real-extra)`,
      tune: `  tune half: ${r.clips.tune} clips (dns3-real + every other dns-real-extra clip)`,
      holdout: `  held-out half: ${r.clips.holdout} clips (the other dns-real-extra clips; not used for tuning)`,
      pairs: `Pairs: ${r.clips.pairs} clips (dns3-synthetic + pairs), with SI-SDR against the clean reference`,
    })[g];
  console.log('\nQuality: DNSMOS P.835 mean [95 % bootstrap CI over clips]');
  for (const g of GROUPS) {
    if (!r.systems[0]?.summary[g]) continue;
    console.log(`\n${head(g)}`);
    console.log(`${'model'.padEnd(w)} ${'SIG'.padEnd(22)} ${'BAK'.padEnd(22)} ${'OVRL'.padEnd(22)}${g === 'pairs' ? ' SI-SDR dB' : ''}`);
    for (const s of r.systems) {
      const q = s.summary[g]!;
      console.log(
        `${s.name.padEnd(w)} ${ci(q.SIG).padEnd(22)} ${ci(q.BAK).padEnd(22)} ${ci(q.OVRL).padEnd(22)}${q.si_sdr_db ? ' ' + ci(q.si_sdr_db, 2) : ''}`,
      );
    }
  }
  if (r.steps.length) {
    console.log('\nPaired differences (B - A, same clips): mean [95 % bootstrap CI], clips won by B');
    console.log(`${'A -> B'.padEnd(2 * w)} ${'group'.padEnd(8)} ${'dOVRL'.padEnd(26)} won`);
    for (const s of r.steps) {
      for (const g of GROUPS) {
        const d = s.ovrl[g];
        if (!d) continue;
        console.log(
          `${`${s.from} -> ${s.to}`.padEnd(2 * w)} ${g.padEnd(8)} ${`${sgn(d.mean)} [${sgn(d.lo)}, ${sgn(d.hi)}]`.padEnd(26)} ${d.wins}/${d.n} (${pct(d.winShare)})`,
        );
      }
      if (s.sig_real) console.log(`${''.padEnd(2 * w)} ${'dSIG real'.padEnd(8)} ${sgn(s.sig_real.mean)} [${sgn(s.sig_real.lo)}, ${sgn(s.sig_real.hi)}]`);
      if (s.si_sdr_pairs) {
        console.log(`${''.padEnd(2 * w)} ${'dSI-SDR pairs'.padEnd(8)} ${sgn(s.si_sdr_pairs.mean, 2)} [${sgn(s.si_sdr_pairs.lo, 2)}, ${sgn(s.si_sdr_pairs.hi, 2)}] dB`);
      }
    }
  }
  if (r.peers.length) {
    const names = r.systems.map((s) => s.name);
    console.log("\nPeers' published outputs (DNSMOS OVRL mean over the clips where the peer's output exists; ours on exactly those clips)");
    console.log(`${'peer'.padEnd(12)} ${'group'.padEnd(6)} clips ${'peer'.padStart(6)} ${names.map((n) => n.slice(0, 11).padStart(11)).join(' ')}`);
    for (const p of r.peers) {
      console.log(
        `${p.peer.padEnd(12)} ${p.group.padEnd(6)} ${String(p.clips.length).padStart(5)} ${f3(p.peer_scores.OVRL).padStart(6)} ${names.map((n) => f3(p.ours_ovrl[n]).padStart(11)).join(' ')}`,
      );
      if (p.ours_si_sdr_db) {
        console.log(
          `${''.padEnd(12)} SI-SDR ${''.padStart(5)}${p.peer_scores.si_sdr_db!.toFixed(2).padStart(6)} ${names.map((n) => p.ours_si_sdr_db![n].toFixed(2).padStart(11)).join(' ')}`,
        );
      }
    }
  }
  if (r.rtf_in_thread) {
    console.log('\nIn-thread RTF (1 s chunks, median of 3; no worker messaging):');
    for (const [n, v] of Object.entries(r.rtf_in_thread)) console.log(`  ${n.padEnd(w)} ${v.toFixed(4)}`);
  }
  if (r.targets?.length) {
    console.log('\nTargets (issue 8):');
    for (const t of r.targets) console.log(`  ${t.ok ? 'ok  ' : 'MISS'} ${t.check}: ${t.detail}`);
  }
  console.log(`\n(DNSMOS cache: ${r.dnsmos_cache.hits} scores reused, ${r.dnsmos_cache.misses} computed)`);
}

async function main(): Promise<void> {
  const argv = process.argv.slice(2);
  const report = await runQuality(argv);
  const i = argv.indexOf('--json');
  if (report && i >= 0) {
    const file = argv[i + 1] && !argv[i + 1].startsWith('--') ? argv[i + 1] : null;
    const text = JSON.stringify(report, null, 2);
    if (file) fs.writeFileSync(file, text + '\n');
    else console.log(text);
  }
}

if (require.main === module) {
  main().catch((err) => {
    console.error(err);
    process.exit(1);
  });
}
