// Where job files live: JOBS_DIR (default DATA_DIR/jobs)/{inputs,results,incoming}. Not TMP_DIR (swept by the model
// service); one file system, so a finished upload or result is renamed into place, never copied. Gateways that share
// a queue (PostgreSQL) share this folder: any runner may run a job another gateway received, and any gateway may
// serve its result.
import fs from 'node:fs';
import path from 'node:path';

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
    for (const dir of [this.inputs, this.results, this.incoming]) await fs.promises.mkdir(dir, { recursive: true });
  }

  input(id: string): string {
    return path.join(this.inputs, id);
  }

  result(file: string): string {
    return path.join(this.results, path.basename(file));
  }

  /** Partial upload, download or model-service output of a job (`kind` keeps them apart). */
  incomingFile(id: string, kind: 'upload' | 'download' | 'output'): string {
    return path.join(this.incoming, `${id}.${kind}`);
  }

  /** Bytes free for an unprivileged writer on DATA_DIR's file system. */
  async freeBytes(): Promise<number> {
    await fs.promises.mkdir(this.root, { recursive: true });
    const s = await fs.promises.statfs(this.root);
    return Number(s.bavail) * Number(s.bsize);
  }

  /** Removes every file of a job (input, partial files, the result). */
  async removeAll(id: string, resultFile: string | null): Promise<void> {
    const paths = [this.input(id), this.incomingFile(id, 'upload'), this.incomingFile(id, 'download'), this.incomingFile(id, 'output')];
    if (resultFile) paths.push(this.result(resultFile));
    await Promise.all(paths.map((p) => fs.promises.rm(p, { force: true }).catch(() => undefined)));
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
