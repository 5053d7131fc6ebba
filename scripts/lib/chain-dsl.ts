// A compact text form of a 16 kHz chain description (ChainSpec), for tuning runs of the quality benchmark:
//   stages joined by "+":  dtln | dtln1 (stage 1 only) [@grid offsets, comma separated]
//                          pf:<over-estimate>:<floor dB>[:<noise window s>[:lift|window]]
//                          stage1:<hop> (DTLN stage 1 alone at that frame hop, Hann synthesis)
//                          gate:<depth dB>:<ratio>:<max attenuation dB>[:<lookahead hops>:<hold hops>:<release ms>[:<peak decay dB/s>]]
//   e.g. "dtln+dtln+pf:4:-15:1.5:lift", "dtln@0,64+dtln".  A JSON ChainSpec (starting with "[") is accepted too.
import type { ChainSpec, StageSpec } from '../../src/inference/models/specs';

export function parseChainSpec(text: string): ChainSpec {
  const t = text.trim();
  if (t.startsWith('[')) return JSON.parse(t) as ChainSpec;
  return t.split('+').map((part): StageSpec => {
    const p = part.trim();
    const dtln = /^dtln(1)?(?:@([\d,]+))?$/.exec(p);
    if (dtln) {
      const grids = dtln[2] ? dtln[2].split(',').map(Number) : undefined;
      return { dtln: { ...(dtln[1] ? { stage2: false } : {}), ...(grids ? { grids } : {}) } };
    }
    const s1 = /^stage1:(\d+)$/.exec(p);
    if (s1) return { stage1: { hop: Number(s1[1]) } };
    const pf = /^pf:([\d.]+):(-?[\d.]+)(?::([\d.]+)(?::(lift|window))?)?$/.exec(p);
    if (pf) {
      return {
        postFilter: {
          overSubtract: Number(pf[1]),
          floorDb: Number(pf[2]),
          ...(pf[3] ? { noiseWindowS: Number(pf[3]) } : {}),
          ...(pf[4] ? { noiseMode: pf[4] as 'lift' | 'window' } : {}),
        },
      };
    }
    const gate = /^gate:([\d.]+):([\d.]+):([\d.]+)(?::(\d+):(\d+):([\d.]+)(?::([\d.]+))?)?$/.exec(p);
    if (gate) {
      const n = gate.map(Number);
      return {
        gate: {
          depthDb: n[1],
          ratio: n[2],
          maxAttenDb: n[3],
          ...(gate[4] ? { lookaheadHops: n[4], holdHops: n[5], releaseMs: n[6] } : {}),
          ...(gate[7] ? { peakDecayDbPerS: n[7] } : {}),
        },
      };
    }
    throw new Error(`cannot read chain stage "${p}" (expected dtln[1][@offsets], stage1:hop, pf:beta:floorDb[:windowS[:lift|window]] or gate:depth:ratio:max[:look:hold:releaseMs[:decay]])`);
  });
}
