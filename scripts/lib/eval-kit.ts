// The shared evaluation kit (../shared/eval, see its README.md and SOURCES.md) as lists of clips.
//   real:  dns3-real (5) + dns-real-extra (24) noisy recordings, no clean reference; peers' outputs NAME_SYSTEM.wav
//   pairs: dns3-synthetic (5) + pairs (10) noisy/clean pairs; peers' outputs NAME_SYSTEM.wav
// Every real clip also belongs to one half of a fixed split: "tune" (dns3-real and every other dns-real-extra clip in
// name order) and "holdout" (the other 12 dns-real-extra clips). Chain settings are chosen on the tune half only and
// confirmed on the held-out half.
import fs from 'node:fs';
import path from 'node:path';

export type ClipSet = 'dns3-real' | 'dns-real-extra' | 'dns3-synthetic' | 'pairs';

export interface Clip {
  /** Folder/file stem, unique across the kit. */
  id: string;
  set: ClipSet;
  kind: 'real' | 'pair';
  /** Real clips: the half of the tune/holdout split; pairs: always 'pairs'. */
  split: 'tune' | 'holdout' | 'pairs';
  noisy: string;
  clean?: string;
  /** Peer system name -> its output on this clip. */
  peers: Record<string, string>;
}

export const REAL_SETS: ClipSet[] = ['dns3-real', 'dns-real-extra'];
export const PAIR_SETS: ClipSet[] = ['dns3-synthetic', 'pairs'];

function wavs(dir: string): string[] {
  return fs.existsSync(dir) ? fs.readdirSync(dir).filter((f) => f.endsWith('.wav')).sort() : [];
}

/** Real recordings: NAME.wav is a recording unless a shorter NAME'.wav exists with NAME = NAME'_SYSTEM (a peer). */
function realClips(root: string, set: ClipSet): Clip[] {
  const dir = path.join(root, set);
  const files = wavs(dir);
  const stems = new Set(files.map((f) => f.slice(0, -4)));
  const parentOf = (stem: string): string | null => {
    for (let i = stem.lastIndexOf('_'); i > 0; i = stem.lastIndexOf('_', i - 1)) {
      if (stems.has(stem.slice(0, i))) return stem.slice(0, i);
    }
    return null;
  };
  const clips = new Map<string, Clip>();
  const peers: [string, string, string][] = [];
  for (const f of files) {
    const stem = f.slice(0, -4);
    const parent = parentOf(stem);
    if (parent) peers.push([parent, stem.slice(parent.length + 1), path.join(dir, f)]);
    else clips.set(stem, { id: `${set}/${stem}`, set, kind: 'real', split: 'tune', noisy: path.join(dir, f), peers: {} });
  }
  for (const [parent, system, file] of peers) clips.get(parent)!.peers[system] = file;
  const list = [...clips.values()];
  if (set === 'dns-real-extra') list.forEach((c, i) => (c.split = i % 2 === 0 ? 'tune' : 'holdout'));
  return list;
}

/** Pairs: NAME_noisy.wav + NAME_clean.wav, peers NAME_SYSTEM.wav. */
function pairClips(root: string, set: ClipSet): Clip[] {
  const dir = path.join(root, set);
  const files = wavs(dir);
  const clips: Clip[] = [];
  for (const f of files.filter((x) => x.endsWith('_noisy.wav'))) {
    const name = f.slice(0, -'_noisy.wav'.length);
    const clean = path.join(dir, `${name}_clean.wav`);
    if (!fs.existsSync(clean)) continue;
    const peers: Record<string, string> = {};
    for (const g of files) {
      if (!g.startsWith(`${name}_`) || g.endsWith('_noisy.wav') || g.endsWith('_clean.wav')) continue;
      const system = g.slice(name.length + 1, -4);
      // A system name starts with a letter: "p232_003_..." is not a peer of "p232".
      if (/^[A-Za-z]/.test(system)) peers[system] = path.join(dir, g);
    }
    clips.push({ id: `${set}/${name}`, set, kind: 'pair', split: 'pairs', noisy: path.join(dir, f), clean, peers });
  }
  return clips;
}

export function listClips(root: string): { real: Clip[]; pairs: Clip[] } {
  return {
    real: REAL_SETS.flatMap((s) => realClips(root, s)),
    pairs: PAIR_SETS.flatMap((s) => pairClips(root, s)),
  };
}
