// Progress on stderr for `nsm denoise` and `nsm jobs`. On a terminal: one line redrawn in place (carriage return).
// Anywhere else (a log file, CI, a pipe): no redrawn frames, only lines worth keeping — a finished file, a change of
// state, and for `nsm denoise` a line per 10 % of a long file.

/** A progress bar as text: `[#####.....]  50%`. */
export function bar(frac: number): string {
  const width = 30;
  return `[${'#'.repeat(Math.round(frac * width)).padEnd(width, '.')}] ${(frac * 100).toFixed(0).padStart(3)}%`;
}

/** `nsm denoise`: a redrawn bar on a TTY, otherwise a line every 10 %. Files under 10 s show nothing. */
export function progressReporter(stream: NodeJS.WriteStream): { update(doneS: number, totalS: number | null): void; finish(): void } {
  const tty = !!stream.isTTY;
  let lastDraw = 0;
  let lastDecile = -1;
  let drew = false;
  let lastPlainS = 0;
  return {
    update(doneS, totalS) {
      if (totalS !== null && totalS < 10) return;
      const frac = totalS ? Math.min(1, doneS / totalS) : null;
      if (tty) {
        const now = Date.now();
        if (now - lastDraw < 100) return;
        lastDraw = now;
        const line = frac === null ? `processed ${doneS.toFixed(1)} s` : `${bar(frac)}  ${doneS.toFixed(1)}/${totalS!.toFixed(1)} s`;
        stream.write(`\r${line}\x1b[K`);
        drew = true;
      } else if (frac !== null) {
        const decile = Math.floor(frac * 10);
        if (decile > lastDecile && decile < 10) {
          lastDecile = decile;
          stream.write(`progress ${decile * 10}% (${doneS.toFixed(1)}/${totalS!.toFixed(1)} s)\n`);
        }
      } else if (doneS - lastPlainS >= 30) {
        lastPlainS = doneS;
        stream.write(`processed ${doneS.toFixed(0)} s\n`);
      }
    },
    finish() {
      if (drew) stream.write('\r\x1b[K');
      else if (lastDecile >= 0) stream.write('progress 100%\n');
    },
  };
}

/** `nsm jobs`: frames (`show`) only on a terminal; `line` in both cases; `note` only where frames are not drawn. */
export interface StatusLine {
  /** A frame: redrawn in place on a TTY, dropped elsewhere. */
  show(text: string): void;
  /** A line of its own, e.g. a finished file (the frame, if any, is cleared first). */
  line(text: string): void;
  /** A line only where there are no frames (a change of state the frames would have shown). */
  note(text: string): void;
  /** Clears the frame. */
  done(): void;
}

export function statusLine(stream: NodeJS.WritableStream & { isTTY?: boolean }, quiet: boolean): StatusLine {
  const tty = !!stream.isTTY;
  let last = '';
  let drew = false;
  const done = (): void => {
    if (drew) stream.write('\r\x1b[K');
    drew = false;
    last = '';
  };
  return {
    show(text) {
      if (quiet || !tty || text === last) return;
      last = text;
      stream.write(`\r${text}\x1b[K`);
      drew = true;
    },
    line(text) {
      if (quiet) return;
      done();
      stream.write(text + '\n');
    },
    note(text) {
      if (!quiet && !tty) stream.write(text + '\n');
    },
    done,
  };
}
