// The request timeline: one row per request on a canvas, drawn from DATA (see timeline.rs
// for its layout). Wheel zooms time, Shift+wheel zooms rows, drag pans, double-click resets;
// hovering a row shows its figures. Only what is in view is drawn. With DATA.server (scraped
// gauges: the server's running / waiting requests, KV-cache usage, GPU figures) a strip under
// the rows draws its lines, counts on the left scale and percentages on the right, on the
// same time axis.
(function () {
  "use strict";
  const scriptStart = performance.now();
  const R = DATA.requests, S = DATA.segments, C = DATA.colours;
  // Per request, the end of its thinking part (its first output token; negated when every
  // token was reasoning), 0 when none; empty when no request thought.
  const T = DATA.thinking || [];
  const thinkingEnd = (i) => (T.length ? Math.abs(T[i]) : 0);
  const noOutput = (i) => T.length > 0 && T[i] < 0;
  const n = R.length / 8;
  const canvas = document.getElementById("timeline");
  const tip = document.getElementById("tip");
  const ctx = canvas.getContext("2d");
  const V = DATA.server || null;
  const LEFT = 72, TOP = 26, RIGHT = V ? 44 : 12, BOTTOM = 8;
  // The server strip's height and the gap above it (its tick labels).
  const STRIP = V ? 120 : 0, GAP = V ? 22 : 0;
  let end = 1, begin = 0;
  for (let i = 0; i < n; i++) end = Math.max(end, R[i * 8 + 3], R[i * 8 + 2], R[i * 8 + 1]);
  const L = V ? V.lines : [];
  for (const l of L) if (l.t.length) { begin = Math.min(begin, l.t[0]); end = Math.max(end, l.t[l.t.length - 1]); }
  const full = { x0: begin, x1: begin + (end - begin) * 1.01, r0: 0, r1: Math.max(n, 1) };
  // The strip's left scale: the most requests running or waiting at any sample.
  let vmax = 1;
  for (const l of L) if (l.scale === "count") for (const v of l.v) vmax = Math.max(vmax, v || 0);
  const hasPercent = L.some((l) => l.scale === "percent");
  let view = Object.assign({}, full);
  let width = 0, height = 0;

  function resize() {
    const ratio = window.devicePixelRatio || 1;
    width = canvas.parentElement.clientWidth;
    const room = Math.max(320, window.innerHeight - canvas.getBoundingClientRect().top - 24);
    height = Math.round(Math.min(Math.max(n * 14 + TOP + BOTTOM, 240), room)) + STRIP + GAP;
    canvas.width = Math.round(width * ratio);
    canvas.height = Math.round(height * ratio);
    canvas.style.height = height + "px";
    ctx.setTransform(ratio, 0, 0, ratio, 0, 0);
  }

  const plotW = () => width - LEFT - RIGHT;
  const plotH = () => height - TOP - BOTTOM - STRIP - GAP;
  const stripTop = () => TOP + plotH() + GAP;
  const xOf = (t) => LEFT + (t - view.x0) / (view.x1 - view.x0) * plotW();
  const tOf = (x) => view.x0 + (x - LEFT) / plotW() * (view.x1 - view.x0);
  const rowH = () => plotH() / (view.r1 - view.r0);

  function niceStep(span, target) {
    const raw = span / target, mag = Math.pow(10, Math.floor(Math.log10(raw)));
    for (const m of [1, 2, 5, 10]) if (m * mag >= raw) return m * mag;
    return 10 * mag;
  }

  function clock(us) {
    if (us < 0) return "-" + clock(-us);
    const s = us / 1e6, h = Math.floor(s / 3600), m = Math.floor((s % 3600) / 60);
    const sec = (s % 60).toFixed(3).padStart(6, "0");
    return String(h).padStart(2, "0") + ":" + String(m).padStart(2, "0") + ":" + sec;
  }

  function bar(a, b, y, h, colour, minWidth) {
    if (b < view.x0 || a > view.x1) return 0;
    const xa = Math.max(xOf(a), LEFT), xb = Math.min(xOf(b), width - RIGHT);
    ctx.fillStyle = colour;
    ctx.fillRect(xa, y, Math.max(xb - xa, minWidth), h);
    return 1;
  }

  // Request i's ITL segments. Segments narrower than a pixel are pooled into one mark of
  // the worst class among them, so a spike stays visible at any zoom and a 10,000-row
  // view costs at most one rectangle per pixel per row.
  function gaps(i, firstToken, y, h) {
    const o = i * 8, s1 = i + 1 < n ? R[o + 15] : S.length;
    let prev = firstToken, drawn = 0, poolStart = -1, poolEnd = 0, poolClass = 0;
    const flush = () => {
      if (poolStart >= 0) drawn += bar(poolStart, poolEnd, y, h, C.itl[poolClass], 0);
      poolStart = -1;
    };
    for (let s = R[o + 7]; s < s1; s++) {
      const v = S[s], cls = v % 3, end = prev + (v - cls) / 3;
      if (end < view.x0 || prev > view.x1) { prev = end; continue; }
      if (xOf(end) - xOf(prev) >= 1) {
        flush();
        drawn += bar(prev, end, y, h, C.itl[cls], 0);
      } else {
        if (poolStart < 0) { poolStart = prev; poolClass = cls; }
        poolEnd = end;
        poolClass = Math.max(poolClass, cls);
        if (xOf(poolEnd) - xOf(poolStart) >= 1) flush();
      }
      prev = end;
    }
    flush();
    return drawn;
  }

  // Request i's segment under time t: [label, start, end], or null.
  function segmentAt(i, t) {
    const o = i * 8, s1 = i + 1 < n ? R[o + 15] : S.length;
    let prev = R[o + 2];
    for (let s = R[o + 7]; s < s1; s++) {
      const v = S[s], cls = v % 3, end = prev + (v - cls) / 3;
      if (t >= prev && t < end) return [DATA.labels[cls], prev, end];
      prev = end;
    }
    return null;
  }

  function draw() {
    ctx.clearRect(0, 0, width, height);
    ctx.save();
    ctx.beginPath();
    ctx.rect(LEFT, TOP, plotW(), plotH());
    ctx.clip();
    const rh = rowH(), h = Math.max(rh * 0.8, 1);
    const first = Math.max(0, Math.floor(view.r0)), last = Math.min(n, Math.ceil(view.r1));
    let rows = 0, segments = 0;
    for (let i = first; i < last; i++) {
      const o = i * 8, y = TOP + (i - view.r0) * rh;
      const arrival = R[o], start = R[o + 1], firstToken = R[o + 2], ok = R[o + 6];
      rows++;
      if (start > arrival) segments += bar(arrival, start, y, h, C.queue, 0);
      if (!ok) {
        segments += bar(start, Math.max(R[o + 3], start), y, h, C.failed, 3);
        continue;
      }
      segments += bar(start, firstToken, y, h, C.ttft, 0.5);
      segments += gaps(i, firstToken, y, h);
      // The thinking part drawn apart, over its gaps.
      if (thinkingEnd(i) > firstToken) segments += bar(firstToken, thinkingEnd(i), y, h, C.thinking, 0.5);
    }
    ctx.restore();
    axes(rh, first, last);
    canvas.dataset.rows = String(rows);
    canvas.dataset.segments = String(segments);
    if (V) canvas.dataset.serverSamples = String(server());
  }

  // The server strip: each gauge drawn as steps, its value held from one scrape to the
  // next (a gauge is a level read at the scrape; a ramp between two readings would show
  // change that was never measured), a dot at each sample; a missing sample breaks the
  // line. Returns the samples in view.
  function server() {
    const top = stripTop(), h = STRIP - 4;
    const yL = (v) => top + h - v / vmax * h, yR = (v) => top + h - v / 100 * h;
    ctx.save();
    ctx.beginPath();
    ctx.rect(LEFT, top, plotW(), h);
    ctx.clip();
    let inView = 0;
    for (const l of L) {
      for (let k = 0; k < l.t.length; k++) if (l.t[k] >= view.x0 && l.t[k] <= view.x1) inView++;
      const y = l.scale === "percent" ? yR : yL, values = l.v;
      ctx.strokeStyle = ctx.fillStyle = l.colour;
      ctx.lineWidth = 1.5;
      ctx.beginPath();
      for (let k = 0; k < l.t.length; k++) {
        const v = values[k];
        if (v === null || v === undefined) continue;
        const x = xOf(l.t[k]), yy = y(v);
        ctx.moveTo(x, yy);
        // Held until the next scrape (to the last one's own time at the end).
        const next = k + 1 < l.t.length ? xOf(l.t[k + 1]) : x;
        ctx.lineTo(next, yy);
        const w = values[k + 1];
        if (k + 1 < l.t.length && w !== null && w !== undefined) ctx.lineTo(next, y(w));
      }
      ctx.stroke();
      for (let k = 0; k < l.t.length; k++) {
        const v = values[k];
        if (v !== null && v !== undefined) ctx.fillRect(xOf(l.t[k]) - 1.5, y(v) - 1.5, 3, 3);
      }
    }
    ctx.restore();
    ctx.lineWidth = 1;
    ctx.strokeStyle = "#bbb";
    ctx.fillStyle = "#333";
    ctx.strokeRect(LEFT, top, plotW(), h);
    ctx.font = "11px system-ui, sans-serif";
    ctx.textAlign = "right";
    ctx.fillText(String(Math.round(vmax * 100) / 100), LEFT - 4, top + 10);
    ctx.fillText("0", LEFT - 4, top + h);
    ctx.fillText("count", LEFT - 4, top + h / 2 + 4);
    if (hasPercent) {
      ctx.textAlign = "left";
      ctx.fillText("100%", width - RIGHT + 4, top + 10);
      ctx.fillText("0%", width - RIGHT + 4, top + h);
      ctx.fillText("%", width - RIGHT + 4, top + h / 2 + 4);
    }
    ctx.textAlign = "center";
    ctx.fillText("Scraped (from /metrics)", LEFT + plotW() / 2, top - 6);
    return inView;
  }

  // Each line's last sample at or before time t (the level it held then), described.
  function describeServer(t) {
    const out = [];
    for (const l of L) {
      let k = -1;
      for (let j = 0; j < l.t.length && l.t[j] <= t; j++) k = j;
      if (k < 0) k = 0;
      const v = l.v[k];
      const text = v === null || v === undefined ? "n/a" : v.toFixed(l.digits);
      out.push(l.label + ": " + text + "  (scrape at " + clock(l.t[k]) + (l.t[k] < 0 ? ", before the run)" : ")"));
    }
    return out.join("\n");
  }

  function axes(rh, first, last) {
    ctx.fillStyle = "#333";
    ctx.strokeStyle = "#bbb";
    ctx.font = "11px system-ui, sans-serif";
    ctx.textAlign = "center";
    const span = view.x1 - view.x0, step = niceStep(span, Math.max(2, plotW() / 110));
    for (let t = Math.ceil(view.x0 / step) * step; t <= view.x1; t += step) {
      const x = xOf(t);
      ctx.beginPath();
      ctx.moveTo(x, TOP - 4);
      ctx.lineTo(x, TOP);
      ctx.stroke();
      const digits = step >= 1e6 ? 0 : step >= 1e5 ? 1 : step >= 1e4 ? 2 : 3;
      ctx.fillText((t / 1e6).toFixed(digits) + " s", x, TOP - 8);
    }
    ctx.strokeRect(LEFT, TOP, plotW(), plotH());
    ctx.textAlign = "right";
    if (rh >= 11) {
      for (let i = first; i < last; i++) {
        ctx.fillText("Req " + i, LEFT - 4, TOP + (i - view.r0) * rh + rh * 0.4 + 4);
      }
    } else {
      ctx.fillText("Req " + first, LEFT - 4, TOP + 10);
      ctx.fillText("Req " + (last - 1), LEFT - 4, TOP + plotH() - 2);
    }
  }

  function describe(i, t) {
    const o = i * 8, ms = (a, b) => ((b - a) / 1000).toFixed(3) + " ms";
    const arrival = R[o], start = R[o + 1], first = R[o + 2], fin = R[o + 3];
    const lines = ["Req " + i + (R[o + 6] ? "" : " (failed)"),
      "Arrival: " + clock(arrival) + "   Start: " + clock(start),
      "Client queue: " + ms(arrival, start)];
    if (R[o + 6]) {
      lines.push("TTFT: " + ms(start, first) + "   E2EL: " + ms(start, fin));
      if (thinkingEnd(i) > first) {
        lines.push(!noOutput(i)
          ? "TTFO: " + ms(start, thinkingEnd(i)) + "   Thinking: " + ms(first, thinkingEnd(i))
          : "Thinking: " + ms(first, thinkingEnd(i)) + " (no output token)");
      }
      lines.push("Request End Time: " + clock(fin));
    }
    lines.push("Prompt Tokens: " + R[o + 4] + "   Output Tokens: " + R[o + 5]);
    let kind = null, a = 0, b = 0;
    if (t >= arrival && t < start) { kind = "Client queue"; a = arrival; b = start; }
    else if (t >= start && t < first) { kind = "TTFT"; a = start; b = first; }
    else if (t >= first && t < thinkingEnd(i)) { kind = "Thinking"; a = first; b = thinkingEnd(i); }
    else if (R[o + 6]) {
      const seg = segmentAt(i, t);
      if (seg) { kind = seg[0]; a = seg[1]; b = seg[2]; }
    }
    if (kind) lines.push("Segment: " + kind + "  " + clock(a) + " – " + clock(b) + " (" + ms(a, b) + ")");
    return lines.join("\n");
  }

  function hover(ev) {
    const box = canvas.getBoundingClientRect(), x = ev.clientX - box.left, y = ev.clientY - box.top;
    if (V && x >= LEFT && x <= width - RIGHT && y >= stripTop() && L.length) {
      tip.textContent = describeServer(tOf(x));
      tip.style.display = "block";
      tip.style.left = Math.min(x + 14, width - tip.offsetWidth - 4) + "px";
      tip.style.top = Math.max(y - tip.offsetHeight - 8, 0) + "px";
      return;
    }
    const i = Math.floor(view.r0 + (y - TOP) / rowH());
    if (x < LEFT || y < TOP || i < 0 || i >= n || i >= view.r1) { tip.style.display = "none"; return; }
    tip.textContent = describe(i, tOf(x));
    tip.style.display = "block";
    tip.style.left = Math.min(x + 14, width - tip.offsetWidth - 4) + "px";
    tip.style.top = (y + 14) + "px";
  }

  function zoom(ev) {
    ev.preventDefault();
    const box = canvas.getBoundingClientRect(), k = Math.exp(ev.deltaY * 0.002);
    if (ev.shiftKey) {
      const r = view.r0 + (ev.clientY - box.top - TOP) / rowH();
      const span = Math.min(Math.max((view.r1 - view.r0) * k, 2), full.r1);
      view.r0 = Math.max(0, r - (r - view.r0) * span / (view.r1 - view.r0));
      view.r1 = Math.min(full.r1, view.r0 + span);
    } else {
      const t = tOf(ev.clientX - box.left);
      const span = Math.max((view.x1 - view.x0) * k, 10);
      view.x0 = t - (t - view.x0) * span / (view.x1 - view.x0);
      view.x1 = view.x0 + span;
    }
    draw();
  }

  let drag = null;
  canvas.addEventListener("mousedown", (ev) => { drag = { x: ev.clientX, y: ev.clientY, v: Object.assign({}, view) }; });
  window.addEventListener("mouseup", () => { drag = null; });
  canvas.addEventListener("mousemove", (ev) => {
    if (drag) {
      const dt = (ev.clientX - drag.x) / plotW() * (drag.v.x1 - drag.v.x0);
      const dr = (ev.clientY - drag.y) / plotH() * (drag.v.r1 - drag.v.r0);
      const span = drag.v.r1 - drag.v.r0;
      view.x0 = drag.v.x0 - dt; view.x1 = drag.v.x1 - dt;
      view.r0 = Math.min(Math.max(0, drag.v.r0 - dr), full.r1 - span); view.r1 = view.r0 + span;
      draw();
    }
    hover(ev);
  });
  canvas.addEventListener("mouseleave", () => { tip.style.display = "none"; });
  canvas.addEventListener("wheel", zoom, { passive: false });
  const reset = () => { view = Object.assign({}, full); draw(); };
  canvas.addEventListener("dblclick", reset);
  document.getElementById("reset").addEventListener("click", reset);
  // The layout can settle after the script ran (a headless window is resized late): redraw
  // whenever the canvas's box changes.
  if (window.ResizeObserver) new ResizeObserver(() => { resize(); draw(); }).observe(canvas.parentElement);
  else window.addEventListener("resize", () => { resize(); draw(); });
  resize();
  draw();
  // For the tests and docs/performance.md: the first draw's cost, and the time from the
  // start of navigation to the page being drawn (parsing the data included).
  document.body.dataset.drawMs = (performance.now() - scriptStart).toFixed(1);
  document.body.dataset.loadMs = performance.now().toFixed(1);
  document.body.dataset.ready = "1";
})();
