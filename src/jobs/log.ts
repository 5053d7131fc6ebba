// How the jobs modules log (src/jobs/index.ts binds it to the service's logger).

/** Where the jobs modules log: one line, at a level (info when omitted). */
export type JobsLog = (line: string, level?: 'info' | 'warn' | 'error') => void;
