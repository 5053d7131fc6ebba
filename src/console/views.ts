// The console's HTML pages: the security headers every /console response carries (a strict CSP: the pages load
// only their own scripts and styles) and the static files of public/console, served from the console's root.
import fs from 'node:fs';
import express, { type RequestHandler } from 'express';

const CONTENT_SECURITY_POLICY = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data: blob:",
  "media-src 'self' blob: mediastream:",
  "connect-src 'self'",
  "object-src 'none'",
  "base-uri 'none'",
  "frame-ancestors 'none'",
  "form-action 'self'",
].join('; ');

/** Headers for every console response, pages and API alike. */
export const securityHeaders: RequestHandler = (_req, res, next) => {
  res.setHeader('Content-Security-Policy', CONTENT_SECURITY_POLICY);
  res.setHeader('X-Content-Type-Options', 'nosniff');
  res.setHeader('X-Frame-Options', 'DENY');
  res.setHeader('Referrer-Policy', 'no-referrer');
  next();
};

/** Serves index.html, console.js, console.css and the rest of `staticDir` (skipped when the folder is missing). */
export function registerPages(router: express.Router, staticDir: string): void {
  router.get('/', (req, res, next) => {
    // Relative asset URLs need the trailing slash.
    const pathOnly = req.originalUrl.split('?')[0];
    if (!pathOnly.endsWith('/')) {
      res.redirect(301, `${req.baseUrl}/`);
      return;
    }
    next();
  });
  if (fs.existsSync(staticDir)) {
    router.use(express.static(staticDir, { index: 'index.html', fallthrough: true, maxAge: 0 }));
  }
}
