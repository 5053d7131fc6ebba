// Where job files live: JOBS_DIR (default DATA_DIR/jobs)/{inputs,results,incoming}. Not TMP_DIR (swept by the model
// service); one file system, so a finished upload or result is renamed into place, never copied. Gateways that share
// a queue (PostgreSQL) share this folder: any runner may run a job another gateway received, and any gateway may
// serve its result. Files in incoming/ carry their writer (host, pid, instance), so a process starting after a
// kill -9 removes what its dead predecessor left there at once, and never a live neighbour's.
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PRIVATE_DIR_MODE } from '../../startup/private-files';
import { processAlive } from '../../startup/process-alive';

const HOST_TAG = crypto.createHash('sha256').update(os.hostname()).digest('hex').slice(0, 8);
const INSTANCE = crypto.randomBytes(4).toString('hex');
/** This process as the writer of incoming files: `<host>-<pid>-<instance>`. */
export const INCOMING_OWNER = `${HOST_TAG}-${process.pid}-${INSTANCE}`;
const OWNED = /^[^.]+\.(?:upload|download|output|reference-upload|reference-download)\.([0-9a-f]{8})-(\d+)-([0-9a-f]{8})$/;


/**
 * Whether an incoming file was left by a process that is gone: written on this host by a pid that no longer runs,
 * or by an earlier life of our own pid (a restarted container is pid 1 again). Files of other hosts, and names
 * without a writer, are left to the age-based orphan sweep.
 */
export function isAbandonedIncoming(name: string): boolean {
  const m = OWNED.exec(name);
  return m ? writerGone(`${m[1]}-${m[2]}-${m[3]}`) === true : false;
}

/**
 * Whether the process a writer tag (INCOMING_OWNER's form, `<host>-<pid>-<instance>`) names is gone: true for a pid
 * of this host that no longer runs (or an earlier life of our own pid), false while it runs, null for another host's
 * tag (or no tag) that this host cannot check.
 */
export function writerGone(tag: string): boolean | null {
  const m = /^([0-9a-f]{8})-(\d+)-([0-9a-f]{8})$/.exec(tag);
  if (!m || m[1] !== HOST_TAG) return null;
  const pid = Number(m[2]);
  if (pid === process.pid) return m[3] !== INSTANCE;
  return !processAlive(pid);
}

export class JobFiles {
  readonly root: string;
  readonly inputs: string;
  readonly results: string;
  /** Uploads and downloads in progress (renamed into inputs/ or results/ when complete). */
  readonly incoming: string;

  constructor(root: string) {
    this.root = root;
    this.inputs = path.join(this.root, 'inputs');
    this.results = path.join(this.root, 'results');
    this.incoming = path.join(this.root, 'incoming');
  }

  async ensure(): Promise<void> {
    for (const dir of [this.inputs, this.results, this.incoming]) await fs.promises.mkdir(dir, { recursive: true, mode: PRIVATE_DIR_MODE });
  }

  input(id: string): string {
    return path.join(this.inputs, id);
  }

  /** A job's echo reference (docs/echo.md), beside its input. */
  reference(id: string): string {
    return path.join(this.inputs, `${id}.reference`);
  }

  result(file: string): string {
    return path.join(this.results, path.basename(file));
  }

  /** Partial upload, download or model-service output of a job (`kind` keeps them apart), tagged with its writer. */
  incomingFile(id: string, kind: 'upload' | 'download' | 'output' | 'reference-upload' | 'reference-download'): string {
    return path.join(this.incoming, `${id}.${kind}.${INCOMING_OWNER}`);
  }

  /** Bytes free for an unprivileged writer on DATA_DIR's file system. */
  async freeBytes(): Promise<number> {
    await fs.promises.mkdir(this.root, { recursive: true });
    const s = await fs.promises.statfs(this.root);
    return Number(s.bavail) * Number(s.bsize);
  }

  /** Removes every file of a job (input, partial files of any writer, the result). */
  async removeAll(id: string, resultFile: string | null): Promise<void> {
    const paths = [this.input(id), this.reference(id)];
    const partials = await fs.promises.readdir(this.incoming).catch(() => [] as string[]);
    for (const name of partials) if (name.startsWith(`${id}.`)) paths.push(path.join(this.incoming, name));
    if (resultFile) paths.push(this.result(resultFile));
    await Promise.all(paths.map((p) => fs.promises.rm(p, { force: true }).catch(() => undefined)));
  }

  /** Removes incoming files of dead writers (see isAbandonedIncoming); at start and with every orphan sweep. */
  async sweepAbandonedIncoming(): Promise<number> {
    let removed = 0;
    const names = await fs.promises.readdir(this.incoming).catch(() => [] as string[]);
    for (const name of names) {
      if (!isAbandonedIncoming(name)) continue;
      await fs.promises.rm(path.join(this.incoming, name), { force: true }).catch(() => undefined);
      removed++;
    }
    return removed;
  }

  /**
   * Deletes files whose job the queue no longer knows, when untouched for `minAgeMs` (an upload still streaming in
   * keeps its mtime fresh). Returns how many were removed.
   */
  async sweepOrphans(known: Set<string>, minAgeMs: number, now = Date.now()): Promise<number> {
    let removed = 0;
    for (const dir of [this.inputs, this.results, this.incoming]) {
      let names: string[];
      try {
        names = await fs.promises.readdir(dir);
      } catch {
        continue;
      }
      for (const name of names) {
        const id = name.split('.')[0];
        if (known.has(id)) continue;
        const full = path.join(dir, name);
        try {
          const st = await fs.promises.stat(full);
          if (now - st.mtimeMs < minAgeMs) continue;
          await fs.promises.rm(full, { force: true });
          removed++;
        } catch {
          // removed meanwhile
        }
      }
    }
    return removed;
  }
}
