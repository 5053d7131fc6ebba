// What a console page must look like at any width, checked in the browser: the page does not scroll sideways, no
// element sticks out of the viewport (unless it sits inside a box that scrolls or clips within the viewport, like the
// usage chart), no select cuts off the option it shows, and no scope name or time in a table is broken over lines.
import type { Page } from 'playwright-core';

/** Room a closed <select> keeps for its arrow (Chromium draws it in about 20 px at the right). */
const SELECT_ARROW_PX = 20;

/** Problems found on the page as it is now, one line each; [] when it fits. */
export async function layoutProblems(page: Page): Promise<string[]> {
  return page.evaluate((arrowPx) => {
    const problems: string[] = [];
    const vw = document.documentElement.clientWidth;
    const name = (e: Element): string => {
      const id = e.id ? `#${e.id}` : '';
      const cls = typeof e.className === 'string' && e.className ? `.${e.className.trim().split(/\s+/).join('.')}` : '';
      const text = (e.textContent ?? '').trim().slice(0, 30);
      return `${e.tagName.toLowerCase()}${id}${cls}${text ? ` "${text}"` : ''}`;
    };
    const visible = (e: Element): boolean => {
      const r = e.getBoundingClientRect();
      return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== 'hidden';
    };

    const scrollWidth = Math.max(document.documentElement.scrollWidth, document.body.scrollWidth);
    if (scrollWidth > vw) problems.push(`the page is ${scrollWidth} px wide in a ${vw} px viewport`);

    // An element past the viewport's edge is fine inside a box that scrolls or clips and itself fits (an <svg> clips
    // too, but it may itself sit in such a box: the usage chart).
    const clippedWithinViewport = (e: Element): boolean => {
      for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
        if (getComputedStyle(a).overflowX === 'visible') continue;
        const r = a.getBoundingClientRect();
        if (r.left >= -0.5 && r.right <= vw + 0.5) return true;
      }
      return false;
    };
    let reported = 0;
    for (const e of Array.from(document.body.querySelectorAll('*'))) {
      if (!visible(e)) continue;
      const r = e.getBoundingClientRect();
      if ((r.right > vw + 0.5 || r.left < -0.5) && !clippedWithinViewport(e)) {
        // The outermost offender is enough; its children stick out with it.
        if (e.parentElement && e.parentElement !== document.body) {
          const p = e.parentElement.getBoundingClientRect();
          if ((p.right > vw + 0.5 || p.left < -0.5) && !clippedWithinViewport(e.parentElement)) continue;
        }
        if (reported++ < 10) problems.push(`${name(e)} spans ${Math.round(r.left)}..${Math.round(r.right)} px of ${vw}`);
      }
    }

    // A closed select shows its option's text whole.
    const canvas = document.createElement('canvas').getContext('2d')!;
    for (const sel of Array.from(document.querySelectorAll('select'))) {
      if (!visible(sel) || sel.selectedIndex < 0) continue;
      const cs = getComputedStyle(sel);
      canvas.font = `${cs.fontStyle} ${cs.fontWeight} ${cs.fontSize} ${cs.fontFamily}`;
      const text = sel.options[sel.selectedIndex].text;
      const needed = canvas.measureText(text).width;
      const room = sel.clientWidth - parseFloat(cs.paddingLeft) - parseFloat(cs.paddingRight) - arrowPx;
      if (needed > room) problems.push(`select#${sel.id} cuts "${text}" (${Math.round(needed)} px of text in ${Math.round(room)} px)`);
    }

    // Scope names (in the key form and the keys table) stay on one line.
    for (const code of Array.from(document.querySelectorAll('#key-scopes code, .scope-chip'))) {
      if (!visible(code)) continue;
      // An inline box broken over lines has several rects; an inline-block one grows taller than one line.
      const lines = code.getClientRects().length;
      const tall = code.getBoundingClientRect().height > 2 * parseFloat(getComputedStyle(code).fontSize);
      if (lines > 1 || tall) problems.push(`scope "${code.textContent}" is broken over lines`);
    }

    // A date and time in a table ("Nov 28, 2:04 PM") takes at most two lines, the time under the date, and neither
    // is broken: a range over each part's text has one box per line.
    const lines = (n: Node, from: number, to: number): number => {
      const range = document.createRange();
      range.setStart(n, from);
      range.setEnd(n, to);
      return new Set(Array.from(range.getClientRects()).filter((r) => r.width > 0).map((r) => Math.round(r.top))).size;
    };
    for (const td of Array.from(document.querySelectorAll('table td'))) {
      if (!visible(td)) continue;
      const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        // Chromium's en-US forms, with or without the year, whatever spaces separate the parts.
        const m = /([A-Z][a-z]{2}\s\d{1,2}(?:,\s\d{4})?),\s(\d{1,2}:\d{2}(?:\s[AP]M)?)/.exec(n.textContent ?? '');
        if (!m) continue;
        const timeFrom = m.index + m[0].length - m[2].length;
        const parts = [lines(n, m.index, m.index + m[1].length), lines(n, timeFrom, timeFrom + m[2].length)];
        if (parts[0] > 1 || parts[1] > 1) problems.push(`the time "${m[0]}" is broken over lines (date ${parts[0]}, time ${parts[1]})`);
      }
    }
    return problems;
  }, SELECT_ARROW_PX);
}
