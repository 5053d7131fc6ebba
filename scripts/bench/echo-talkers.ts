// The echo bench's talkers: far end and near end cut from disjoint sets of clean clips of the evaluation kit
// (../shared/eval: DNS Challenge 3 synthetic clean, VoiceBank+DEMAND and DNS1 clean, the full-band freesound clip;
// credits in its SOURCES.md) and the LibriSpeech clip of @vonage/noise-suppression, each clip at the same level.
import path from 'node:path';
import { PROJECT_ROOT } from '../../src/config';
import { decodeAudio } from '../lib/audio-io';
import { evalDir } from '../lib/metrics';
import { seeded } from '../lib/stats';
import { activeRms, FS, type Talkers } from './echo-scenes';

export function loadTalkers(): Talkers {
  const dir = evalDir();
  const libri = path.join(PROJECT_ROOT, 'node_modules/@vonage/noise-suppression/data/7729-102255-0000.wav');
  if (!dir) throw new Error('the echo bench needs ../shared/eval (clean speech clips)');
  const cat = (files: string[]): Float32Array => {
    const parts = files.map((f) => decodeAudio(f, FS)[0]);
    const out = new Float32Array(parts.reduce((s, p) => s + p.length, 0));
    let o = 0;
    for (const p of parts) {
      // Each clip at the same active level.
      const g = 0.1 / Math.max(activeRms(p), 1e-9);
      for (let i = 0; i < p.length; i++) out[o + i] = p[i] * g;
      o += p.length;
    }
    return out;
  };
  const d3 = (id: string) => path.join(dir, 'dns3-synthetic', `${id}_clean.wav`);
  const pr = (id: string) => path.join(dir, 'pairs', `${id}_clean.wav`);
  const far = cat([
    d3('0015'), pr('vbdemand_p232_003'), d3('0016'), pr('vbdemand_p232_005'), path.join(dir, 'fullband', 'clean_freesound_33711.wav'),
    pr('vbdemand_p232_021'), d3('0072'), pr('vbdemand_p232_023'), pr('vbdemand_p232_032'),
  ]);
  const near = cat([
    d3('0398'), pr('dns1synth_fileid_170'), pr('vbdemand_p257_011'), d3('0523'), pr('dns1synth_fileid_44'), libri,
    pr('vbdemand_p257_023'), pr('dns1synth_fileid_58'),
  ]);
  return { far, near };
}


/**
 * A voice agent's far end (the CPU tools' --agent): the far pool with digital silence in turns of 1–4 s, about half
 * of it, as an agent's reference is exact zeros whenever it is not speaking. A copy: `t` is unchanged.
 */
export function agentTalkers(t: Talkers, seed = 4242): Talkers {
  const rnd = seeded(seed);
  const far = Float32Array.from(t.far);
  let on = true;
  for (let i = 0; i < far.length; on = !on) {
    const end = Math.min(far.length, i + Math.round((1 + 3 * rnd()) * FS));
    if (!on) far.fill(0, i, end);
    i = end;
  }
  return { far, near: t.near };
}
